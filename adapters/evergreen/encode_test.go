package evergreen

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Runs, as canonical events, for the renderer tests.

func echoRun() []*canonical.Event {
	b := canonical.NewBuilder()
	var out []*canonical.Event
	out = b.Lifecycle(out, canonical.StatusRunning)
	out = b.StartMessage(out, "m1", "assistant")
	for _, w := range []string{"Hello", ",", " wörld"} {
		out = b.Text(out, w)
	}
	out = b.FinishMessage(out, canonical.FinishStop, nil)
	return b.End(out, canonical.StatusCompleted, nil)
}

func agentRun() []*canonical.Event {
	b := canonical.NewBuilder()
	var out []*canonical.Event
	out = b.Lifecycle(out, canonical.StatusRunning)
	out = b.StartMessage(out, "m1", "assistant")
	out = b.Reasoning(out, "I should ")
	out = b.Reasoning(out, "compute.")
	out = b.ToolCall(out, "call-1", "calculator")
	out = b.ToolArgs(out, `{"expression"`)
	out = b.ToolArgs(out, `: "6 * 7"}`)
	out = b.FinishMessage(out, canonical.FinishToolCalls, nil)
	out = b.Emit(out, &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{
		ToolCallId: "call-1", Name: "calculator", Input: canonical.Value(map[string]any{"expression": "6 * 7"})}}})
	out = b.Emit(out, &canonical.Event{Kind: &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{
		ToolCallId: "call-1", Output: canonical.Value(map[string]any{"result": 42})}}})
	out = b.StartMessage(out, "m2", "assistant")
	out = b.Text(out, "6 * 7")
	out = b.Text(out, " = 42.")
	out = b.FinishMessage(out, canonical.FinishStop, nil)
	return b.End(out, canonical.StatusCompleted, nil)
}

func imageRun(textFirst bool) []*canonical.Event {
	b := canonical.NewBuilder()
	var out []*canonical.Event
	out = b.StartMessage(out, "m1", "assistant")
	if textFirst {
		out = b.Text(out, "Here: ")
	}
	out = b.Data(out, "image/png", []byte("\x89PNG"))
	out = b.Ref(out, "video/mp4", "https://example.com/v.mp4")
	out = b.Text(out, "done")
	return b.End(out, canonical.StatusCompleted, nil)
}

func failedRun(code canonical.Code) []*canonical.Event {
	b := canonical.NewBuilder()
	var out []*canonical.Event
	out = b.Text(out, "partial")
	return b.End(out, canonical.StatusFailed, canonical.Errorf(code, "upstream broke"))
}

func interruptedRun() []*canonical.Event {
	b := canonical.NewBuilder()
	var out []*canonical.Event
	out = b.Emit(out, &canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{InterruptId: "approve-1"}}})
	return b.End(out, canonical.StatusInterrupted, nil)
}

func emptyRun() []*canonical.Event {
	return canonical.NewBuilder().End(nil, canonical.StatusCompleted, nil)
}

