package agent

import (
	"bytes"
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// fixedNow stamps events in tests.
var fixedNow = time.UnixMilli(1710000000000)

func ev(k any) *canonical.Event {
	e := &canonical.Event{}
	canonical.SetKind(e, k)
	return e
}

func val(v any) *structpb.Value { return canonical.Value(v) }

// encodeCases are canonical runs covering every kind the encoder maps.
var encodeCases = map[string]func() []*canonical.Event{
	"agent": func() []*canonical.Event {
		b := canonical.NewBuilder()
		var out []*canonical.Event
		out = b.Lifecycle(out, canonical.StatusRunning)
		out = b.StartMessage(out, "msg-1", "assistant")
		out[len(out)-1].GetMessageStart().Metadata = map[string]*structpb.Value{"provider": val("scripted"), "model": val("demo"), "nested": val(map[string]any{"dropped": true})}
		out = b.Reasoning(out, "Let me ")
		out = b.Reasoning(out, "think.")
		out = b.ToolCall(out, "call-1", "calculator")
		out = b.ToolArgs(out, `{"expression"`)
		out = b.ToolArgs(out, `: "6 * 7"}`)
		out = b.FinishMessage(out, canonical.FinishToolCalls, nil)
		out = b.Emit(out, ev(&canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{ToolCallId: "call-1", Name: "calculator", Input: val(map[string]any{"expression": "6 * 7"})}}))
		out = b.Emit(out, ev(&canonical.KindToolOutput{ToolOutput: &canonical.ToolOutput{ToolCallId: "call-1", Delta: "4"}}))
		out = b.Emit(out, ev(&canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{ToolCallId: "call-1", Output: val(map[string]any{"result": 42})}}))
		out = b.StartMessage(out, "msg-2", "assistant")
		out = b.Text(out, "6 * 7 = ")
		out = b.Text(out, "42.")
		out = b.FinishMessage(out, canonical.FinishStop, &canonical.Usage{InputTokens: 12, OutputTokens: 5, ReasoningTokens: 2, CacheReadTokens: 3})
		out = b.End(out, canonical.StatusCompleted, nil)
		for _, e := range out {
			if e.GetLifecycle() == nil {
				e.GraphNode = "agent"
			}
		}
		return out
	},
	"data": func() []*canonical.Event {
		b := canonical.NewBuilder()
		var out []*canonical.Event
		out = b.StartMessage(out, "msg-1", "assistant")
		out = b.StartBlock(out, canonical.BlockData, "img-1", "", "image/png", "")
		for _, chunk := range []string{"\x89", "PN", "G\r\n\x1a", "\n\x00\x00\x00\x0d"} {
			out = append(out, &canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Index: 0, Data: []byte(chunk)}}})
		}
		out = b.FinishBlock(out)
		out = b.Data(out, "audio/wav", []byte("RIFF"))
		out = b.Ref(out, "video/mp4", "https://example.com/v.mp4")
		out = b.Data(out, "application/pdf", nil)
		out = b.FinishMessage(out, canonical.FinishStop, nil)
		return b.End(out, canonical.StatusCompleted, nil)
	},
	"failure": func() []*canonical.Event {
		b := canonical.NewBuilder()
		var out []*canonical.Event
		out = b.Lifecycle(out, canonical.StatusRunning)
		out = b.Text(out, "partial")
		return b.End(out, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "upstream went away"))
	},
	"cancelled": func() []*canonical.Event {
		b := canonical.NewBuilder()
		var out []*canonical.Event
		out = b.Text(out, "partial")
		return b.End(out, canonical.StatusCancelled, canonical.Errorf(canonical.CodeCanceled, "context canceled"))
	},
	"interrupt": func() []*canonical.Event {
		b := canonical.NewBuilder()
		var out []*canonical.Event
		out = b.Lifecycle(out, canonical.StatusRunning)
		out = b.Emit(out, ev(&canonical.KindInputRequested{InputRequested: &canonical.InputRequested{InterruptId: "int-1", Payload: val(map[string]any{"question": "Approve?"})}}))
		return b.End(out, canonical.StatusInterrupted, nil)
	},
	"subgraph": func() []*canonical.Event {
		root := canonical.NewBuilder()
		sub := canonical.NewBuilder("researcher:abc")
		var out []*canonical.Event
		out = root.Lifecycle(out, canonical.StatusRunning)
		out = root.Emit(out, ev(&canonical.KindInputAnswered{InputAnswered: &canonical.InputAnswered{InterruptIds: []string{"int-1", "int-2"}}}))
		out = root.Emit(out, ev(&canonical.KindStateSnapshot{StateSnapshot: &canonical.StateSnapshot{Values: val(map[string]any{"messages": []any{}, "topic": "x"})}}))
		out = root.Emit(out, ev(&canonical.KindCheckpoint{Checkpoint: &canonical.Checkpoint{Id: "c1", Step: -1, Source: "input"}}))
		start := &canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusStarted, GraphName: "researcher", Cause: &canonical.Cause{Type: "toolCall", ToolCallId: "call-9"}, CheckpointId: "c1"}}}
		out = sub.Emit(out, start)
		out = sub.Emit(out, &canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusRunning, Cause: &canonical.Cause{Type: "edge", FromNode: "plan"}}}})
		out = sub.Text(out, "found \"it\"\n\tsee é ✓ 😀")
		out = sub.FinishMessage(out, canonical.FinishLength, &canonical.Usage{OutputTokens: 9, TotalTokens: 10})
		out = sub.Emit(out, ev(&canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{ToolCallId: "call-2", Error: &canonical.ErrorProto{Code: uint32(canonical.CodeDeadlineExceeded), Message: "search timed out"}}}))
		out = sub.Emit(out, &canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusCompleted}}})
		out = root.Emit(out, ev(&canonical.KindStateUpdate{StateUpdate: &canonical.StateUpdate{Node: "researcher", Values: val(map[string]any{"topic": "y"})}}))
		out = root.Emit(out, ev(&canonical.KindTask{Task: &canonical.Task{Payload: val(map[string]any{"id": "t1", "name": "researcher", "result": nil})}}))
		out = root.Emit(out, ev(&canonical.KindCustom{Custom: &canonical.Custom{Name: "progress", Payload: val(0.5)}}))
		out = root.Emit(out, ev(&canonical.KindCustom{Custom: &canonical.Custom{Payload: val([]any{1e-7, 1e21, 123456789.0, true, nil})}}))
		out = root.Emit(out, ev(&canonical.KindError{Error: &canonical.ErrorProto{Code: uint32(canonical.CodeUnavailable), Message: "primary model failed; falling back"}}))
		return root.End(out, canonical.StatusCompleted, nil)
	},
	"tool-args": func() []*canonical.Event {
		b := canonical.NewBuilder()
		var out []*canonical.Event
		out = b.StartMessage(out, "", "assistant")
		out = b.ToolCall(out, "", "broken")
		out = b.ToolArgs(out, `{"a": `)
		out = b.ToolCall(out, "call-2", "noargs")
		out = b.ToolCall(out, "call-3", "list")
		out = b.ToolArgs(out, `[1, 2]`)
		out = b.ToolCall(out, "call-4", "spaced")
		out = b.ToolArgs(out, "{ \"q\" :\n \"x\" }")
		out = b.FinishMessage(out, canonical.FinishToolCalls, nil)
		out = b.StartMessage(out, "u-1", "user")
		out = b.Text(out, "hi")
		out = b.StartMessage(out, "s-1", "system")
		out = b.Text(out, "be brief")
		return b.End(out, canonical.StatusCompleted, nil)
	},
}

