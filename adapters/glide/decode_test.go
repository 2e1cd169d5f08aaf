package glide

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

func TestDecodeRequest(t *testing.T) {
	user := func(s string) wireMessage { return wireMessage{Role: "user", Content: s} }
	for _, tc := range []struct {
		name  string
		frame string
		want  *requestFrame
		err   string // want this message
		errID string // and this id on the error
	}{
		{name: "minimal", frame: `{"id":"r1","message":{"role":"user","content":"hi"}}`,
			want: &requestFrame{ID: "r1", Message: user("hi")}},
		{name: "full", frame: `{"id":"r1","message":{"role":"user","content":"tell me a dad joke"},
			"message_history":[{"role":"system","content":"You are funny."}],
			"override_params":{"openai-gpt":{"message":{"role":"user","content":"short"}}},
			"metadata":{ "user_id": 42, "anything": "goes" }}`,
			want: &requestFrame{ID: "r1", Message: user("tell me a dad joke"),
				History:   []wireMessage{{Role: "system", Content: "You are funny."}},
				Overrides: map[string]wireMessage{"openai-gpt": user("short")},
				Metadata:  []byte(`{"user_id":42,"anything":"goes"}`)}},
		{name: "camelCase 0.0.3 aliases", frame: `{"id":"r1","message":{"role":"user","content":"q"},
			"messageHistory":[{"role":"assistant","content":"a"}],
			"overrideMessage":{"model_id":"m1","message":{"role":"user","content":"q2"}}}`,
			want: &requestFrame{ID: "r1", Message: user("q"), History: []wireMessage{{Role: "assistant", Content: "a"}},
				Overrides: map[string]wireMessage{"m1": user("q2")}}},
		{name: "keys match without case, as encoding/json does", frame: `{"ID":"r1","Message":{"Role":"user","CONTENT":"x"}}`,
			want: &requestFrame{ID: "r1", Message: user("x")}},
		{name: "names fold as strings.EqualFold does, long s included", frame: `{"id":"r1","meſſage":{"content":"x"},"MessageHistory":[{"content":"h"}]}`,
			want: &requestFrame{ID: "r1", Message: user("x"), History: []wireMessage{user("h")}}},
		{name: "underscores and dashes count", frame: `{"id":"r1","message":{"content":"x"},"message-history":[{"content":"h"}],"overrideparams":{"m":{}}}`,
			want: &requestFrame{ID: "r1", Message: user("x")}},
		{name: "the last of duplicates wins", frame: `{"id":"r0","ID":"r1","message":{"content":"x"},"message":{"content":"y"},"override_params":{"m":1,"m":{"message":{"content":"o"}}}}`,
			want: &requestFrame{ID: "r1", Message: user("y"), Overrides: map[string]wireMessage{"m": user("o")}}},
		{name: "invalid UTF-8 becomes U+FFFD", frame: "{\"id\":\"r1\",\"message\":{\"content\":\"a\xffb\\ud800\"}}",
			want: &requestFrame{ID: "r1", Message: user("a\uFFFDb\uFFFD")}},
		{name: "role defaults to user", frame: `{"id":"r1","message":{"content":"x"}}`,
			want: &requestFrame{ID: "r1", Message: user("x")}},
		{name: "null metadata is none", frame: `{"id":"r1","message":{"content":"x"},"metadata":null}`,
			want: &requestFrame{ID: "r1", Message: user("x")}},
		{name: "cancel extension", frame: `{"id":"r1","cancel":true}`,
			want: &requestFrame{ID: "r1", Cancel: true}},
		{name: "cancel false is a request", frame: `{"id":"r1","cancel":false,"message":{"content":"x"}}`,
			want: &requestFrame{ID: "r1", Message: user("x")}},

		{name: "truncated JSON", frame: `{"id":"r1","message":`, err: "request frame is not valid JSON: unexpected end of JSON input"},
		{name: "not an object", frame: `[1,2]`, err: "request frame must be a JSON object, got array"},
		{name: "string frame", frame: `"hi"`, err: "request frame must be a JSON object, got string"},
		{name: "empty frame", frame: ``, err: "request frame is not valid JSON: unexpected end of JSON input"},
		{name: "trailing data", frame: `{"id":"r1","message":{"content":"x"}} x`, err: "request frame is not valid JSON: invalid character 'x' after top-level value"},
		{name: "bool frame", frame: `true`, err: "request frame must be a JSON object, got bool"},
		{name: "number frame", frame: `-1.5`, err: "request frame must be a JSON object, got number"},
		{name: "null frame is an empty one", frame: `null`, err: "id: required, a non-empty string"},
		{name: "missing id", frame: `{"message":{"content":"x"}}`, err: "id: required, a non-empty string"},
		{name: "empty id", frame: `{"id":"","message":{"content":"x"}}`, err: "id: required, a non-empty string"},
		{name: "numeric id", frame: `{"id":7,"message":{"content":"x"}}`, err: "id: must be a string"},
		{name: "missing message", frame: `{"id":"r2"}`, err: "message: required", errID: "r2"},
		{name: "message not an object", frame: `{"id":"r2","message":"hi"}`, err: "message: must be an object with role and content", errID: "r2"},
		{name: "content not a string", frame: `{"id":"r3","message":{"role":"user","content":42}}`, err: "message.content: must be a string", errID: "r3"},
		{name: "content missing", frame: `{"id":"r3","message":{"role":"user"}}`, err: "message.content: required", errID: "r3"},
		{name: "role not a string", frame: `{"id":"r3","message":{"role":1,"content":"x"}}`, err: "message.role: must be a string", errID: "r3"},
		{name: "history not an array", frame: `{"id":"r4","message":{"content":"x"},"message_history":{}}`, err: "message_history: must be an array of messages", errID: "r4"},
		{name: "history item bad", frame: `{"id":"r4","message":{"content":"x"},"message_history":[{"content":"a"},{"content":null}]}`, err: "message_history[1].content: required", errID: "r4"},
		{name: "override not an object", frame: `{"id":"r5","message":{"content":"x"},"override_params":[]}`, err: "override_params: must be an object keyed by model id or name", errID: "r5"},
		{name: "override entry bad", frame: `{"id":"r5","message":{"content":"x"},"override_params":{"m":{"message":{"content":1}}}}`, err: `override_params["m"].message.content: must be a string`, errID: "r5"},
		{name: "metadata not an object", frame: `{"id":"r6","message":{"content":"x"},"metadata":[1]}`, err: "metadata: must be an object", errID: "r6"},
		{name: "cancel not a boolean", frame: `{"id":"r7","cancel":"yes"}`, err: "cancel: must be a boolean", errID: "r7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, fe := decodeRequest([]byte(tc.frame))
			if tc.err != "" {
				if fe == nil {
					t.Fatalf("decoded %+v, want error %q", got, tc.err)
				}
				if fe.Err.Message != tc.err || fe.Err.Code != canonical.CodeInvalidArgument || fe.ID != tc.errID {
					t.Fatalf("error (%v, %q, id %q), want (invalid_argument, %q, id %q)", fe.Err.Code, fe.Err.Message, fe.ID, tc.err, tc.errID)
				}
				return
			}
			if fe != nil {
				t.Fatalf("error %v", fe)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestRequestCanonical(t *testing.T) {
	rf, fe := decodeRequest([]byte(`{"id":"r1","message":{"role":"user","content":"tell me a dad joke"},
		"message_history":[{"role":"system","content":"You are funny."}],
		"override_params":{"echo":{"message":{"role":"user","content":"by name"}},"scripted":{"message":{"role":"user","content":"by id"}}},
		"metadata":{"user_id":42,"plan":"pro","nested":{"a":1}}}`))
	if fe != nil {
		t.Fatal(fe)
	}
	got := rf.canonical("echo", "scripted")
	want := &canonical.Request{
		Target: "echo",
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: &canonical.Node{Children: []*canonical.Node{
			canonical.TextNode("system", "You are funny."),
			canonical.TextNode("user", "by id"), // the id entry wins over the name entry
		}}}},
		Metadata: map[string]string{"user_id": "42", "plan": "pro"},
		Extensions: map[string]*structpb.Value{
			extID:       structpb.NewStringValue("r1"),
			extMetadata: canonical.Value(map[string]any{"user_id": 42.0, "plan": "pro", "nested": map[string]any{"a": 1.0}}),
			extOverrideParams: canonical.Value(map[string]any{
				"echo":     map[string]any{"message": map[string]any{"role": "user", "content": "by name"}},
				"scripted": map[string]any{"message": map[string]any{"role": "user", "content": "by id"}},
			}),
		},
	}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Fatal(d)
	}
	if p := canonical.PromptText(got); p != "by id" {
		t.Fatalf("PromptText = %q", p)
	}
	if m := rf.message("other", "echo"); m.Content != "by name" {
		t.Fatalf("name override: %q", m.Content)
	}
	if m := rf.message("other", "other"); m.Content != "tell me a dad joke" {
		t.Fatalf("no override: %q", m.Content)
	}
}

// TestRequestMetadata: metadata is echoed as sent, compacted; in the
// canonical request, of duplicate names the last value counts whole (as
// encoding/json, which Glide decodes with, has it), and a number out of
// float64's range leaves the metadata out (as it failed encoding/json).
func TestRequestMetadata(t *testing.T) {
	for _, tc := range []struct {
		metadata, echo string
		ext            map[string]any
		scalars        map[string]string
	}{
		{`{ "a": {"x": 1}, "a": {"y": 2}, "b": true, "c": [1, "s", null], "d": "\u00e9" }`, `{"a":{"x":1},"a":{"y":2},"b":true,"c":[1,"s",null],"d":"\u00e9"}`,
			map[string]any{"a": map[string]any{"y": 2.0}, "b": true, "c": []any{1.0, "s", nil}, "d": "é"}, map[string]string{"b": "true", "d": "é"}},
		{`{"n":1e400,"s":"x"}`, `{"n":1e400,"s":"x"}`, nil, nil},
	} {
		rf, fe := decodeRequest([]byte(`{"id":"r1","message":{"content":"x"},"metadata":` + tc.metadata + `}`))
		if fe != nil {
			t.Fatal(fe)
		}
		if string(rf.Metadata) != tc.echo {
			t.Errorf("echo %s, want %s", rf.Metadata, tc.echo)
		}
		req := rf.canonical("r", "m")
		var want *structpb.Value
		if tc.ext != nil {
			want = canonical.Value(tc.ext)
		}
		if d := cmp.Diff(want, req.Extensions[extMetadata], protocmp.Transform()); d != "" {
			t.Errorf("%s: extension: %s", tc.metadata, d)
		}
		if d := cmp.Diff(tc.scalars, req.Metadata); d != "" {
			t.Errorf("%s: Metadata: %s", tc.metadata, d)
		}
	}
}

// readLines returns the non-empty lines of a testdata file.
func readLines(t testing.TB, name string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			out = append(out, append([]byte(nil), sc.Bytes()...))
		}
	}
	return out
}

