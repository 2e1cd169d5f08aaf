package bridge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// streamRun runs the stream target on thread with n deltas and returns
// the thread's last seq after it.
func streamRun(t *testing.T, inst *bridgetest.Instance, thread string, n int) uint64 {
	t.Helper()
	evs, code := bridgetest.PostRun(t, inst.URL, fmt.Sprintf(`{"target":"stream","threadId":%q,"parameters":{"deltas":%d},"inputs":[]}`, thread, n))
	if code != 200 || len(evs) == 0 {
		t.Fatalf("run on %s: status %d, %d events", thread, code, len(evs))
	}
	if st, _ := canonical.TerminalOf(evs[len(evs)-1]); st != canonical.StatusCompleted {
		t.Fatalf("run on %s ended %v", thread, evs[len(evs)-1])
	}
	return evs[len(evs)-1].GetSeq()
}

// streamConsumers is the replay stream's consumer count.
func streamConsumers(t *testing.T, inst *bridgetest.Instance) int {
	t.Helper()
	st, err := inst.Fabric().JetStream().Stream(t.Context(), bridge.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

// Fifty observers of five threads on one instance hold one replay-log
// consumer between them (JetStream's limit of a stream's consumers is
// every key's and instance's to share, and a consumer filtered to each
// thread made the server look through every other thread's messages for
// each one it delivered), and each gets every event of its thread's runs
// that follow, live, in order, and none of another thread's, nor of a
// thread nobody observes; the consumer goes with the last observer.
func TestObserversShareOneConsumer(t *testing.T) {
	ns := natsServer(t)
	inst := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	threads := []string{"shared-tail", "tail.b", "tail é", "tail-d", "tail-e"}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type observer struct {
		thread string
		since  uint64
		s      canonical.Stream
	}
	var observers []observer
	for _, thread := range threads {
		last := streamRun(t, inst, thread, 3)
		for range 10 {
			o, err := inst.Bridge().Observe(ctx, thread, last)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			observers = append(observers, observer{thread, last, o})
		}
	}
	if n := streamConsumers(t, inst); n != 1 {
		t.Fatalf("%d replay-log consumers with 50 observers of five threads, want 1", n)
	}
	streamRun(t, inst, "unobserved", 50)
	ends := map[string]uint64{}
	for i, thread := range threads {
		ends[thread] = streamRun(t, inst, thread, 100+20*i)
	}
	for i, o := range observers {
		for want := o.since + 1; want <= ends[o.thread]; want++ {
			ev, err := o.s.Recv()
			if err != nil || ev.GetSeq() != want || ev.GetThreadId() != o.thread {
				t.Fatalf("observer %d of %q: seq %d of %q, %v; want seq %d", i, o.thread, ev.GetSeq(), ev.GetThreadId(), err, want)
			}
		}
	}
	for _, o := range observers {
		o.s.Close()
	}
	waitFor(t, func() bool { return streamConsumers(t, inst) == 0 })
}

// An observer that reads nothing while far more events than an instance
// keeps for a thread's observers go by (a slow reader) is not cut off: it
// reads what it lacks from the replay log, then the rest, each event once
// and in order.
func TestSlowObserverReadsTheLog(t *testing.T) {
	ns := natsServer(t)
	inst := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	const thread = "slow-reader"
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	slow, err := inst.Bridge().Observe(ctx, thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	streamRun(t, inst, thread, 3*bridge.TailWindow)
	end := streamRun(t, inst, thread, 10)
	for want := uint64(1); want <= end; want++ {
		ev, err := slow.Recv()
		if err != nil || ev.GetSeq() != want {
			t.Fatalf("slow observer: seq %d, %v; want seq %d", ev.GetSeq(), err, want)
		}
	}
}

// Property: observers opened at random seqs, during and between runs,
// each reading at a pace of its own, each get exactly the thread's events
// after their since, in order, however the window and the log split them.
func TestObserversGetEveryEventAfterSince(t *testing.T) {
	ns := natsServer(t)
	inst := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	const thread = "random-readers"
	rng := rand.New(rand.NewPCG(7, 11))
	last := streamRun(t, inst, thread, bridge.TailWindow+rng.IntN(500))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	type reader struct {
		since uint64
		pause time.Duration
		o     canonical.Stream
		got   []uint64
		err   error
	}
	var readers []*reader
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := func(since uint64) {
		r := &reader{since: since, pause: time.Duration(rng.IntN(3)) * time.Millisecond}
		var err error
		if r.o, err = inst.Bridge().Observe(ctx, thread, since); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
		wg.Go(func() {
			for i := 0; ; i++ {
				ev, err := r.o.Recv()
				mu.Lock()
				if err != nil {
					r.err = err
					mu.Unlock()
					return
				}
				r.got = append(r.got, ev.GetSeq())
				mu.Unlock()
				if r.pause > 0 && i%512 == 0 {
					time.Sleep(r.pause)
				}
			}
		})
	}
	for range 8 {
		open(uint64(rng.IntN(int(last) + 1)))
	}
	for range 3 {
		last = streamRun(t, inst, thread, rng.IntN(2*bridge.TailWindow))
		for range 4 {
			open(uint64(rng.IntN(int(last) + 1)))
		}
	}
	// Every reader has the thread's last event, or stopped on an error.
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range readers {
			if r.err == nil && r.since != last && (len(r.got) == 0 || r.got[len(r.got)-1] != last) {
				return false
			}
		}
		return true
	})
	for _, r := range readers {
		r.o.Close()
	}
	wg.Wait()
	for i, r := range readers {
		if !consecutive(r.got, r.since+1, last) {
			t.Errorf("reader %d (since %d): got %d events, first %v, want %d to %d; then %v", i, r.since, len(r.got), r.got[:min(3, len(r.got))], r.since+1, last, r.err)
		}
	}
}

// Observers opening one thread's tail at once, some giving up while it
// opens, leave it neither half open nor shared in a broken state: every
// one that stays gets the thread's next run, and the tail's consumer goes
// with the last.
func TestObserversOpeningATailAtOnce(t *testing.T) {
	ns := natsServer(t)
	inst := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	const thread = "opened-at-once"
	var wg sync.WaitGroup
	kept := make([]canonical.Stream, 40)
	for i := range kept {
		wg.Go(func() {
			ctx := t.Context()
			if i%2 == 1 {
				c, cancel := context.WithTimeout(ctx, time.Duration(i)*50*time.Microsecond)
				defer cancel()
				if o, err := inst.Bridge().Observe(c, thread, 0); err == nil {
					o.Close()
				}
				return
			}
			o, err := inst.Bridge().Observe(ctx, thread, 0)
			if err != nil {
				t.Errorf("observer %d: %v", i, err)
				return
			}
			kept[i] = o
		})
	}
	wg.Wait()
	end := streamRun(t, inst, thread, 20)
	for i, o := range kept {
		if o == nil {
			continue
		}
		for want := uint64(1); want <= end; want++ {
			ev, err := o.Recv()
			if err != nil || ev.GetSeq() != want {
				t.Fatalf("observer %d: seq %d, %v; want seq %d", i, ev.GetSeq(), err, want)
			}
		}
		o.Close()
	}
	waitFor(t, func() bool { return streamConsumers(t, inst) == 0 })
}

// A reader with no goroutine of its own polls an observer: Poll returns
// what is ready, never waiting, and the Notify function tells it when to
// poll again; it gets every event of a run from LastSeq on, in order.
func TestObserverPolledWithNotify(t *testing.T) {
	ns := natsServer(t)
	inst := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	const thread = "polled"
	first := streamRun(t, inst, thread, 3)
	var last uint64
	waitFor(t, func() bool {
		var err error
		last, err = inst.Bridge().LastSeq(t.Context(), thread)
		return err == nil && last == first
	})
	o, err := inst.Bridge().Observe(t.Context(), thread, last)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	p := o.(canonical.Poller)
	ready := make(chan struct{}, 1)
	p.Notify(func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	})
	if evs, err := p.Poll(nil, 10); err != nil || len(evs) != 0 {
		t.Fatalf("a poll with nothing ready: %d events, %v", len(evs), err)
	}
	end := streamRun(t, inst, thread, 300)
	want := last + 1
	for want <= end {
		evs, err := p.Poll(nil, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.GetSeq() != want {
				t.Fatalf("seq %d, want %d", ev.GetSeq(), want)
			}
			want++
		}
		if len(evs) == 0 {
			select {
			case <-ready:
			case <-time.After(10 * time.Second):
				t.Fatalf("not notified; at seq %d of %d", want-1, end)
			}
		}
	}
}