// encodeRun encodes a canonical run to frames with seqs from 1.
func encodeRun(t testing.TB, events []*canonical.Event) [][]byte {
	t.Helper()
	enc := NewEncoder(EncoderConfig{GraphName: "demo", Now: func() time.Time { return fixedNow }})
	var frames [][]byte
	var out []wireEvent
	for _, e := range events {
		var err error
		out, err = enc.Encode(e, out[:0])
		if err != nil {
			t.Fatal(err)
		}
		for i := range out {
			frames = append(frames, newFrame(uint64(len(frames)+1), &out[i]))
		}
	}
	for _, w := range enc.Flush(nil) {
		frames = append(frames, newFrame(uint64(len(frames)+1), &w))
	}
	return frames
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !sameFrames(t, got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// sameFrames reports whether two transcripts, one JSON frame a line, hold
// the same frames: the same JSON values, member order and spelling aside
// (the protocol's frames are JSON, not bytes).
func sameFrames(t *testing.T, got, want []byte) bool {
	t.Helper()
	g, w := bytes.Split(bytes.TrimSpace(got), []byte("\n")), bytes.Split(bytes.TrimSpace(want), []byte("\n"))
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		var gv, wv any
		if err := json.Unmarshal(g[i], &gv); err != nil {
			t.Fatalf("frame %d: %s: %v", i, g[i], err)
		}
		if err := json.Unmarshal(w[i], &wv); err != nil {
			t.Fatalf("golden frame %d: %s: %v", i, w[i], err)
		}
		if !reflect.DeepEqual(gv, wv) {
			return false
		}
	}
	return true
}

func TestEncodeGolden(t *testing.T) {
	for name, build := range encodeCases {
		t.Run(name, func(t *testing.T) {
			events := build()
			for _, e := range events {
				e.ThreadId, e.RunId, e.TimeUnixNano = "t", "r", fixedNow.UnixNano()
			}
			if err := canonical.Validate(events); err != nil {
				t.Fatalf("test case breaks the canonical model: %v", err)
			}
			frames := encodeRun(t, events)
			var all []byte
			for _, f := range frames {
				if !json.Valid(f) || !utf8.Valid(f) {
					t.Fatalf("invalid JSON frame: %s", f)
				}
				all = append(append(all, f...), '\n')
			}
			golden(t, filepath.Join("testdata", "encode", name+".golden"), all)
		})
	}
}

// TestEncodeDataBase64 checks that the data-delta slices concatenate to the
// base64 of the block and that content-block-finish carries it whole.
func TestEncodeDataBase64(t *testing.T) {
	raw := []byte("abcdefghijklmnopqrstuvwxyz0123456789")
	for seed := range 50 {
		b := canonical.NewBuilder()
		var events []*canonical.Event
		events = b.StartBlock(events, canonical.BlockData, "", "", "image/png", "")
		rest := raw
		for i := 0; len(rest) > 0; i++ {
			n := min(len(rest), 1+(seed*7+i*3)%5)
			events = append(events, &canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Data: rest[:n]}}})
			rest = rest[n:]
		}
		events = b.End(b.FinishBlock(events), canonical.StatusCompleted, nil)
		var joined, final string
		for _, f := range encodeRun(t, events) {
			var env struct {
				Params struct {
					Data struct {
						Event string `json:"event"`
						Delta struct {
							Data string `json:"data"`
						} `json:"delta"`
						Content struct {
							Base64 string `json:"base64"`
						} `json:"content"`
					} `json:"data"`
				} `json:"params"`
			}
			if err := json.Unmarshal(f, &env); err != nil {
				t.Fatal(err)
			}
			switch env.Params.Data.Event {
			case "content-block-delta":
				joined += env.Params.Data.Delta.Data
			case "content-block-finish":
				final = env.Params.Data.Content.Base64
			}
		}
		got, err := base64.StdEncoding.DecodeString(joined)
		if err != nil || !bytes.Equal(got, raw) || final != base64.StdEncoding.EncodeToString(raw) {
			t.Fatalf("seed %d: joined deltas %q (%v), finish %q", seed, joined, err, final)
		}
	}
}