// FuzzDecodeRequest: no input panics; an accepted frame survives the trip
// to canonical and back through the backend's request encoder.
func FuzzDecodeRequest(f *testing.F) {
	for _, l := range readLines(f, "testdata/requests.jsonl") {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rf, fe := decodeRequest(data)
		if fe != nil {
			if fe.Err.Code != canonical.CodeInvalidArgument || fe.Err.Message == "" {
				t.Fatalf("bad error %v", fe.Err)
			}
			return
		}
		if rf.ID == "" {
			t.Fatal("accepted a frame without id")
		}
		if rf.Cancel {
			return
		}
		req := rf.canonical("router", "model")
		wire, err := encodeRequest(rf.ID, req)
		if err != nil {
			t.Fatal(err)
		}
		back, fe := decodeRequest(wire)
		if fe != nil {
			t.Fatalf("re-encoded frame %s refused: %v", wire, fe)
		}
		if !utf8.ValidString(rf.ID) {
			return // invalid UTF-8 becomes U+FFFD on the way
		}
		want := append(append([]wireMessage(nil), rf.History...), rf.message("model", "router"))
		got := append(append([]wireMessage(nil), back.History...), back.Message)
		if back.ID != rf.ID || !sameMessages(want, got) {
			t.Fatalf("round trip changed the request:\n%+v\n%+v", want, got)
		}
	})
}

