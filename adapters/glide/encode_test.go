package glide

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

var fixedNow = func() time.Time { return time.Unix(1719245000, 0) }

// TestReplyEncoderEscapes: strings are written as Glide's WriteJSON
// (encoding/json) writes them: <, > and & and U+2028, U+2029 escaped;
// invalid UTF-8 becomes U+FFFD (which encoding/json spells \ufffd: the
// same string).
func TestReplyEncoderEscapes(t *testing.T) {
	e := newReplyEncoder(fixedNow, "<id>", "r&d", json.Value(`{"k":"<v>\u00e9"}`), model{ID: "m", Provider: "p", Name: "n"})
	e.event(&canonical.Event{Kind: &canonical.KindBlockStart{BlockStart: &canonical.BlockStart{Type: canonical.BlockText}}})
	got := string(e.event(&canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "<b>&\u2028\u2029\"\\\n\x00\x7f\xff é😀"}}}))
	want := `{"id":"\u003cid\u003e","created_at":1719245000,"router_id":"r\u0026d","metadata":{"k":"\u003cv\u003eé"},` +
		`"chunk":{"model_id":"m","provider_id":"p","model_name":"n","cached":false,"model_response":{"message":{"role":"assistant",` +
		`"content":"\u003cb\u003e\u0026\u2028\u2029\"\\\n\u0000` + "\x7f\uFFFD é😀" + `"}}}}` + "\n"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestReplyEncoderBadMetadata: metadata that is not JSON (decodeRequest
// never gives any) is left out; the frame is still sent.
func TestReplyEncoderBadMetadata(t *testing.T) {
	e := newReplyEncoder(fixedNow, "r1", "echo", json.Value(`{"a":`), model{ID: "m", Provider: "p", Name: "n"})
	for range 2 {
		got := string(e.fail(canonical.Errorf(canonical.CodeUnavailable, "down")))
		want := `{"id":"r1","created_at":1719245000,"router_id":"echo","error":{"name":"all_models_unavailable","message":"down","finish_reason":"error"}}` + "\n"
		if got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
}

func TestReplyEncoderFrames(t *testing.T) {
	def := model{ID: "scripted", Provider: "interlingua", Name: "echo"}
	ev := func(k any) *canonical.Event {
		switch k := k.(type) {
		case *canonical.Lifecycle:
			return &canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: k}}
		case *canonical.ErrorProto:
			return &canonical.Event{Kind: &canonical.KindError{Error: k}}
		}
		panic("kind")
	}
	for _, tc := range []struct {
		name   string
		events []*canonical.Event
		want   string
	}{
		{"completed without a message", []*canonical.Event{ev(&canonical.Lifecycle{Status: canonical.StatusCompleted})},
			`{"id":"r1","created_at":1719245000,"router_id":"echo","metadata":{"a":1},"chunk":{"model_id":"scripted","provider_id":"interlingua","model_name":"echo","cached":false,"model_response":{"message":{"role":"assistant","content":""}},"finish_reason":"other"}}` + "\n"},
		{"failed", []*canonical.Event{ev(&canonical.Lifecycle{Status: canonical.StatusFailed, Error: &canonical.ErrorProto{Code: uint32(canonical.CodeUnavailable), Message: "down"}})},
			`{"id":"r1","created_at":1719245000,"router_id":"echo","metadata":{"a":1},"error":{"name":"all_models_unavailable","message":"down","finish_reason":"error"}}` + "\n"},
		{"failed without error", []*canonical.Event{ev(&canonical.Lifecycle{Status: canonical.StatusFailed})},
			`{"id":"r1","created_at":1719245000,"router_id":"echo","metadata":{"a":1},"error":{"name":"unknown_error","message":"run RUN_STATUS_FAILED","finish_reason":"error"}}` + "\n"},
		{"cancelled", []*canonical.Event{ev(&canonical.Lifecycle{Status: canonical.StatusCancelled, Error: &canonical.ErrorProto{Code: 1, Message: "context canceled"}})},
			`{"id":"r1","created_at":1719245000,"router_id":"echo","metadata":{"a":1},"error":{"name":"unknown_error","message":"canceled: context canceled","finish_reason":"error"}}` + "\n"},
		{"interrupted", []*canonical.Event{ev(&canonical.Lifecycle{Status: canonical.StatusInterrupted})},
			`{"id":"r1","created_at":1719245000,"router_id":"echo","metadata":{"a":1},"error":{"name":"unknown_error","message":"failed_precondition: run interrupted waiting for input, which Glide chatStream cannot carry","finish_reason":"error"}}` + "\n"},
		{"non-terminal error", []*canonical.Event{ev(&canonical.ErrorProto{Code: uint32(canonical.CodeResourceExhausted), Message: "rate limited"})},
			`{"id":"r1","created_at":1719245000,"router_id":"echo","metadata":{"a":1},"error":{"name":"model_unavailable","message":"resource_exhausted: rate limited"}}` + "\n"},
		{"sub-namespace is silent", []*canonical.Event{{Namespace: []string{"sub"}, Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusCompleted}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newReplyEncoder(fixedNow, "r1", "echo", []byte(`{"a":1}`), def)
			var got string
			for _, ev := range tc.events {
				got += string(e.event(ev))
			}
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			var v map[string]any
			if tc.want != "" && json.Unmarshal([]byte(got), &v) != nil {
				t.Fatal("not JSON")
			}
		})
	}
}