func TestEncodeBlockLimit(t *testing.T) {
	enc := NewEncoder(EncoderConfig{MaxBlockBytes: 10})
	b := canonical.NewBuilder()
	events := b.Text(nil, "0123456789")
	events = b.Text(events, "x")
	var out []wireEvent
	var err error
	for _, e := range events {
		if out, err = enc.Encode(e, out[:0]); err != nil {
			break
		}
	}
	if canonical.CodeOf(err) != canonical.CodeResourceExhausted || !strings.Contains(err.Error(), "MaxBlockBytes") {
		t.Fatalf("err = %v, want ResourceExhausted naming MaxBlockBytes", err)
	}
}

// Strings reach the wire as JSON strings that read back as they were;
// each invalid UTF-8 byte reads back as U+FFFD.
func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\x00\x01\x1f\x7f", "line\nbreak\r\ttab", "é✓😀", "bad \xff utf8 \xc3", "\u2028\u2029", "<&>"} {
		var back string
		if err := json.Unmarshal(appendString(nil, s), &back); err != nil || back != strings.ToValidUTF8(s, "\uFFFD") {
			t.Errorf("%q: read back %q (%v)", s, back, err)
		}
	}
}

func TestErrorTables(t *testing.T) {
	enum := map[string]bool{errInvalidArgument: true, errUnknownCommand: true, errUnknownError: true, errNoSuchRun: true,
		errNoSuchSubscription: true, errNoSuchNamespace: true, errNoSuchInterrupt: true, errNoSuchCheckpoint: true,
		errPermissionDenied: true, errNotSupported: true}
	want := map[canonical.Code]string{
		canonical.CodeOK: errUnknownError, canonical.CodeCanceled: errUnknownError, canonical.CodeUnknown: errUnknownError,
		canonical.CodeInvalidArgument: errInvalidArgument, canonical.CodeDeadlineExceeded: errUnknownError,
		canonical.CodeNotFound: errInvalidArgument, canonical.CodeAlreadyExists: errInvalidArgument,
		canonical.CodePermissionDenied: errPermissionDenied, canonical.CodeResourceExhausted: errInvalidArgument,
		canonical.CodeFailedPrecondition: errInvalidArgument, canonical.CodeAborted: errUnknownError,
		canonical.CodeOutOfRange: errInvalidArgument, canonical.CodeUnimplemented: errNotSupported,
		canonical.CodeInternal: errUnknownError, canonical.CodeUnavailable: errUnknownError,
		canonical.CodeDataLoss: errUnknownError, canonical.CodeUnauthenticated: errPermissionDenied,
	}
	for _, c := range canonical.AllCodes {
		got := wireCode(c)
		if got != want[c] || !enum[got] {
			t.Errorf("wireCode(%v) = %q, want %q", c, got, want[c])
		}
		if s := httpStatus(c); s < 400 || s > 599 {
			t.Errorf("httpStatus(%v) = %d", c, s)
		}
	}
	back := map[string]canonical.Code{
		errInvalidArgument: canonical.CodeInvalidArgument, errUnknownCommand: canonical.CodeUnimplemented,
		errUnknownError: canonical.CodeUnknown, errNoSuchRun: canonical.CodeNotFound,
		errNoSuchSubscription: canonical.CodeNotFound, errNoSuchNamespace: canonical.CodeNotFound,
		errNoSuchInterrupt: canonical.CodeNotFound, errNoSuchCheckpoint: canonical.CodeNotFound,
		errPermissionDenied: canonical.CodePermissionDenied, errNotSupported: canonical.CodeUnimplemented,
		errResumeGap: canonical.CodeOutOfRange, "something_else": canonical.CodeUnknown,
	}
	for s, c := range back {
		if got := canonicalCode(s); got != c {
			t.Errorf("canonicalCode(%q) = %v, want %v", s, got, c)
		}
	}
	// Every wire code the frontend sends survives a round trip to its class.
	for s := range enum {
		if wireCode(canonicalCode(s)) == "" {
			t.Errorf("%s has no way back", s)
		}
	}
}