// compactJSON is a message's proto3 JSON made deterministic (protojson
// varies its whitespace on purpose).
func compactJSON(t testing.TB, m *ev.SessionMessage) string {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	v := json.Value(b)
	if err := v.Compact(); err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// TestRender renders runs into output fragments, compares them with golden
// transcripts, checks that they reassemble (as a client's store would) to
// what the session's store recorded, and that the events were valid.
func TestRender(t *testing.T) {
	cases := []struct {
		name    string
		events  []*canonical.Event
		outputs []string // output names; ids are <name>_1
		json    bool
		tree    bool
		code    canonical.Code
	}{
		{name: "echo-grpc", events: echoRun(), outputs: []string{"response"}},
		{name: "echo-json", events: echoRun(), outputs: []string{"response"}, json: true},
		{name: "echo-aliases", events: echoRun(), outputs: []string{"response", "text"}},
		{name: "echo-tree", events: echoRun(), outputs: []string{"response"}, tree: true},
		{name: "agent-all", events: agentRun(), outputs: []string{"response", "reasoning", "tool_calls"}},
		{name: "agent-response-only", events: agentRun(), outputs: []string{"response"}},
		{name: "agent-json", events: agentRun(), outputs: []string{"response", "reasoning", "tool_calls"}, json: true},
		{name: "parts", events: imageRun(false), outputs: []string{"response"}},
		{name: "text-then-data", events: imageRun(true), outputs: []string{"response"}, code: canonical.CodeUnimplemented},
		{name: "text-then-data-tree", events: imageRun(true), outputs: []string{"response"}, tree: true},
		{name: "failed", events: failedRun(canonical.CodeUnavailable), outputs: []string{"response"}, code: canonical.CodeUnavailable},
		{name: "interrupted", events: interruptedRun(), outputs: []string{"response", "tool_calls"}, code: canonical.CodeFailedPrecondition},
		{name: "empty", events: emptyRun(), outputs: []string{"response", "reasoning"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := canonical.Validate(tc.events); err != nil {
				t.Fatal(err)
			}
			st := newStore(Limits{}, tc.json)
			counterIDs(st)
			g := &generate{}
			for _, name := range tc.outputs {
				n, err := st.reserve(name + "_1")
				if err != nil {
					t.Fatal(err)
				}
				switch name {
				case OutputResponse, OutputText:
					g.response = append(g.response, n)
				case OutputReasoning:
					g.reasoning = n
				case OutputToolCalls:
					g.tools = n
				}
			}
			sk := &memSink{st: st}
			r := newRenderer(sk, g, tc.json, tc.tree, 1<<20)
			var err error
			for _, e := range tc.events {
				var done bool
				if done, err = r.event(e); done || err != nil {
					break
				}
			}
			if codeOf(err) != tc.code {
				t.Fatalf("error %v, want code %s", err, tc.code)
			}
			var sb strings.Builder
			for _, m := range sk.msgs {
				sb.WriteString(compactJSON(t, m) + "\n")
			}
			if err != nil {
				fmt.Fprintf(&sb, "abort: %v\n", err)
			}
			golden(t, "render-"+tc.name+".golden", sb.String())
			if err != nil {
				return
			}
			// A client's store reassembles what the session's store holds.
			client := newStore(Limits{}, tc.json)
			for _, m := range sk.msgs {
				for _, f := range m.GetNodeFragments() {
					if err := client.apply(f); err != nil {
						t.Fatalf("client store: %v", err)
					}
				}
			}
			for _, n := range g.outputs() {
				if !client.get(n.id).complete || !n.complete {
					t.Errorf("output %q incomplete (client %v, server %v)", n.id, client.get(n.id).complete, n.complete)
				}
				if a, b := flat(t, client, n.id), flat(t, st, n.id); a != b {
					t.Errorf("output %q: client reassembled\n%s\nserver recorded\n%s", n.id, a, b)
				}
			}
		})
	}
}

// TestEncodeRequest compares the messages the backend sends for a request
// with a golden transcript: the action first, parents before children,
// shared nodes sent once, large leaves split.
func TestEncodeRequest(t *testing.T) {
	shared := canonical.TextNode("user", "What is 6 * 7?")
	req := &canonical.Request{
		Target: "echo",
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: &canonical.Node{Children: []*canonical.Node{
			shared,
			canonical.TextNode("assistant", "42."),
			{Mime: MimeEndOfTurn, Role: "assistant"},
			{Mime: "image/png", Role: "user", Payload: canonical.DataPayload([]byte("0123456789abcdef")), Metadata: map[string]string{metaFileName: "x.png"}},
			{Mime: "video/mp4", Payload: canonical.RefPayload("https://example.com/v.mp4")},
			shared,
		}}}},
		Parameters: map[string]*structpb.Value{"temperature": canonical.Value(0.5)},
		Extensions: map[string]*structpb.Value{extConfigs: canonical.Value([]any{map[string]any{"@type": "type.googleapis.com/google.protobuf.Timestamp", "value": "CAE="}})},
	}
	st := newStore(Limits{}, false)
	counterIDs(st)
	msgs, outs, err := encodeRequest(st, req, "llama", []string{"response", "reasoning"}, 6)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, m := range msgs {
		sb.WriteString(compactJSON(t, m) + "\n")
	}
	golden(t, "encode-request.golden", sb.String())
	if outs["response"] == nil || outs["reasoning"] == nil || outs["response"].ours {
		t.Fatalf("outputs %v", outs)
	}
	// What was sent reassembles to the request's content.
	peer := newStore(Limits{}, false)
	for _, m := range msgs {
		for _, f := range m.GetNodeFragments() {
			if err := peer.apply(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	root := msgs[0].GetActions()[0].GetInputs()[0].GetId()
	want := "user text/plain What is 6 * 7? | assistant text/plain 42. | assistant application/x-protobuf; type=EndOfTurn <no payload> | user image/png 0123456789abcdef | user video/mp4 @https://example.com/v.mp4 | user text/plain What is 6 * 7?"
	if got := flat(t, peer, root); got != want {
		t.Errorf("peer reassembled\n%s\nwant\n%s", got, want)
	}
}