// TestReplyEncoderModel: the message start's metadata names the model;
// reasoning is not sent; the last message's finish reason ends the run.
func TestReplyEncoderModel(t *testing.T) {
	b := canonical.NewBuilder()
	var evs []*canonical.Event
	evs = b.StartMessage(evs, "", "assistant")
	evs[0].GetMessageStart().Metadata = map[string]*structpb.Value{
		metaModelID: structpb.NewStringValue("openai-gpt"), metaProvider: structpb.NewStringValue("openai"), metaModel: structpb.NewStringValue("gpt-4o")}
	evs = b.Reasoning(evs, "thinking")
	evs = b.Text(evs, "Hi")
	evs = b.FinishMessage(evs, canonical.FinishLength, nil)
	evs = b.End(evs, canonical.StatusCompleted, nil)
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	e := newReplyEncoder(fixedNow, "r1", "echo", nil, model{ID: "x", Provider: "y", Name: "z"})
	var got []string
	for _, ev := range evs {
		if f := e.event(ev); f != nil {
			got = append(got, string(f))
		}
	}
	want := []string{
		`{"id":"r1","created_at":1719245000,"router_id":"echo","chunk":{"model_id":"openai-gpt","provider_id":"openai","model_name":"gpt-4o","cached":false,"model_response":{"message":{"role":"assistant","content":"Hi"}}}}` + "\n",
		`{"id":"r1","created_at":1719245000,"router_id":"echo","chunk":{"model_id":"openai-gpt","provider_id":"openai","model_name":"gpt-4o","cached":false,"model_response":{"message":{"role":"assistant","content":""}},"finish_reason":"max_tokens"}}` + "\n",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}

func TestEncodeRequest(t *testing.T) {
	req := &canonical.Request{
		Target: "x",
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: &canonical.Node{Children: []*canonical.Node{
			canonical.TextNode("system", "You are funny."),
			{Mime: "image/png", Payload: canonical.DataPayload([]byte{1})}, // dropped: not text
			canonical.TextNode("", "tell me a <joke>"),
		}}}},
		Metadata: map[string]string{"ignored": "extension wins"},
		Extensions: map[string]*structpb.Value{
			extMetadata:       canonical.Value(map[string]any{"user_id": 42.0}),
			extOverrideParams: canonical.Value(map[string]any{"m": map[string]any{"message": map[string]any{"role": "user", "content": "o"}}}),
		},
	}
	got, err := encodeRequest("il-1", req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"il-1","message":{"role":"user","content":"tell me a \u003cjoke\u003e"},"message_history":[{"role":"system","content":"You are funny."}],"override_params":{"m":{"message":{"content":"o","role":"user"}}},"metadata":{"user_id":42}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	req.Extensions = nil
	got, _ = encodeRequest("il-2", req)
	if want := `"metadata":{"ignored":"extension wins"}}`; string(got[len(got)-len(want):]) != want {
		t.Fatalf("Request.Metadata not sent: %s", got)
	}
	_, err = encodeRequest("il-3", &canonical.Request{Target: "x"})
	if canonical.CodeOf(err) != canonical.CodeInvalidArgument {
		t.Fatalf("no text input: %v", err)
	}
}

// BenchmarkEncodeDelta is the frontend's per-delta cost: one text delta
// event to one chunk frame (target: <= 1.5 µs, <= 3 allocs).
func BenchmarkEncodeDelta(b *testing.B) {
	e := newReplyEncoder(time.Now, "req-1", "my-router", []byte(`{"user_id":42,"anything":"goes"}`),
		model{ID: "openai-gpt", Provider: "openai", Name: "gpt-3.5-turbo-0125"})
	e.event(&canonical.Event{Kind: &canonical.KindBlockStart{BlockStart: &canonical.BlockStart{Type: canonical.BlockText}}})
	ev := &canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: " the quick brown fox"}}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if f := e.event(ev); len(f) == 0 {
			b.Fatal("no frame")
		}
	}
}
