package responses

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// silentObserver's streams send nothing until closed (a log whose events
// expired).
type silentObserver struct{}

type silentStream struct{ done chan struct{} }

func (silentObserver) Observe(context.Context, string, uint64) (canonical.Stream, error) {
	return &silentStream{done: make(chan struct{})}, nil
}

func (s *silentStream) Recv() (*canonical.Event, error) {
	<-s.done
	return nil, io.EOF
}

func (s *silentStream) Close() error {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	return nil
}

// tailObserver's streams start after the run's first events (a log that
// let go of its oldest): a text delta numbered 5, then the end.
type tailObserver struct{}

func (tailObserver) Observe(context.Context, string, uint64) (canonical.Stream, error) {
	return &tailStream{silentStream: silentStream{done: make(chan struct{})}}, nil
}

type tailStream struct {
	silentStream
	sent bool
}

func (s *tailStream) Recv() (*canonical.Event, error) {
	if !s.sent {
		s.sent = true
		ev := canonical.NewTextDelta(0, "lo")
		ev.Seq = 5
		return ev, nil
	}
	return nil, io.EOF
}

// TestReplayStoredFallback: a finished response whose events left the log,
// all of them or its first (the log lets go of the oldest), is streamed
// from the stored response: the terminal event carries the stored output,
// ids included. An unfinished one whose first events are gone fails.
func TestReplayStoredFallback(t *testing.T) {
	for _, obs := range []canonical.Observer{silentObserver{}, tailObserver{}} {
		testReplayStoredFallback(t, obs)
	}
	r := testResponse()
	r.Status = "in_progress"
	f := NewFrontend(FrontendConfig{Observer: tailObserver{}, ReplayWait: time.Minute})
	w := httptest.NewRecorder()
	f.replay(w, httptest.NewRequest("GET", "/v1/responses/resp_test?stream=true", nil), &record{Response: *r}, -1)
	if body := w.Body.String(); !strings.Contains(body, "event: error") || !strings.Contains(body, "no longer holds the response's first events (its oldest is event 5)") {
		t.Fatalf("in-progress response whose first events left the log:\n%s", body)
	}
}

func testReplayStoredFallback(t *testing.T, obs canonical.Observer) {
	t.Helper()
	r := testResponse()
	r.Tools = []echoedTool{{Type: "function", Name: "f"}}
	r.Status, r.CompletedAt, r.Usage = "completed", ptr(int64(1741476778)), &usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}
	r.Output = []item{
		{Type: "message", ID: itemID("msg_", "resp_test", false, 0), Status: "completed", Role: "assistant", Content: parts{{Type: "output_text", Text: ptr("Hello"), Annotations: []json.Value{}, Logprobs: []json.Value{}}}},
		{Type: "function_call", ID: itemID("fc_", "resp_test", false, 1), Status: "completed", CallID: "call_b", Name: "f", Arguments: ptr(`{"x":1}`)},
	}
	f := NewFrontend(FrontendConfig{Observer: obs, ReplayWait: 10 * time.Millisecond})
	w := httptest.NewRecorder()
	f.replay(w, httptest.NewRequest("GET", "/v1/responses/resp_test?stream=true", nil), &record{Response: *r}, -1)
	body := w.Body.String()
	blocks := strings.Split(strings.TrimSpace(body), "\n\n")
	if blocks[len(blocks)-1] != "data: [DONE]" {
		t.Fatalf("no [DONE]:\n%s", body)
	}
	_, data, _ := strings.Cut(blocks[len(blocks)-2], "\ndata: ")
	var ev streamEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "response.completed" || len(ev.Response.Output) != 2 {
		t.Fatalf("terminal event %s", data)
	}
	got, _ := json.Marshal(ev.Response.Output)
	want, _ := json.Marshal(r.Output)
	if string(got) != string(want) {
		t.Fatalf("output %s, want %s", got, want)
	}
}

func (silentObserver) LastSeq(context.Context, string) (uint64, error) { return 0, nil }

func (tailObserver) LastSeq(context.Context, string) (uint64, error) { return 0, nil }
