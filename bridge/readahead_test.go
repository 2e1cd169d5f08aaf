package bridge

import (
	"context"
	"io"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

// runOf is the bridge's run under the metering wrapper.
func runOf(t *testing.T, s canonical.Stream) *run {
	t.Helper()
	r, ok := s.(*metered).Stream.(*run)
	if !ok {
		t.Fatalf("%T is not a local run", s)
	}
	return r
}

// collectBuffered reads s to its end asking Buffered before every Recv,
// as a frontend that batches its writes does.
func collectBuffered(s canonical.Stream) ([]*canonical.Event, error) {
	b := s.(interface{ Buffered() int })
	var out []*canonical.Event
	for {
		_ = b.Buffered()
		ev, err := s.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func aheadDone(r *run) bool {
	select {
	case <-r.aheadDone:
		return true
	default:
		return false
	}
}

// Asked Buffered, a run whose backend cannot tell reads ahead on its own
// goroutine: the events are the same, stamped and in seq order, and the
// goroutine is gone once the terminal event is delivered.
func TestRunReadsAheadWhenAskedBuffered(t *testing.T) {
	b := scriptedBridge(t)
	params := map[string]any{"deltas": 3 * aheadEvents, "delta_text": "x "}
	plain, err := b.Run(context.Background(), req("stream", "", params))
	if err != nil {
		t.Fatal(err)
	}
	want, err := canonical.Collect(plain)
	if err != nil {
		t.Fatal(err)
	}
	r := req("stream", "", params)
	r.ThreadId = "thread-ahead"
	s, err := b.Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := collectBuffered(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := canonical.Validate(got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events read ahead, %d without", len(got), len(want))
	}
	for i, ev := range got {
		if ev.GetSeq() != uint64(i+1) || ev.GetThreadId() != "thread-ahead" || ev.GetTimeUnixNano() == 0 ||
			ev.GetBlockDelta().GetText() != want[i].GetBlockDelta().GetText() {
			t.Fatalf("event %d = %v, want %v", i, ev, want[i])
		}
	}
	run := runOf(t, s)
	if run.ahead == nil {
		t.Fatal("read-ahead never started")
	}
	if !aheadDone(run) {
		t.Fatal("read-ahead goroutine still running after the terminal event")
	}
	if b.Running() != 0 {
		t.Fatalf("%d runs still registered", b.Running())
	}
	_ = s.Close()
}

// countStream is an endless run of text deltas; it signals full on the
// Recv that finds read-ahead's queue full and one more event in hand.
type countStream struct {
	b       *canonical.Builder
	pending []*canonical.Event
	n       int
	full    chan struct{}
}

func (s *countStream) Recv() (*canonical.Event, error) {
	s.n++
	if s.n == 1 {
		return s.b.Lifecycle(nil, canonical.StatusRunning)[0], nil
	}
	if s.n == aheadEvents+5 { // the test took 4 events, the queue holds aheadEvents: this is the one more in hand
		close(s.full)
	}
	if len(s.pending) == 0 {
		s.pending = s.b.Text(s.pending, "x")
	}
	ev := s.pending[0]
	s.pending = s.pending[1:]
	return ev, nil
}

func (s *countStream) Close() error { return nil }

type countBackend struct{ s *countStream }

func (b countBackend) Start(context.Context, *canonical.Request) (canonical.Stream, error) {
	return b.s, nil
}

// Close stops read-ahead wherever it is, and waits for it: blocked on a
// full queue, or in a backend's Recv that waits for cancellation.
func TestCloseStopsReadAhead(t *testing.T) {
	t.Run("queue full", func(t *testing.T) {
		cs := &countStream{b: canonical.NewBuilder(), full: make(chan struct{})}
		b := testBridge(t, []Route{{Target: "x", Backend: "c"}}, map[string]canonical.Backend{"c": countBackend{cs}})
		s, err := b.Run(context.Background(), &canonical.Request{Target: "x"})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ { // running, message start, block start, first delta
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		if n := s.(interface{ Buffered() int }).Buffered(); n != 0 {
			t.Fatalf("Buffered = %d before read-ahead ran", n)
		}
		<-cs.full
		_ = s.Close()
		if !aheadDone(runOf(t, s)) {
			t.Fatal("Close returned with read-ahead running")
		}
		if b.Running() != 0 {
			t.Fatalf("%d runs still registered", b.Running())
		}
	})
	t.Run("backend waiting", func(t *testing.T) {
		b := scriptedBridge(t)
		s, err := b.Run(context.Background(), req("echo", "a b", map[string]any{"hang": true}))
		if err != nil {
			t.Fatal(err)
		}
		for { // to the first delta, after which the backend hangs
			ev, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if ev.GetBlockDelta() != nil {
				break
			}
		}
		if n := s.(interface{ Buffered() int }).Buffered(); n != 0 {
			t.Fatalf("Buffered = %d with the backend hanging", n)
		}
		done := make(chan []*canonical.Event)
		go func() { evs, _ := canonical.Collect(s); done <- evs }()
		_ = s.Close()
		if !aheadDone(runOf(t, s)) {
			t.Fatal("Close returned with read-ahead running")
		}
		// The blocked reader returns: with what read-ahead had queued (the
		// cancelled run's closing events, or some of them), then io.EOF.
		for _, ev := range <-done {
			if ev.GetBlockDelta() != nil {
				t.Fatalf("reader got a delta after Close: %v", ev)
			}
		}
	})
}

// bufStream is a backend stream that says what it holds.
type bufStream struct {
	sliceStream
}

func (s *bufStream) Buffered() int { return len(s.evs) }

type bufBackend struct{ s *bufStream }

func (b bufBackend) Start(context.Context, *canonical.Request) (canonical.Stream, error) {
	return b.s, nil
}

// A backend stream that says how many events it holds is asked instead:
// no read-ahead goroutine.
func TestBufferedAsksTheBackend(t *testing.T) {
	bld := canonical.NewBuilder()
	evs := bld.Lifecycle(nil, canonical.StatusRunning)
	evs = bld.Text(evs, "a")
	evs = bld.Text(evs, "b")
	evs = bld.End(evs, canonical.StatusCompleted, nil)
	bs := &bufStream{sliceStream{evs: evs}}
	b := testBridge(t, []Route{{Target: "x", Backend: "b"}}, map[string]canonical.Backend{"b": bufBackend{bs}})
	s, err := b.Run(context.Background(), &canonical.Request{Target: "x"})
	if err != nil {
		t.Fatal(err)
	}
	buf := s.(interface{ Buffered() int })
	for want := len(evs); ; want-- {
		if n := buf.Buffered(); n != want {
			t.Fatalf("Buffered = %d, want %d", n, want)
		}
		if _, err := s.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if runOf(t, s).ahead != nil {
		t.Fatal("read-ahead started for a backend that says what it holds")
	}
}
