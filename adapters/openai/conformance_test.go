package openai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/protocol"
)

// TestConformanceKeep: the frontend's projection keeps text, reasoning and
// tool calls, joins adjacent text (or reasoning) once what stood between
// is dropped, keeps every code, refuses a run that failed before its
// message, reads an interrupt as completed; the backend's puts the peer's
// reasoning, text and calls in that order and sends codes through the
// status table (before the stream) or reads internal (after it).
func TestConformanceKeep(t *testing.T) {
	in := &cv1.Transcript{Status: transcript.Failed, Code: "data_loss", Blocks: []*cv1.Block{
		{Type: transcript.Text, Text: "a"}, {Type: transcript.Error, Text: "unavailable"}, {Type: transcript.Text, Text: "b"},
		{Type: transcript.Reasoning, Text: "r"}, {Type: transcript.Data, Data: []byte{1}}, {Type: transcript.Reasoning, Text: "s"},
		{Type: transcript.ToolCall, Id: "c1", Name: "f", Text: "{}"}, {Type: transcript.ToolCall, Id: "c2", Name: "g", Text: "{}"},
		{Type: transcript.Text, Text: "c"},
	}, Tools: []*cv1.Tool{{Event: "started", Id: "c1"}}, Interrupts: []string{"i"}}
	wantFront := &cv1.Transcript{Status: transcript.Failed, Code: "data_loss", Blocks: []*cv1.Block{
		{Type: transcript.Text, Text: "ab"}, {Type: transcript.Reasoning, Text: "rs"},
		{Type: transcript.ToolCall, Id: "c1", Name: "f", Text: "{}"}, {Type: transcript.ToolCall, Id: "c2", Name: "g", Text: "{}"},
		{Type: transcript.Text, Text: "c"},
	}}
	if got := conformanceFront(in, nil); !proto.Equal(got, wantFront) {
		t.Errorf("front: got %v", got)
	}
	wantBack := &cv1.Transcript{Status: transcript.Failed, Code: "internal", Blocks: []*cv1.Block{
		{Type: transcript.Reasoning, Text: "rs"}, {Type: transcript.Text, Text: "abc"},
		{Type: transcript.ToolCall, Id: "c1", Name: "f", Text: "{}"}, {Type: transcript.ToolCall, Id: "c2", Name: "g", Text: "{}"},
	}}
	if got := conformanceBack(in, nil); !proto.Equal(got, wantBack) {
		t.Errorf("back: got %v", got)
	}
	for _, c := range []struct {
		side                   string
		in, code, status, want string
		blocks                 []*cv1.Block
	}{
		{"front", transcript.Refused, "failed_precondition", transcript.Refused, "failed_precondition", nil},
		{"front", transcript.Failed, "unavailable", transcript.Refused, "unavailable", []*cv1.Block{{Type: transcript.Error, Text: "internal"}}},
		{"front", transcript.Failed, "unavailable", transcript.Failed, "unavailable", []*cv1.Block{{Type: transcript.Ref, Ref: "x"}}},
		{"front", transcript.Interrupted, "", transcript.Completed, "", nil},
		{"front", transcript.Cancelled, "canceled", transcript.Cancelled, "canceled", nil},
		{"back", transcript.Refused, "failed_precondition", transcript.Refused, "invalid_argument", nil},
		{"back", transcript.Refused, "unavailable", transcript.Refused, "unavailable", nil},
		{"back", transcript.Refused, "data_loss", transcript.Refused, "internal", nil},
		{"back", transcript.Failed, "permission_denied", transcript.Failed, "internal", nil},
		{"back", transcript.Interrupted, "", transcript.Completed, "", nil},
	} {
		tr := &cv1.Transcript{Status: c.in, Code: c.code, Blocks: c.blocks}
		project := conformanceFront
		if c.side == "back" {
			project = conformanceBack
		}
		got := project(tr, nil)
		if got.GetStatus() != c.status || got.GetCode() != c.want {
			t.Errorf("%s %s %s: %s %s, want %s %s", c.side, c.in, c.code, got.GetStatus(), got.GetCode(), c.status, c.want)
		}
	}
}

