package bridge_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// Property: runs of one thread started at once on two instances that both
// host the backend never give two events one seq (each used to continue
// from the same last seq in the log): the thread's replay log holds every
// event each client saw, seqs 1, 2, 3 … in order, each once.
func TestConcurrentRunsOnOneThreadAcrossInstances(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	const thread, runs = "together", 16
	var mu sync.Mutex
	seen := map[uint64]*canonical.Event{}
	var wg sync.WaitGroup
	for i := range runs {
		at := a
		if i%2 == 1 {
			at = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &canonical.Request{Target: "stream", ThreadId: thread, RunId: fmt.Sprintf("run-%d", i),
				Parameters: map[string]*structpb.Value{"deltas": structpb.NewNumberValue(20)}}
			s, err := at.Bridge().Run(context.Background(), r)
			if err != nil {
				t.Error(err)
				return
			}
			evs, _ := canonical.Collect(s)
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range evs {
				if prev, dup := seen[ev.GetSeq()]; dup {
					t.Errorf("seq %d given to %s and %s", ev.GetSeq(), prev.GetRunId(), ev.GetRunId())
				}
				seen[ev.GetSeq()] = ev
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	replay, err := a.Bridge().Observe(context.Background(), thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	for seq := uint64(1); seq <= uint64(len(seen)); seq++ {
		ev, err := replay.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(ev, seen[seq]) {
			t.Fatalf("the log's seq %d is %v; a client saw %v", seq, ev, seen[seq])
		}
	}
}

// A run of a thread another instance is running is placed on that
// instance, which holds the thread's lease and numbers its events: the two
// runs go on at once, their seqs interleaved in one space, as two runs of
// a thread on one instance do.
func TestRunPlacedOnThreadHolder(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hang := &canonical.Request{Target: "echo", ThreadId: "busy", Parameters: map[string]*structpb.Value{"hang": structpb.NewBoolValue(true)}}
	held, err := a.Bridge().Run(ctx, hang)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := held.Recv(); err != nil || ev.GetSeq() != 1 {
		t.Fatalf("first event %v %v", ev, err)
	}
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	s, err := b.Bridge().Run(ctxB, &canonical.Request{Target: "echo", ThreadId: "busy",
		Parameters: map[string]*structpb.Value{"hang": structpb.NewBoolValue(true)}})
	if err != nil {
		t.Fatalf("a run while A runs the thread: %v", err)
	}
	if ev, err := s.Recv(); err != nil || ev.GetSeq() != 2 {
		t.Fatalf("B's run's first event %v %v", ev, err)
	}
	waitFor(t, func() bool { return a.Bridge().Running() == 2 })
	if n := b.Bridge().Running(); n != 0 {
		t.Fatalf("B runs %d runs itself", n)
	}
	cancelB()
	evs, _ := canonical.Collect(s)
	for i, ev := range evs {
		if ev.GetSeq() != uint64(i+3) {
			t.Fatalf("B's run's event %d has seq %d", i+1, ev.GetSeq())
		}
	}
	cancel()
	rest, _ := canonical.Collect(held)
	if end := rest[len(rest)-1]; end.GetSeq() != uint64(len(evs)+3) {
		t.Fatalf("A's run ends at seq %d after B's %d events", end.GetSeq(), len(evs)+1)
	}
}

// A thread a run was started without (the bridge named it for the run)
// can be run on next at once from another instance, even while its first
// run goes on: the first run took the thread's lease too, so the second is
// placed beside it and every seq is given once.
func TestThreadOfThreadlessRunContinuedElsewhere(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	for i := range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		first, err := a.Bridge().Run(ctx, &canonical.Request{Target: "stream",
			Parameters: map[string]*structpb.Value{"deltas": structpb.NewNumberValue(40), "delay_ms": structpb.NewNumberValue(1)}})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := first.Recv()
		if err != nil {
			t.Fatal(err)
		}
		thread := ev.GetThreadId()
		seen := map[uint64]string{ev.GetSeq(): ev.GetRunId()}
		var mu sync.Mutex
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the first run goes on meanwhile (every other time)
			defer wg.Done()
			if i%2 == 1 {
				time.AfterFunc(5*time.Millisecond, cancel)
			}
			evs, _ := canonical.Collect(first)
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range evs {
				if prev, dup := seen[ev.GetSeq()]; dup {
					t.Errorf("thread %d: seq %d given to %s and %s", i, ev.GetSeq(), prev, ev.GetRunId())
				}
				seen[ev.GetSeq()] = ev.GetRunId()
			}
		}()
		next, err := b.Bridge().Run(context.Background(), &canonical.Request{Target: "stream", ThreadId: thread,
			Parameters: map[string]*structpb.Value{"deltas": structpb.NewNumberValue(5)}})
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := canonical.Collect(next)
		wg.Wait()
		cancel()
		for _, ev := range evs {
			if prev, dup := seen[ev.GetSeq()]; dup {
				t.Errorf("thread %d: seq %d given to %s and %s", i, ev.GetSeq(), prev, ev.GetRunId())
			}
		}
	}
}

// A run of a thread whose lease holder does not host the run's backend
// cannot be placed there: it waits for the lease (its TTL and half of
// nats.start_timeout), is refused aborted while the holder's run goes on,
// and runs, numbered after the holder's events, once that run has ended.
func TestRunWaitsForHolderWithoutItsBackend(t *testing.T) {
	ns := natsServer(t)
	withSecond := func(c *bridge.Config) *bridge.Config {
		c.Backends["second"] = bridge.BackendConfig{Type: "scripted"}
		c.Routes = append(c.Routes, bridge.Route{Target: "second-stream", Backend: "second", Model: "stream"})
		c.NATS.StartTimeout = 200 * time.Millisecond
		return c
	}
	a := bridgetest.Start(t, withSecond(clusterConfig(ns.ClientURL(), "scripted")))
	b := bridgetest.Start(t, withSecond(clusterConfig(ns.ClientURL())))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held, err := a.Bridge().Run(ctx, &canonical.Request{Target: "echo", ThreadId: "mixed",
		Parameters: map[string]*structpb.Value{"hang": structpb.NewBoolValue(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Recv(); err != nil {
		t.Fatal(err)
	}
	second := func() (canonical.Stream, error) {
		return b.Bridge().Run(context.Background(), &canonical.Request{Target: "second-stream", ThreadId: "mixed",
			Parameters: map[string]*structpb.Value{"deltas": structpb.NewNumberValue(2)}})
	}
	if _, err := second(); canonical.CodeOf(err) != canonical.CodeAborted {
		t.Fatalf("a run A cannot host while A holds the thread: %v", err)
	}
	cancel()
	rest, _ := canonical.Collect(held)
	last := rest[len(rest)-1].GetSeq()
	s, err := second()
	if err != nil {
		t.Fatalf("once A's run has ended: %v", err)
	}
	evs, _ := canonical.Collect(s)
	if evs[0].GetSeq() != last+1 {
		t.Fatalf("B's run starts at seq %d after A's last %d", evs[0].GetSeq(), last)
	}
}
