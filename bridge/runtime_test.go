package bridge_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// stepRuntime is a runtime that adds a state snapshot (the count of the
// backend's events so far) after each of the backend's events but the
// terminal one, and counts the runs it started.
type stepRuntime struct{ started atomic.Int64 }

func (r *stepRuntime) Start(ctx context.Context, req *canonical.Request, be canonical.Backend) (canonical.Stream, error) {
	r.started.Add(1)
	up, err := be.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return &stepStream{up: up}, nil
}

type stepStream struct {
	up      canonical.Stream
	n       float64
	pending *canonical.Event
}

func (s *stepStream) Recv() (*canonical.Event, error) {
	if ev := s.pending; ev != nil {
		s.pending = nil
		return ev, nil
	}
	ev, err := s.up.Recv()
	if err != nil {
		return nil, err
	}
	if _, end := canonical.TerminalOf(ev); !end {
		s.n++
		s.pending = &canonical.Event{Kind: &canonical.KindStateSnapshot{StateSnapshot: &canonical.StateSnapshot{Values: canonical.Value(map[string]any{"events": s.n})}}}
	}
	return ev, nil
}

func (s *stepStream) Close() error { return s.up.Close() }

// A runtime a request names runs on the instance that hosts the backend,
// and what it adds takes the thread's seqs: a client on another instance
// reads each snapshot right after its event, numbered in turn, and an
// observer replays the same events from the log.
func TestRuntimeRunsWhereTheBackendIs(t *testing.T) {
	ns := natsServer(t)
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL(), "none"))
	onA, onB := &stepRuntime{}, &stepRuntime{}
	a.Bridge().AddRuntime("steps", onA)
	b.Bridge().AddRuntime("steps", onB)

	r := &canonical.Request{Target: "echo", ThreadId: "thread-steps", Runtime: "steps",
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "one two three")}}}
	s, err := a.Bridge().Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := canonical.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if onA.started.Load() != 0 || onB.started.Load() != 1 {
		t.Fatalf("runtime started %d times on the client's instance and %d on the backend's, want 0 and 1", onA.started.Load(), onB.started.Load())
	}
	var backendEvents float64
	for i, ev := range evs {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.GetSeq())
		}
		if _, end := canonical.TerminalOf(ev); end {
			if i != len(evs)-1 {
				t.Fatalf("terminal event at %d of %d", i, len(evs))
			}
			continue
		}
		if i%2 == 0 {
			backendEvents++
			continue
		}
		got := ev.GetStateSnapshot().GetValues().GetStructValue().GetFields()["events"].GetNumberValue()
		if got != backendEvents {
			t.Fatalf("event %d: %v, want the snapshot after backend event %v", i, ev, backendEvents)
		}
	}
	if backendEvents < 3 {
		t.Fatalf("only %v backend events: %v", backendEvents, evs)
	}

	obs, err := a.Bridge().Observe(context.Background(), "thread-steps", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	var replayed []*canonical.Event
	for len(replayed) < len(evs) {
		ev, err := obs.Recv()
		if err != nil {
			t.Fatal(err)
		}
		replayed = append(replayed, ev)
	}
	if got, want := kindsOf(replayed), kindsOf(evs); !slices.Equal(got, want) {
		t.Fatalf("observer replayed %v, want %v", got, want)
	}
}

// kindsOf is each event's seq and kind.
func kindsOf(evs []*canonical.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%d:%T", ev.GetSeq(), ev.GetKind()))
	}
	return out
}

// A request naming a runtime no instance has is refused before any event.
func TestUnknownRuntimeRefused(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := a.Bridge().Run(ctx, &canonical.Request{Target: "echo", Runtime: "nope"})
	if canonical.CodeOf(err) != canonical.CodeInvalidArgument {
		t.Fatalf("got %v, want invalid_argument", err)
	}
	if a.Bridge().Running() != 0 {
		t.Fatal("a run is registered")
	}
}