// TestConformanceModel: the reference peer playing a definition through
// the openai backend gives what conformanceBack states, the failure after
// every item (conformanceChunks counts the role chunk, reasoning, the
// echo's words, content and each call's head and fragments); a failure
// with no output is the code's status.
func TestConformanceModel(t *testing.T) {
	deltas := func(s string, cuts ...uint32) *cv1.Text { return &cv1.Text{Text: s, Cuts: cuts} }
	mid := &cv1.Response{Echo: true, Items: []*cv1.Item{
		{Kind: &cv1.Item_Reasoning{Reasoning: deltas("think it over", 5)}},
		{Kind: &cv1.Item_Text{Text: deltas(" Zürich", 3)}},
		{Kind: &cv1.Item_ToolCall{ToolCall: &cv1.ToolCall{Id: "call-1", Name: "f", Arguments: deltas(`{"a": "ü"}`, 2, 9)}}},
		{Kind: &cv1.Item_Tool{Tool: &cv1.ToolActivity{Id: "call-1", Name: "f"}}},
	}, Failure: &cv1.Failure{Code: "data_loss", Message: "broke"}}
	before := &cv1.Response{Failure: &cv1.Failure{Code: "failed_precondition", Message: "no"}}
	hang := &cv1.Response{Items: []*cv1.Item{{Kind: &cv1.Item_Text{Text: deltas("waiting")}}}, Hang: true}
	const prompt = "one two three"
	m := conformanceModel("mid", mid, prompt)
	if want := 1 + 2 + 3 + 2 + 1 + 3; m.ErrorAt != want {
		t.Errorf("ErrorAt %d, want %d", m.ErrorAt, want)
	}
	if m := conformanceModel("before", before, prompt); m.Status != 400 || m.ErrorMessage != "no" {
		t.Errorf("before: status %d %q", m.Status, m.ErrorMessage)
	}
	var cs []*cases.Case
	for name, r := range map[string]*cv1.Response{"mid": mid, "before": before, "hang": hang} {
		cs = append(cs, &cases.Case{Case: &cv1.Case{Name: name, Response: r, Request: &cv1.ClientRequest{Prompt: prompt}}})
	}
	peer, err := newConformancePeer(cs)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(peer.Handler)
	defer srv.Close()
	be, err := NewBackend(BackendConfig{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, c := range cs {
		r := c.GetResponse()
		want := transcript.Normalize(conformanceBack(driver.Ideal(r, prompt), c))
		if got := transcript.Normalize(playThrough(t, be, c.GetName(), prompt, r.GetHang())); !proto.Equal(got, want) {
			t.Errorf("%s: %s\ngot  %s\nwant %s", c.GetName(), transcript.Diff(want, got), transcript.String(got), transcript.String(want))
		}
	}
	select {
	case name := <-peer.Cancelled:
		if name != "hang" {
			t.Errorf("cancelled %q, want hang", name)
		}
	case <-time.After(5 * time.Second):
		t.Error("the peer did not see the hanging run cancelled")
	}
}

// playThrough runs target through be and folds its events; a hanging run
// is cancelled once its first text arrived.
func playThrough(t *testing.T, be canonical.Backend, target, prompt string, hang bool) *cv1.Transcript {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &canonical.Request{Target: target, Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", prompt)}}}
	b := transcript.NewBuilder()
	s, err := be.Start(ctx, req)
	if err != nil {
		b.Refuse(err)
		return b.Transcript()
	}
	defer s.Close()
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return b.Transcript()
		}
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		b.Add(ev)
		if hang && ev.GetBlockDelta().GetText() != "" {
			_ = s.Close()
			b.Add(canonical.Terminal(canonical.StatusCancelled, canonical.Errorf(canonical.CodeCanceled, "cancelled by the client")))
			return b.Transcript()
		}
	}
}

// codeRunner answers every run with a refusal of code (before), or with
// some text and then a failure of code, as the conformance runner's
// TestErrorCodesThroughEveryFrontend does.
type codeRunner struct {
	code   canonical.Code
	before bool
}

func (r codeRunner) Run(context.Context, *canonical.Request) (canonical.Stream, error) {
	err := canonical.Errorf(r.code, "scripted %s", r.code)
	if r.before {
		return nil, err
	}
	b := canonical.NewBuilder()
	evs := b.Lifecycle(nil, canonical.StatusRunning)
	evs = b.Text(evs, "partial")
	evs = b.End(evs, canonical.StatusFailed, err)
	return &sliceStream{evs: evs}, nil
}

func (codeRunner) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name, Backend: "b"}, true
}

func (codeRunner) Targets() []canonical.TargetInfo { return nil }

type sliceStream struct{ evs []*canonical.Event }

func (s *sliceStream) Recv() (*canonical.Event, error) {
	if len(s.evs) == 0 {
		return nil, io.EOF
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, nil
}

func (s *sliceStream) Close() error { return nil }

// TestConformanceCodes: every canonical code, refused before the first
// event and failing after some text, through our frontend and read back
// by the protocol's conformance client, is what conformanceFront states
// (every code exact).
func TestConformanceCodes(t *testing.T) {
	for _, before := range []bool{true, false} {
		for _, code := range canonical.AllCodes[1:] {
			mux := http.NewServeMux()
			NewFrontend(FrontendConfig{Runner: codeRunner{code: code, before: before}}).Mount(mux)
			srv := httptest.NewServer(mux)
			cl, err := newClient(protocol.ClientConfig{Base: srv.URL, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			ideal := &cv1.Transcript{Status: transcript.Refused, Code: code.String()}
			if !before {
				ideal = &cv1.Transcript{Status: transcript.Failed, Code: code.String(),
					Blocks: []*cv1.Block{{Type: transcript.Text, Text: "partial"}}}
			}
			want := transcript.Normalize(conformanceFront(ideal, nil))
			got := transcript.Normalize(playThrough(t, cl, "t", "hi", false))
			if !proto.Equal(got, want) {
				t.Errorf("%s before=%v: %s", code, before, transcript.Diff(want, got))
			}
			_ = cl.(io.Closer).Close()
			srv.Close()
		}
	}
}
