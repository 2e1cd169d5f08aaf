package bridge

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// readsBackend starts runs whose events arrive in the reads given: Recv
// returns one event at a time and Buffered counts those left of the
// current read, as the Triton backend's stream does.
type readsBackend struct{ reads [][]*canonical.Event }

func (b readsBackend) Start(context.Context, *canonical.Request) (canonical.Stream, error) {
	return &readsStream{reads: b.reads}, nil
}

type readsStream struct {
	reads [][]*canonical.Event
	cur   []*canonical.Event
}

func (s *readsStream) Recv() (*canonical.Event, error) {
	for len(s.cur) == 0 {
		if len(s.reads) == 0 {
			return nil, io.EOF
		}
		s.cur, s.reads = s.reads[0], s.reads[1:]
	}
	ev := s.cur[0]
	s.cur = s.cur[1:]
	return ev, nil
}

func (s *readsStream) Buffered() int { return len(s.cur) }
func (s *readsStream) Close() error  { return nil }

// threeReads is a run's events as a backend reads them: [running, message
// start, block start, a] [b] [c, d, the finishes, completed].
func threeReads() ([]*canonical.Event, [][]*canonical.Event) {
	bl := canonical.NewBuilder()
	var evs []*canonical.Event
	evs = bl.Lifecycle(evs, canonical.StatusRunning)
	evs = bl.StartMessage(evs, "m1", "assistant")
	evs = bl.Text(evs, "a")
	evs = bl.Text(evs, "b")
	evs = bl.Text(evs, "c")
	evs = bl.Text(evs, "d")
	evs = bl.End(evs, canonical.StatusCompleted, nil)
	return evs, [][]*canonical.Event{evs[:4], evs[4:5], evs[5:]}
}

// The events of one read of the backend are stamped with one time, read
// from the clock once; each read gets a time of its own. An event the
// backend already stamped keeps its time.
func TestEventsOfOneReadShareTheirTime(t *testing.T) {
	evs, reads := threeReads()
	evs[6].TimeUnixNano = 7 // "d": the backend's own time

	clock := 0
	b := NewBridge(NewRouter([]Route{{Target: "reads", Backend: "reads"}}, map[string]canonical.Backend{"reads": readsBackend{reads}}, nil),
		nil, slog.New(slog.DiscardHandler))
	b.now = func() time.Time { clock++; return time.Unix(0, int64(clock*1000)) }
	s, err := b.Run(context.Background(), &canonical.Request{Target: "reads"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := collectBuffered(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(evs) {
		t.Fatalf("%d events, want %d", len(got), len(evs))
	}
	// Per read: one time, later than the read before's.
	groups := [][]int{{0, 1, 2, 3}, {4}, {5, 7, 8, 9}}
	var last int64
	for g, idx := range groups {
		at := got[idx[0]].GetTimeUnixNano()
		for _, i := range idx {
			if got[i].GetTimeUnixNano() != at {
				t.Errorf("read %d: event %d (%T) has time %d, event %d %d", g, i, got[i].GetKind(), got[i].GetTimeUnixNano(), idx[0], at)
			}
		}
		if at <= last {
			t.Errorf("read %d has time %d, not after the read before's %d", g, at, last)
		}
		last = at
	}
	if got[6].GetTimeUnixNano() != 7 {
		t.Errorf("the backend's own time became %d", got[6].GetTimeUnixNano())
	}
	// The bridge reads the clock for other things too (the run's start,
	// its first delta); per event it read it 13 times here.
	if clock >= len(got) {
		t.Errorf("the clock was read %d times for %d events in %d reads", clock, len(got), len(reads))
	}
}

// A backend holding many events at once gets a fresh time every
// stampShare+1 events: a backend whose held events span reads (a queue a
// slow consumer let grow) would otherwise stamp them all with the first
// one's time.
func TestHeldEventsShareATimeBoundedly(t *testing.T) {
	bl := canonical.NewBuilder()
	evs := bl.Lifecycle(nil, canonical.StatusRunning)
	for range 3 * stampShare {
		evs = bl.Text(evs, "x")
	}
	evs = bl.End(evs, canonical.StatusCompleted, nil)

	clock := 0
	b := NewBridge(NewRouter([]Route{{Target: "reads", Backend: "reads"}}, map[string]canonical.Backend{"reads": readsBackend{[][]*canonical.Event{evs}}}, nil),
		nil, slog.New(slog.DiscardHandler))
	b.now = func() time.Time { clock++; return time.Unix(0, int64(clock)) }
	s, err := b.Run(context.Background(), &canonical.Request{Target: "reads"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := collectBuffered(s)
	if err != nil || len(got) != len(evs) {
		t.Fatalf("%d events, %v; want %d", len(got), err, len(evs))
	}
	run := 1 // events in a row with the same time
	for i := 1; i < len(got); i++ {
		prev, at := got[i-1].GetTimeUnixNano(), got[i].GetTimeUnixNano()
		switch {
		case at < prev:
			t.Fatalf("event %d has time %d, before event %d's %d", i, at, i-1, prev)
		case at == prev:
			if run++; run > stampShare+1 {
				t.Fatalf("events %d to %d share one time", i-run+1, i)
			}
		default:
			run = 1
		}
	}
}

// A run's events go to the publish queue a backend read at a time: those
// of one read are held until the backend holds no more (the run is about
// to wait on it) and are then queued as one message, to be published
// within the delay; the run's end queues the rest and wakes the publish
// loop at once.
func TestEventsOfOneReadAreQueuedTogether(t *testing.T) {
	_, reads := threeReads()
	f := queueFabric(1000)
	b := NewBridge(NewRouter([]Route{{Target: "reads", Backend: "reads"}}, map[string]canonical.Backend{"reads": readsBackend{reads}}, nil),
		f, slog.New(slog.DiscardHandler))
	s, err := b.Run(context.Background(), &canonical.Request{Target: "reads"})
	if err != nil {
		t.Fatal(err)
	}
	var queued []int // events per queued message, as each Recv returns
	for {
		_ = s.(canonical.Buffered).Buffered()
		ev, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, end := canonical.TerminalOf(ev); !end && len(f.pubq.wake) != 0 {
			t.Fatalf("seq %d: the publish loop was woken at once", ev.GetSeq())
		}
		f.pubq.mu.Lock()
		for _, m := range f.pubq.msgs[len(queued):] {
			queued = append(queued, m.events)
		}
		f.pubq.mu.Unlock()
	}
	if want := []int{4, 1, 5}; !slices.Equal(queued, want) {
		t.Fatalf("events per queued message %v, want %v (the reads)", queued, want)
	}
	if len(f.pubq.wake) != 1 {
		t.Fatal("the run's end did not wake the publish loop")
	}
}