// BenchmarkEncodeDelta is the per-delta cost of the frontend's hot path: a
// canonical text delta to the complete envelope frame stored in the thread
// buffer (target <= 1.5 µs and <= 3 allocs).
func BenchmarkEncodeDelta(b *testing.B) {
	enc := NewEncoder(EncoderConfig{})
	bld := canonical.NewBuilder()
	start := bld.StartBlock(nil, canonical.BlockText, "", "", "", "")
	var out []wireEvent
	for _, e := range start {
		out, _ = enc.Encode(e, out[:0])
	}
	delta := &canonical.Event{TimeUnixNano: fixedNow.UnixNano(), GraphNode: "agent", Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Index: 0, Text: " token"}}}
	b.ReportAllocs()
	var seq uint64
	for b.Loop() {
		out, _ = enc.Encode(delta, out[:0])
		seq++
		_ = newFrame(seq, &out[0])
		if len(enc.root.acc) > 1<<20 {
			enc.root.acc = enc.root.acc[:0]
		}
	}
}

// A delta's frame is exactly the envelope the
// reference sends (member order included); a string the upstream sent as
// invalid UTF-8 is U+FFFD, and data the runtime assembled that is not JSON
// is null (jsonOrNull).
func TestDeltaFrameBytes(t *testing.T) {
	enc := NewEncoder(EncoderConfig{})
	bld := canonical.NewBuilder()
	var out []wireEvent
	for _, e := range bld.StartBlock(nil, canonical.BlockText, "", "", "", "") {
		e.Namespace = []string{"sub:1"}
		out, _ = enc.Encode(e, out[:0])
	}
	delta := &canonical.Event{Namespace: []string{"sub:1"}, TimeUnixNano: fixedNow.UnixNano(), GraphNode: "agent",
		Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Index: 0, Text: "a \"b\"\n<\xff>"}}}
	out, err := enc.Encode(delta, out[:0])
	if err != nil || len(out) != 1 {
		t.Fatalf("%d events, %v", len(out), err)
	}
	want := `{"type":"event","event_id":"42","seq":42,"method":"messages","params":{"namespace":["sub:1"],"timestamp":1710000000000,"node":"agent",` +
		`"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"a \"b\"\n<` + "\ufffd" + `>"}}}}`
	if got := string(newFrame(42, &out[0])); got != want {
		t.Fatalf("frame\n got %s\nwant %s", got, want)
	}
	// One array, sized up front, whatever the seq's digits.
	if n := testing.AllocsPerRun(100, func() { newFrame(1<<63, &out[0]) }); n != 1 {
		t.Fatalf("a delta's frame takes %v allocations, want 1", n)
	}
	bad := wireEvent{method: methodValues, timeMs: 5, data: jsonOrNull([]byte(`{"a":`))}
	if got := string(newFrame(7, &bad)); got != `{"type":"event","event_id":"7","seq":7,"method":"values","params":{"namespace":[],"timestamp":5,"data":null}}` {
		t.Fatalf("frame of data that is not JSON: %s", got)
	}
}

