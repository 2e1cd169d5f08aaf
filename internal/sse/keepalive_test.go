package sse

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
