package glide

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// TestReplyEncoderInterrupt: an interrupted run's terminal error names the
// input request's interrupt id and payload (issue 30 #6): chatStream
// cannot ask, but the client learns what the agent asked.
func TestReplyEncoderInterrupt(t *testing.T) {
	e := newReplyEncoder(fixedNow, "r1", "echo", nil, model{ID: "m", Provider: "p", Name: "n"})
	payload, _ := structpb.NewValue(map[string]any{"question": "Approve the transfer?"})
	var got string
	for _, ev := range []*canonical.Event{
		{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{InterruptId: "i-1", Payload: payload}}},
		{Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusInterrupted}}},
	} {
		got += string(e.event(ev))
	}
	want := `{"id":"r1","created_at":1719245000,"router_id":"echo","error":{"name":"unknown_error","message":"failed_precondition: run interrupted waiting for input, which Glide chatStream cannot carry; interrupt i-1: {\"question\":\"Approve the transfer?\"}","finish_reason":"error"}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if c, msg := codeOf(nameUnknown, "failed_precondition: run interrupted waiting for input, which Glide chatStream cannot carry; interrupt i-1: {}"); c != canonical.CodeFailedPrecondition || msg == "" {
		t.Errorf("the backend reads it back as %v %q", c, msg)
	}
}