// FuzzFrameEnvelope: the envelope newFrame writes around data is what the
// JSON library marshals for the same members in the same order, whatever
// the method, namespace, node and time (escapes, invalid UTF-8).
func FuzzFrameEnvelope(f *testing.F) {
	f.Add(uint64(1), "messages", "sub:1", "agent", int64(1710000000000), `{"a":[1,"x"]}`)
	f.Add(uint64(0), "values", "", "", int64(-5), `null`)
	f.Add(uint64(1<<63), "custom", "a\"\x00\xff", "n\u2028<>&", int64(0), `"s"`)
	f.Fuzz(func(t *testing.T, seq uint64, method, ns, node string, ms int64, data string) {
		if !json.Valid([]byte(data)) {
			t.Skip()
		}
		data = string(jsonOrNull([]byte(data))) // as the Encoder and jsonOrNull write it
		var namespace []string
		if ns != "" {
			namespace = strings.Split(ns, "/")
		}
		w := wireEvent{method: method, namespace: namespace, node: node, timeMs: ms, data: []byte(data)}
		type params struct {
			Namespace []string   `json:"namespace"`
			Timestamp int64      `json:"timestamp"`
			Node      string     `json:"node,omitempty"`
			Data      json.Value `json:"data"`
		}
		ref := struct {
			Type    string `json:"type"`
			EventID string `json:"event_id"`
			Seq     uint64 `json:"seq"`
			Method  string `json:"method"`
			Params  params `json:"params"`
		}{"event", strconv.FormatUint(seq, 10), seq, method, params{Namespace: append([]string{}, namespace...), Timestamp: ms, Data: json.Value(data)}}
		if method == methodMessages || method == methodTools {
			ref.Params.Node = node
		}
		want, err := json.Marshal(&ref, wireJSON)
		if err != nil {
			t.Fatal(err)
		}
		if got := newFrame(seq, &w); string(got) != string(want) {
			t.Fatalf("frame\n got %s\nwant %s", got, want)
		}
	})
}

