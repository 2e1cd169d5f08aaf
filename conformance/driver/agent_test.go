package driver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	agentpeer "github.com/interlingua-dev/interlingua/conformance/peers/agent"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// wireEvent is a script line's event as the test reads it.
type wireEvent struct {
	method string
	ns     []string
	node   string
	data   map[string]json.RawMessage
	delay  int
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func intOf(raw json.RawMessage) int {
	var n int
	_ = json.Unmarshal(raw, &n)
	return n
}

// foldAgent reads a script as an agent-protocol client would, checking
// the protocol's rules on the way (reference sections 5.2-5.6), and
// returns the transcript it carries: blocks from the finished blocks,
// each checked against its deltas; a messages error event is a
// non-terminal error block, unless the run fails right after it (then it
// carries the failure's code).
func foldAgent(t *testing.T, sc agentpeer.Script) *cv1.Transcript {
	t.Helper()
	f := &agentFold{t: t, b: &cv1.Transcript{}}
	for i, e := range scriptEvents(t, sc) {
		f.event(i, e)
	}
	if !f.ended || !f.seenStart {
		t.Fatalf("the script has no running lifecycle or no end (started %v, ended %v)", f.seenStart, f.ended)
	}
	return transcript.Normalize(f.b)
}

// scriptEvents reads a script's lines as the events a client receives; a
// pause (only a last cancel) is the method "pause".
func scriptEvents(t *testing.T, sc agentpeer.Script) []wireEvent {
	t.Helper()
	var evs []wireEvent
	for i, l := range sc.Lines {
		if l.Pause != "" {
			if i != len(sc.Lines)-1 || l.Pause != "cancel" {
				t.Fatalf("line %d: pause %q, want only a last pause cancel", i, l.Pause)
			}
			evs = append(evs, wireEvent{method: "pause"})
			continue
		}
		var p struct {
			Namespace []string                   `json:"namespace"`
			Node      string                     `json:"node"`
			Data      map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(l.Params, &p); err != nil || p.Namespace == nil || p.Data == nil {
			t.Fatalf("line %d: params %s: namespace and data required (%v)", i, l.Params, err)
		}
		if !utf8.Valid(l.Params) || bytes.Contains(l.Params, []byte("\uFFFD")) {
			t.Fatalf("line %d: not whole UTF-8: %s", i, l.Params)
		}
		evs = append(evs, wireEvent{method: l.Method, ns: p.Namespace, node: p.Node, data: p.Data, delay: l.DelayMs})
	}
	return evs
}

// agentFold is foldAgent's client: the transcript so far and the message
// and block open.
type agentFold struct {
	t         *testing.T
	b         *cv1.Transcript
	msgOpen   bool
	next      int
	blk       map[string]json.RawMessage // the open block's start content
	blkIndex  int
	acc       strings.Builder
	data      []byte
	errCode   string // the last messages error's code, while it may end the run
	ended     bool
	seenStart bool
}

// event folds the script's event i.
func (f *agentFold) event(i int, e wireEvent) {
	t := f.t
	if f.ended {
		t.Fatalf("event %d (%s) after the run's terminal event", i, e.method)
	}
	if len(e.ns) != 0 {
		t.Fatalf("event %d: namespace %v, want root", i, e.ns)
	}
	if e.delay > 0 && str(e.data["event"]) != "content-block-delta" {
		t.Fatalf("event %d: a delay before %s, want only before deltas", i, str(e.data["event"]))
	}
	if f.errCode != "" && !(e.method == "lifecycle" && str(e.data["event"]) == "failed") {
		f.b.Blocks = append(f.b.Blocks, &cv1.Block{Type: transcript.Error, Text: f.errCode})
		f.errCode = ""
	}
	switch e.method {
	case "pause":
		if f.blk != nil { // a client keeps what the open block streamed
			f.b.Blocks = append(f.b.Blocks, streamedBlock(f.blk, f.acc.String(), f.data))
		}
		f.b.Status, f.b.Code = transcript.Cancelled, canonical.CodeCanceled.String()
		f.ended = true
	case "lifecycle":
		f.lifecycle(i, e)
	case "values", "checkpoints":
	case "input.requested":
		f.b.Interrupts = append(f.b.Interrupts, str(e.data["interrupt_id"]))
	case "tools":
		f.tools(i, e)
	case "messages":
		f.messages(i, e)
	default:
		t.Fatalf("event %d: method %s", i, e.method)
	}
}

func (f *agentFold) lifecycle(i int, e wireEvent) {
	switch ev := str(e.data["event"]); ev {
	case "running":
		if i != 0 || str(e.data["graph_name"]) != AgentGraph {
			f.t.Fatalf("event %d: running, want it first with graph_name", i)
		}
		f.seenStart = true
	case "completed", "interrupted", "failed":
		if f.msgOpen {
			f.t.Fatalf("event %d: %s with a message open", i, ev)
		}
		f.b.Status, f.ended = ev, true
		if ev == "failed" {
			f.b.Code = canonical.CodeUnknown.String()
			if f.errCode != "" {
				f.b.Code = f.errCode
			}
		}
	default:
		f.t.Fatalf("event %d: lifecycle %q", i, ev)
	}
	f.errCode = ""
}

func (f *agentFold) tools(i int, e wireEvent) {
	if e.node != "tools" {
		f.t.Fatalf("event %d: tools on node %q", i, e.node)
	}
	tl := &cv1.Tool{Id: str(e.data["tool_call_id"])}
	switch str(e.data["event"]) {
	case "tool-started":
		tl.Event, tl.Name, tl.Value = "started", str(e.data["tool_name"]), jsonOf(f.t, e.data["input"])
	case "tool-output-delta":
		tl.Event, tl.Value = "output", str(e.data["delta"])
	case "tool-finished":
		tl.Event, tl.Value = "finished", jsonOf(f.t, e.data["output"])
	case "tool-error":
		tl.Event, tl.Value = "failed", str(e.data["code"])
	default:
		f.t.Fatalf("event %d: tools %s", i, e.data["event"])
	}
	f.b.Tools = append(f.b.Tools, tl)
}

func (f *agentFold) messages(i int, e wireEvent) {
	t := f.t
	if e.node != "agent" {
		t.Fatalf("event %d: messages on node %q", i, e.node)
	}
	ev := str(e.data["event"])
	if ev != "message-start" && ev != "error" && !f.msgOpen {
		t.Fatalf("event %d: %s outside a message", i, ev)
	}
	switch ev {
	case "message-start":
		if f.msgOpen {
			t.Fatalf("event %d: message-start in an open message", i)
		}
		if str(e.data["id"]) == "" || str(e.data["role"]) == "" {
			t.Fatalf("event %d: message-start without id or role", i)
		}
		f.msgOpen, f.next = true, 0
	case "content-block-start":
		if f.blk != nil || intOf(e.data["index"]) != f.next {
			t.Fatalf("event %d: block %s starts, want index %d with none open", i, e.data["index"], f.next)
		}
		_ = json.Unmarshal(e.data["content"], &f.blk)
		f.blkIndex, f.next = f.next, f.next+1
		f.acc.Reset()
		f.data = nil
	case "content-block-delta":
		f.delta(i, e)
	case "content-block-finish":
		if f.blk == nil || intOf(e.data["index"]) != f.blkIndex {
			t.Fatalf("event %d: finish of block %s, not the open one", i, e.data["index"])
		}
		var c map[string]json.RawMessage
		_ = json.Unmarshal(e.data["content"], &c)
		f.b.Blocks = append(f.b.Blocks, finishedBlock(t, i, f.blk, c, f.acc.String(), f.data))
		f.blk = nil
	case "message-finish":
		if f.blk != nil {
			t.Fatalf("event %d: message-finish with block %d open", i, f.blkIndex)
		}
		switch r := str(e.data["reason"]); r {
		case "stop", "tool_calls", "length", "content_filter":
		default:
			t.Fatalf("event %d: reason %q", i, r)
		}
		f.msgOpen = false
	case "error":
		if str(e.data["message"]) == "" {
			t.Fatalf("event %d: an error without message", i)
		}
		if f.blk != nil {
			f.b.Blocks = append(f.b.Blocks, streamedBlock(f.blk, f.acc.String(), f.data))
		}
		f.errCode, f.msgOpen, f.blk = str(e.data["code"]), false, nil
	default:
		t.Fatalf("event %d: messages %s", i, ev)
	}
}

// delta folds a content-block-delta into the open block.
func (f *agentFold) delta(i int, e wireEvent) {
	var d map[string]json.RawMessage
	_ = json.Unmarshal(e.data["delta"], &d)
	if f.blk == nil || intOf(e.data["index"]) != f.blkIndex {
		f.t.Fatalf("event %d: a delta for block %s, not the open one", i, e.data["index"])
	}
	typ := str(f.blk["type"])
	switch dt := str(d["type"]); {
	case dt == "text-delta" && typ == "text":
		f.acc.WriteString(str(d["text"]))
	case dt == "reasoning-delta" && typ == "reasoning":
		f.acc.WriteString(str(d["reasoning"]))
	case dt == "tool-call-delta" && typ == "tool_call_chunk":
		f.acc.WriteString(str(d["args"]))
	case dt == "data-delta" && str(d["encoding"]) == "base64":
		raw, err := base64.StdEncoding.DecodeString(str(d["data"]))
		if err != nil {
			f.t.Fatalf("event %d: a data slice is not whole base64: %v", i, err)
		}
		f.data = append(f.data, raw...)
	default:
		f.t.Fatalf("event %d: delta %s on a %s block", i, dt, typ)
	}
}

// finishedBlock checks a finished block against its start and deltas and
// returns it as a transcript block.
func finishedBlock(t *testing.T, i int, start, c map[string]json.RawMessage, acc string, data []byte) *cv1.Block {
	t.Helper()
	switch typ := str(c["type"]); typ {
	case "text", "reasoning":
		if str(start["type"]) != typ || str(c[typ]) != acc {
			t.Fatalf("event %d: finished %s %q, deltas say %q", i, typ, str(c[typ]), acc)
		}
		return &cv1.Block{Type: typ, Text: acc}
	case "tool_call", "invalid_tool_call":
		if str(start["type"]) != "tool_call_chunk" || str(c["id"]) != str(start["id"]) || str(c["name"]) != str(start["name"]) {
			t.Fatalf("event %d: finished %s does not match its start %v", i, typ, start)
		}
		if typ == "tool_call" {
			var got, want any
			if json.Unmarshal(c["args"], &got) != nil || json.Unmarshal([]byte(acc), &want) != nil || !cmp.Equal(got, want) {
				t.Fatalf("event %d: tool_call args %s, deltas say %q", i, c["args"], acc)
			}
		} else if str(c["args"]) != acc {
			t.Fatalf("event %d: invalid_tool_call args %s, deltas say %q", i, c["args"], acc)
		}
		return &cv1.Block{Type: transcript.ToolCall, Text: acc, Id: str(c["id"]), Name: str(c["name"]), Mime: "application/json"}
	case "image", "audio", "video", "file":
		if url := str(c["url"]); url != "" {
			return &cv1.Block{Type: transcript.Ref, Mime: str(c["mime_type"]), Ref: url}
		}
		if str(c["base64"]) != base64.StdEncoding.EncodeToString(data) {
			t.Fatalf("event %d: finished base64 differs from the data slices", i)
		}
		return &cv1.Block{Type: transcript.Data, Mime: str(c["mime_type"]), Data: data}
	default:
		t.Fatalf("event %d: finished block type %q", i, typ)
	}
	return nil
}

// streamedBlock is an unfinished block as its deltas left it.
func streamedBlock(start map[string]json.RawMessage, acc string, data []byte) *cv1.Block {
	switch typ := str(start["type"]); typ {
	case "text", "reasoning":
		return &cv1.Block{Type: typ, Text: acc}
	case "tool_call_chunk":
		return &cv1.Block{Type: transcript.ToolCall, Text: acc, Id: str(start["id"]), Name: str(start["name"]), Mime: "application/json"}
	}
	return &cv1.Block{Type: transcript.Data, Mime: str(start["mime_type"]), Data: data}
}

func jsonOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if len(raw) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	pv, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return transcript.JSON(pv)
}

// Every case's agent script follows the protocol's rules and carries the
// case's ideal transcript; a refusal is run.start's error response.
func TestAgentScriptCarriesEveryCase(t *testing.T) {
	all, err := cases.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		t.Run(c.GetName(), func(t *testing.T) {
			r, prompt := c.GetResponse(), c.GetRequest().GetPrompt()
			sc := AgentScript(r, prompt)
			if sc.Input != prompt || sc.WriteBytes != int(r.GetWriteBytes()) {
				t.Fatalf("input %q, write bytes %d", sc.Input, sc.WriteBytes)
			}
			want := Ideal(r, prompt)
			if RefusesBeforeFirstEvent(r) {
				f := FailureError(r.GetFailure())
				if sc.Refusal == nil || sc.Refusal.Code != AgentErrorCode(f.Code) || sc.Refusal.Message != f.Message || len(sc.Lines) != 0 {
					t.Fatalf("refusal %+v with %d lines, want %s %q", sc.Refusal, len(sc.Lines), AgentErrorCode(f.Code), f.Message)
				}
				return
			}
			if sc.Refusal != nil {
				t.Fatalf("refused: %+v", sc.Refusal)
			}
			got := foldAgent(t, sc)
			if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// Definitions the suite's cases do not cover: how an agent server ends
// them.
func TestAgentScriptEnds(t *testing.T) {
	text := func(s string) *cv1.Item { return &cv1.Item{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: s}}} }
	tool := &cv1.Item{Kind: &cv1.Item_Tool{Tool: &cv1.ToolActivity{Id: "c", Name: "n"}}}
	for _, tc := range []struct {
		name string
		r    *cv1.Response
		want *cv1.Transcript
	}{
		{
			// Between messages, the failure is the lifecycle's string only.
			name: "failure after tool activity",
			r:    &cv1.Response{Items: []*cv1.Item{text("a"), tool}, Failure: &cv1.Failure{Code: "internal", Message: "m"}},
			want: &cv1.Transcript{Blocks: []*cv1.Block{{Type: "text", Text: "a"}},
				Tools:  []*cv1.Tool{{Event: "started", Id: "c", Name: "n"}, {Event: "finished", Id: "c", Value: "null"}},
				Status: "failed", Code: "unknown"},
		},
		{
			// A model failing before its message: an error event of its own.
			name: "error between messages",
			r:    &cv1.Response{Items: []*cv1.Item{tool, {Kind: &cv1.Item_Error{Error: &cv1.Failure{Code: "unavailable", Message: "x"}}}, text("b")}},
			want: &cv1.Transcript{Blocks: []*cv1.Block{{Type: "error", Text: "unavailable"}, {Type: "text", Text: "b"}},
				Tools:  []*cv1.Tool{{Event: "started", Id: "c", Name: "n"}, {Event: "finished", Id: "c", Value: "null"}},
				Status: "completed"},
		},
		{
			name: "arguments that are not an object",
			r: &cv1.Response{Items: []*cv1.Item{{Kind: &cv1.Item_ToolCall{ToolCall: &cv1.ToolCall{Id: "c", Name: "n",
				Arguments: &cv1.Text{Text: `[1, "é"]`, Cuts: []uint32{6}}}}}}},
			want: &cv1.Transcript{Blocks: []*cv1.Block{{Type: "tool_call", Text: `[1, "é"]`, Id: "c", Name: "n", Mime: "application/json"}},
				Status: "completed"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := AgentScript(tc.r, "p")
			got := foldAgent(t, sc)
			if d := cmp.Diff(transcript.Normalize(tc.want), got, protocmp.Transform()); d != "" {
				t.Fatal(d)
			}
		})
	}
	if got := AgentScript(&cv1.Response{Failure: &cv1.Failure{Code: "permission_denied", Message: "no"}}, "p").Refusal; got == nil || got.Code != "permission_denied" {
		t.Fatalf("refusal %+v", got)
	}
}

func TestAgentErrorCode(t *testing.T) {
	want := map[string]string{
		"invalid_argument": "invalid_argument", "not_found": "invalid_argument", "already_exists": "invalid_argument",
		"failed_precondition": "invalid_argument", "out_of_range": "invalid_argument", "resource_exhausted": "invalid_argument",
		"permission_denied": "permission_denied", "unauthenticated": "permission_denied", "unimplemented": "not_supported",
	}
	for _, c := range canonical.AllCodes {
		w := want[c.String()]
		if w == "" {
			w = "unknown_error"
		}
		if got := AgentErrorCode(c); got != w {
			t.Errorf("%s: %s, want %s", c, got, w)
		}
	}
}

// The scripts of the suite's small cases, one line per script line, as
// golden files (regenerate with -update): what the agent peer sends.
func TestAgentScriptGolden(t *testing.T) {
	all, err := cases.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.GetName() == "large-output" || c.GetName() == "slow-client" {
			continue // megabytes of the same 16 bytes
		}
		t.Run(c.GetName(), func(t *testing.T) {
			sc := AgentScript(c.GetResponse(), c.GetRequest().GetPrompt())
			var out bytes.Buffer
			head, _ := json.Marshal(map[string]any{"input": sc.Input, "write_bytes": sc.WriteBytes, "refusal": sc.Refusal})
			out.Write(head)
			out.WriteByte('\n')
			for _, l := range sc.Lines {
				b, err := json.Marshal(l)
				if err != nil {
					t.Fatal(err)
				}
				out.Write(b)
				out.WriteByte('\n')
			}
			golden(t, filepath.Join("testdata", "agent", c.GetName()+".jsonl"), out.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("%s differs (run with -update to accept):\n%s", path, got)
	}
}