func sameMessages(a, b []wireMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Role != b[i].Role || strings.ToValidUTF8(a[i].Content, "\uFFFD") != b[i].Content {
			return false
		}
	}
	return true
}

// TestDecodeResponse pins how a response frame is read: as encoding/json
// read it into the same struct (our reading of Glide's responses always
// had it so). Names match without regard to case, the last duplicate wins,
// members the backend has no use for may hold anything, escapes are
// unescaped and invalid UTF-8 becomes U+FFFD.
func TestDecodeResponse(t *testing.T) {
	chunk := func(content string) *wireChunk {
		c := &wireChunk{ModelID: "m"}
		c.ModelResponse.Message = wireMessage{Role: "assistant", Content: content}
		return c
	}
	for _, tc := range []struct {
		frame string
		want  *responseFrame // nil: an error
		err   string
	}{
		{frame: `{"id":"a","chunk":{"model_id":"m","model_response":{"message":{"role":"assistant","content":"x"}}}}`,
			want: &responseFrame{ID: "a", Chunk: chunk("x")}},
		{frame: `{"ID":"a","Chunk":{"MODEL_ID":"m","model_Response":{"Message":{"role":"assistant","Content":"x"}}}}`,
			want: &responseFrame{ID: "a", Chunk: chunk("x")}},
		{frame: `{"id":"b","id":"a","chunk":{"model_id":"m","model_response":{"message":{"role":"assistant","content":"x","content":"y"}}}}`,
			want: &responseFrame{ID: "a", Chunk: chunk("y")}},
		{frame: "{\"id\":\"a\",\"created_at\":[1,{}],\"router_id\":null,\"metadata\":\"?\",\"chunk\":{\"model_id\":\"m\",\"model_response\":{\"metadata\":{\"x\":1},\"message\":{\"role\":\"assistant\",\"content\":\"\\n\\\"\\u00e9\xff\"}}}}",
			want: &responseFrame{ID: "a", Chunk: chunk("\n\"é\uFFFD")}},
		{frame: `{"id":"a","error":{"name":"model_unavailable","message":"down"}}`,
			want: &responseFrame{ID: "a", Error: &wireError{Name: "model_unavailable", Message: "down"}}},
		{frame: `{"id":"a","chunk":null}`, err: `upstream frame for "a" has neither chunk nor error`},
		{frame: `{"id":"a","chunk":{},"error":{}}`, err: `upstream frame for "a" has both chunk and error`},
		{frame: `{"chunk":{}}`, err: `upstream frame has no id`},
		{frame: `{"id":"a","chunk":{"model_response":{"message":{"content":42}}}}`, err: "upstream frame is not a Glide ChatStreamMessage"},
		{frame: `{"id":"a","chunk":{}} x`, err: "upstream frame is not a Glide ChatStreamMessage"},
	} {
		got, err := decodeResponse([]byte(tc.frame))
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(canonical.AsError(err).Message, tc.err) || canonical.CodeOf(err) != canonical.CodeInternal {
				t.Errorf("%s: error %v, want internal %q", tc.frame, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.frame, err)
		} else if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: %s", tc.frame, d)
		}
	}
}