// A subgraph's failed lifecycle without a message is sent without an
// error member, as LangGraph sends it (issue 30 #4); the root's keeps
// "run failed", which the SDK shows as the run's error.
func TestSubgraphFailedWithoutMessage(t *testing.T) {
	for _, tc := range []struct {
		ns   []string
		want string
	}{
		{[]string{"tools:1"}, `{"event":"failed"}`},
		{nil, `{"event":"failed","error":"run failed"}`},
	} {
		enc := NewEncoder(EncoderConfig{})
		ev := &canonical.Event{Namespace: tc.ns, Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusFailed}}}
		out, err := enc.Encode(ev, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("%d events, %v", len(out), err)
		}
		if got := string(out[0].data); got != tc.want {
			t.Errorf("namespace %v: data %s, want %s", tc.ns, got, tc.want)
		}
	}
}

// FuzzTextDelta: the content-block-delta appendTextDelta writes is what
// blockEvent.MarshalJSONTo writes through the library for the same delta
// (escapes, invalid UTF-8, any index, with and without a run id).
func FuzzTextDelta(f *testing.F) {
	f.Add(uint32(0), uint8(0), "tok ", "")
	f.Add(uint32(7), uint8(1), "a\"\\\x00\xff\u2028<>&é", "run-1")
	f.Add(uint32(1<<31), uint8(2), `{"a":`, "r\"un")
	f.Fuzz(func(t *testing.T, index uint32, kind uint8, value, runID string) {
		if value == "" {
			t.Skip() // an empty member is left out: not a text delta
		}
		d := []wireDelta{{Type: "text-delta", Text: value}, {Type: "reasoning-delta", Reasoning: value}, {Type: "tool-call-delta", Args: value}}[kind%3]
		name, v, ok := d.textMember()
		if !ok || v != value {
			t.Fatalf("textMember(%+v) = %q, %q, %v", d, name, v, ok)
		}
		var buf appendSink
		enc := json.NewEncoder(&buf, wireJSON)
		ev := blockEvent{Event: "content-block-delta", Index: index, Delta: &d, RunID: runID}
		if err := ev.MarshalJSONTo(enc); err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSuffix(string(buf.b), "\n")
		if got := appendTextDelta(nil, index, d.Type, name, value, runID); string(got) != want {
			t.Fatalf("delta\n got %s\nwant %s", got, want)
		}
	})
}
