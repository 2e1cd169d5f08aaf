package sse

import (
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// A silent stream gets a send after each interval of silence, with the
// writer's lock held; a stream written more often than that gets none;
// after Stop, or after a send that failed, there are no more.
func TestKeepalive(t *testing.T) {
	const every = 20 * time.Millisecond
	var mu sync.Mutex
	var sends atomic.Int32
	var unlocked atomic.Bool
	k := NewKeepalive(&mu, every, func() error {
		if mu.TryLock() { // send runs with mu held: TryLock must fail
			unlocked.Store(true)
			mu.Unlock()
		}
		sends.Add(1)
		return nil
	})
	time.Sleep(10*every + every/2)
	if n := sends.Load(); n < 3 || n > 10 {
		t.Fatalf("%d sends in 10.5 intervals of silence, want about 10 (at least 3, at most 10)", n)
	}
	if unlocked.Load() {
		t.Fatal("send ran without the writer's lock")
	}

	// Writes every quarter interval: no send.
	mu.Lock()
	k.Wrote()
	mu.Unlock()
	before := sends.Load()
	for range 20 {
		time.Sleep(every / 4)
		mu.Lock()
		k.Wrote()
		mu.Unlock()
	}
	if n := sends.Load() - before; n > 0 {
		t.Fatalf("%d sends while the writer wrote every quarter interval", n)
	}

	k.Stop()
	stopped := sends.Load()
	time.Sleep(4 * every)
	if n := sends.Load() - stopped; n > 0 {
		t.Fatalf("%d sends after Stop", n)
	}

	var failing atomic.Int32
	k = NewKeepalive(&mu, every, func() error { failing.Add(1); return errors.New("client gone") })
	defer k.Stop()
	time.Sleep(5 * every)
	if n := failing.Load(); n != 1 {
		t.Fatalf("%d sends after the first failed, want that one only", n)
	}
}

// heldStream returns its events, telling how many it holds at hand after
// each: the first two arrive together, the third alone; then io.EOF.
type heldStream struct {
	evs  []*canonical.Event
	held []int
	next int
}

func (s *heldStream) Recv() (*canonical.Event, error) {
	if s.next == len(s.evs) {
		return nil, io.EOF
	}
	s.next++
	return s.evs[s.next-1], nil
}
func (s *heldStream) Buffered() int { return s.held[s.next-1] }
func (s *heldStream) Close() error  { return nil }

// Relay hands write each event, then the error, with the writer's lock
// held, idle only when the stream holds nothing more at hand, and stops
// when write says the response has ended.
func TestRelay(t *testing.T) {
	var mu sync.Mutex
	k := NewKeepalive(&mu, time.Hour, func() error { return nil })
	defer k.Stop()
	evs := []*canonical.Event{{Seq: 1}, {Seq: 2}, {Seq: 3}}
	type call struct {
		seq          uint64
		err          error
		idle, locked bool
	}
	var got []call
	k.Relay(&heldStream{evs: evs, held: []int{1, 0, 0}}, func(ev *canonical.Event, err error, idle bool) bool {
		locked := !mu.TryLock()
		if !locked {
			mu.Unlock()
		}
		got = append(got, call{ev.GetSeq(), err, idle, locked})
		return err != nil
	})
	want := []call{{1, nil, false, true}, {2, nil, true, true}, {3, nil, true, true}, {0, io.EOF, true, true}}
	if !slices.Equal(got, want) {
		t.Fatalf("writes %+v, want %+v", got, want)
	}
}