// decodeFrames runs response frames through a responseDecoder and ends the
// run as the backend does when the stream stops (failed, unavailable).
func decodeFrames(frames [][]byte) ([]*canonical.Event, error) {
	d, out := newResponseDecoder(nil)
	var ferr error
	for _, fr := range frames {
		f, err := decodeResponse(fr)
		if err != nil {
			if ferr == nil {
				ferr = err
			}
			out = d.End(out, canonical.StatusFailed, canonical.AsError(err))
			break
		}
		out = d.Frame(out, f)
	}
	out = d.End(out, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "stream ended"))
	return out, ferr
}

// TestResponseDecoderGolden decodes the recorded upstream transcripts in
// testdata/backend/*.frames (one frame per line) and compares the canonical
// events, one proto3 JSON line each, with the .events.json file.
func TestResponseDecoderGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/backend/*.frames")
	if len(files) == 0 {
		t.Fatal("no testdata/backend/*.frames")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			events, _ := decodeFrames(readLines(t, file))
			if err := canonical.Validate(events); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			for _, ev := range events {
				b, err := protojson.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				c := json.Value(b)
				_ = c.Compact() // protojson's spacing is unstable by design
				buf.Write(c)
				buf.WriteByte('\n')
			}
			golden(t, strings.TrimSuffix(file, ".frames")+".events.json", buf.Bytes())
		})
	}
}

func readFile(name string) ([]byte, error) { return os.ReadFile(name) }

// golden compares got with the file, or rewrites it under -update.
func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("%s differs (run with -update to accept):\n%s", file, cmp.Diff(string(want), string(got)))
	}
}

// shape is what a decoded run says, independent of how the upstream cut
// its text into chunks: each message's text and every non-delta event.
func shape(events []*canonical.Event) []string {
	var out []string
	var text strings.Builder
	for _, ev := range events {
		if d := ev.GetBlockDelta(); d != nil {
			text.WriteString(d.GetText())
			continue
		}
		if ev.GetBlockStart() != nil || ev.GetBlockFinish() != nil {
			continue // a chunk with empty content opens no block
		}
		if ev.GetMessageFinish() != nil {
			out = append(out, "text "+text.String())
			text.Reset()
		}
		b, _ := protojson.Marshal(ev)
		out = append(out, string(b))
	}
	return out
}

// FuzzResponseDecoder feeds arbitrary frames (one per line): no panic, the
// events always satisfy the canonical invariants, and re-chunking the
// upstream's text (a chunk's content cut in two chunks at a rune boundary)
// changes nothing but the delta boundaries.
func FuzzResponseDecoder(f *testing.F) {
	files, _ := filepath.Glob("testdata/backend/*.frames")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint64(len(data)))
	}
	for _, s := range []string{ // odd frames: escapes, names folded, duplicates, nulls, other types
		`{"id":"il-1","chunk":{"model_response":{"message":{"content":"a\n\"b\u00e9\ud83c\udf3e"}}}}` + "\n" +
			`{"ID":"il-1","Chunk":{"Model_ID":"x","model_response":{"message":{"content":"c","content":"d"}},"finish_reason":"complete"}}`,
		`{"id":"il-1","created_at":"?","chunk":{"cached":true,"model_response":{"metadata":null,"message":null}}}` + "\n" +
			`{"id":"il-1","error":{"name":"model_unavailable","message":"m"}}` + "\n" + `{"id":"il-1","chunk":{"model_id":"y"}}`,
		"{\"id\":\"il-1\",\"chunk\":{\"model_response\":{\"message\":{\"content\":\"\xff\xe2\x82 x\"}}}}\n{\"id\":\"il-1\",\"error\":{\"name\":\"x\",\"finish_reason\":\"error\"}}",
	} {
		f.Add([]byte(s), uint64(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		var frames [][]byte
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				frames = append(frames, l)
			}
		}
		want, werr := decodeFrames(frames)
		if err := canonical.Validate(want); err != nil {
			t.Fatalf("invalid events: %v", err)
		}
		got, gerr := decodeFrames(rechunk(frames, seed))
		if err := canonical.Validate(got); err != nil {
			t.Fatalf("invalid events after re-chunking: %v", err)
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("error depends on chunking: %v / %v", werr, gerr)
		}
		if d := cmp.Diff(shape(want), shape(got)); d != "" {
			t.Fatal(d)
		}
	})
}

// rechunk cuts the content of each valid chunk frame in two frames at a
// rune boundary drawn from seed; the second keeps the finish_reason.
func rechunk(frames [][]byte, seed uint64) [][]byte {
	var out [][]byte
	for i, fr := range frames {
		f, err := decodeResponse(fr)
		if err != nil || f.Chunk == nil {
			out = append(out, fr)
			continue
		}
		content := f.Chunk.ModelResponse.Message.Content
		runes := []rune(content)
		if len(runes) < 2 {
			out = append(out, fr)
			continue
		}
		cut := len(string(runes[:1+int((seed+uint64(i)*7919)%uint64(len(runes)-1))]))
		first, second := *f, *f
		c1, c2 := *f.Chunk, *f.Chunk
		c1.FinishReason = nil
		c1.ModelResponse.Message.Content = content[:cut]
		c2.ModelResponse.Message.Content = content[cut:]
		first.Chunk, second.Chunk = &c1, &c2
		b1, _ := json.Marshal(first, writeOptions...)
		b2, _ := json.Marshal(second, writeOptions...)
		out = append(out, b1, b2)
	}
	return out
}

// deltaFrames returns n text-delta frames of one stream, as Glide sends
// them, each with its own content.
func deltaFrames(n int) [][]byte {
	words := []string{" world", " did", " the", " scarecrow", " win", "?", " Because", " he", " was", " outstanding", " in", " his", " field", " 🌾", " héhé", "."}
	var out [][]byte
	for i := range n {
		ts := 1719245000 + i
		out = append(out, fmt.Appendf(nil, `{"id":"il-1","created_at":%d,"router_id":"my-router","chunk":{"model_id":"openai-gpt","provider_id":"openai","model_name":"gpt-3.5-turbo-0125","cached":false,"model_response":{"metadata":{"response_id":"chatcmpl-9d","system_fingerprint":"fp_1","generated_at":%d},"message":{"role":"assistant","content":%q}}}}`, ts, ts, words[i%len(words)]))
	}
	return out
}

// BenchmarkDecodeDelta decodes the frames of a stream's text deltas, each
// with its own content, through decodeResponse and Frame.
func BenchmarkDecodeDelta(b *testing.B) {
	frames := deltaFrames(16)
	first, err := decodeResponse(frames[0])
	if err != nil {
		b.Fatal(err)
	}
	d, out := newResponseDecoder(nil)
	out = d.Frame(out, first)
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		k++
		f, err := decodeResponse(frames[k%len(frames)])
		if err != nil {
			b.Fatal(err)
		}
		out = d.Frame(out[:0], f)
	}
}
