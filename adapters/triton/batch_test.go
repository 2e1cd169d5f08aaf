package triton_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/adapters/triton"
	"github.com/interlingua-dev/interlingua/canonical"
)

// scriptStream replays events; wrapped in bufferedStream it also says how
// many Recv returns without waiting (as the bridge's runs do). Before event
// i with block[i] set, Recv "waits": it checks with beforeWait that the
// client already has every response written so far.
type scriptStream struct {
	events     []*canonical.Event
	next       int
	block      map[int]bool
	beforeWait func() error
	waits      int
}

func (s *scriptStream) Recv() (*canonical.Event, error) {
	if s.next == len(s.events) {
		return nil, io.EOF
	}
	if s.block[s.next] {
		s.waits++
		if err := s.beforeWait(); err != nil {
			return nil, err
		}
	}
	ev := s.events[s.next]
	s.next++
	return ev, nil
}

func (s *scriptStream) Close() error { return nil }

// bufferedStream adds Buffered to a scriptStream.
type bufferedStream struct{ *scriptStream }

// Buffered counts the events before the next one that waits.
func (s bufferedStream) Buffered() int {
	n := 0
	for i := s.next; i < len(s.events) && !s.block[i]; i++ {
		n++
	}
	return n
}

type scriptRunner struct{ s canonical.Stream }

func (r scriptRunner) Run(context.Context, *canonical.Request) (canonical.Stream, error) {
	return r.s, nil
}
func (scriptRunner) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name, Backend: "script"}, true
}
func (scriptRunner) Targets() []canonical.TargetInfo { return nil }

// flushRecorder records what reached the client: the body at each flush.
type flushRecorder struct {
	recorder
	flushed []string
}

func (r *flushRecorder) Flush() { r.flushed = append(r.flushed, r.body.String()) }

// unflushed is what was written but has not reached the client.
func (r *flushRecorder) unflushed() string {
	sent := ""
	if len(r.flushed) > 0 {
		sent = r.flushed[len(r.flushed)-1]
	}
	return strings.TrimPrefix(r.body.String(), sent)
}

func deltaRun(n int) []*canonical.Event {
	b := canonical.NewBuilder()
	out := b.Lifecycle(nil, canonical.StatusRunning)
	out = b.StartMessage(out, "m", "assistant")
	for i := range n {
		out = b.Text(out, fmt.Sprintf(" t%d", i))
	}
	return b.End(out, canonical.StatusCompleted, nil)
}

func wantBody(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "data: {\"model_name\":\"m\",\"model_version\":\"1\",\"text_output\":\" t%d\"}\n\n", i)
	}
	return b.String()
}

func serveScript(t *testing.T, s canonical.Stream, rec *flushRecorder) {
	t.Helper()
	f := triton.NewFrontend(triton.FrontendConfig{Runner: scriptRunner{s}})
	mux := http.NewServeMux()
	f.Mount(mux)
	rec.header = http.Header{}
	mux.ServeHTTP(rec, newRequest(t, "/v2/models/m/generate_stream", strings.NewReader(`{"text_input":"hi","stream":true}`)))
	if rec.status != 200 {
		t.Fatalf("status %d: %s", rec.status, rec.body.String())
	}
}

// A run whose events are all at hand is written in one flush, byte for
// byte what is written response by response; a run that cannot say gets a
// flush per response, as before.
func TestStreamBatchesResponsesAtHand(t *testing.T) {
	const n = 50
	for _, tc := range []struct {
		name    string
		stream  func(*scriptStream) canonical.Stream
		flushes int
	}{
		{"buffered", func(s *scriptStream) canonical.Stream { return bufferedStream{s} }, 1},
		{"unbuffered", func(s *scriptStream) canonical.Stream { return s }, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &flushRecorder{}
			serveScript(t, tc.stream(&scriptStream{events: deltaRun(n)}), rec)
			if got := rec.body.String(); got != wantBody(n) {
				t.Fatalf("body\n%s\nwant\n%s", got, wantBody(n))
			}
			if len(rec.flushed) != tc.flushes || rec.flushed[len(rec.flushed)-1] != wantBody(n) {
				t.Fatalf("%d flushes, want %d ending with the whole body", len(rec.flushed), tc.flushes)
			}
		})
	}
}

// A response is never held for a later one: when the run's next event is
// not at hand, everything queued is flushed before the frontend waits for
// it.
func TestStreamFlushesBeforeWaiting(t *testing.T) {
	const n = 12
	evs := deltaRun(n)
	block := map[int]bool{}
	for i, ev := range evs {
		if ev.GetBlockDelta() != nil && i%4 == 0 {
			block[i] = true
		}
	}
	rec := &flushRecorder{}
	s := &scriptStream{events: evs, block: block}
	s.beforeWait = func() error {
		if u := rec.unflushed(); u != "" {
			return canonical.Errorf(canonical.CodeInternal, "test: waiting for the next event with %q held back", u)
		}
		if rec.body.Len() == 0 {
			return canonical.Errorf(canonical.CodeInternal, "test: nothing written before the first wait")
		}
		return nil
	}
	serveScript(t, bufferedStream{s}, rec)
	if got := rec.body.String(); got != wantBody(n) {
		t.Fatalf("body\n%s\nwant\n%s", got, wantBody(n))
	}
	if s.waits != len(block) || len(block) < 2 {
		t.Fatalf("%d Recvs waited, want %d", s.waits, len(block))
	}
	if len(rec.flushed) != len(block)+1 {
		t.Errorf("%d flushes, want one before each wait and one at the end", len(rec.flushed))
	}
}
