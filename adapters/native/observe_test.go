package native_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/adapters/native"
	"github.com/interlingua-dev/interlingua/canonical"
)

// quietObserver serves threads with no event: Recv waits for the request to
// end. Observing thread "full" is refused with ResourceExhausted.
type quietObserver struct{ closed chan struct{} }

func (q quietObserver) Observe(ctx context.Context, thread string, _ uint64) (canonical.Stream, error) {
	if thread == "full" {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "API key %q has %d observers open (max_observers)", "a", 2)
	}
	if thread == "gap" {
		return &gapStream{}, nil
	}
	return &quietStream{ctx: ctx, closed: q.closed}, nil
}

// gapStream gives one event, then fails as a replay that reached events
// the log has let go of.
type gapStream struct{ sent bool }

func (s *gapStream) Recv() (*canonical.Event, error) {
	if !s.sent {
		s.sent = true
		return &canonical.Event{ThreadId: "gap", RunId: "r", Seq: 3, Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusRunning}}}, nil
	}
	return nil, canonical.Errorf(canonical.CodeOutOfRange, "the replay log no longer holds the thread's events 4 to 16")
}

func (s *gapStream) Close() error { return nil }

type quietStream struct {
	ctx    context.Context
	closed chan struct{}
}

func (s *quietStream) Recv() (*canonical.Event, error) {
	<-s.ctx.Done()
	return nil, s.ctx.Err()
}

func (s *quietStream) Close() error {
	close(s.closed)
	return nil
}

// A replay of a thread with no event yet sends its headers at once, and the
// observer is closed when the client leaves.
func TestObserveSendsHeadersAtOnce(t *testing.T) {
	obs := quietObserver{closed: make(chan struct{})}
	srv := server(t, native.Config{Observer: obs})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/threads/quiet/events?since=3", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no headers within 2s: %v", err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("got %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp.Body.Close()
	select {
	case <-obs.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("observer not closed 5s after the client left")
	}
}

// A refused observer is the native error form: 429 and the code's name.
func TestObserveRefusedWhenExhausted(t *testing.T) {
	srv := server(t, native.Config{Observer: quietObserver{}})
	resp, err := http.Get(srv.URL + "/v1/threads/full/events")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"code":"resource_exhausted","message":"API key \"a\" has 2 observers open (max_observers)"}` + "\n"
	if resp.StatusCode != 429 || string(body) != want {
		t.Fatalf("got %d %s, want 429 %s", resp.StatusCode, body, want)
	}
}

func (quietObserver) LastSeq(context.Context, string) (uint64, error) { return 0, nil }

// A replay that fails after its headers ends with an error event naming
// why, after the events before it: the client tells it from a stream the
// server closed.
func TestObserveFailureEndsWithErrorEvent(t *testing.T) {
	srv := server(t, native.Config{Observer: quietObserver{}})
	resp, err := http.Get(srv.URL + "/v1/threads/gap/events?since=2")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// protojson varies its spaces per build: the lines compare as events.
	want := []*canonical.Event{
		{ThreadId: "gap", RunId: "r", Seq: 3, Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusRunning}}},
		{ThreadId: "gap", Kind: &canonical.KindError{Error: &canonical.ErrorProto{Code: uint32(canonical.CodeOutOfRange), Message: "the replay log no longer holds the thread's events 4 to 16"}}},
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if resp.StatusCode != 200 || len(lines) != len(want) {
		t.Fatalf("got %d\n%s\nwant 200 and %d lines", resp.StatusCode, body, len(want))
	}
	for i, line := range lines {
		got := &canonical.Event{}
		if err := protojson.Unmarshal([]byte(line), got); err != nil || !proto.Equal(got, want[i]) {
			t.Fatalf("line %d: %s (%v), want %v", i, line, err, want[i])
		}
	}
}
