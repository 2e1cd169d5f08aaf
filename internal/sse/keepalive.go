package sse

import (
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Keepalive speaks on a stream its writer leaves silent: it calls send
// once nothing has been written for every, and again after each every of
// silence after that, until Stop or until send fails (the client is gone;
// the writer finds out on its next write). It runs on a timer, not a
// goroutine of its own, so the stream's goroutine can wait in its run's
// Recv and write each event as it comes, with no hand-off between a
// reading goroutine and a writing one.
//
// The writer and send share mu: the writer holds it while it writes and
// calls Wrote before letting it go; send is called with it held.
type Keepalive struct {
	mu      *sync.Mutex
	every   time.Duration
	send    func() error
	timer   *time.Timer
	last    time.Time // of the last write; guarded by mu
	stopped bool      // guarded by mu
}

// NewKeepalive starts a keepalive for a stream whose last write is now.
// The caller does not hold mu.
func NewKeepalive(mu *sync.Mutex, every time.Duration, send func() error) *Keepalive {
	k := &Keepalive{mu: mu, every: every, send: send}
	mu.Lock()
	defer mu.Unlock()
	k.last = time.Now()
	k.timer = time.AfterFunc(every, k.fire)
	return k
}

// Relay writes stream on its writer's goroutine, with the keepalive
// speaking while Recv waits: each event, or the error that ended the
// stream, goes to write with mu held, then Wrote is called; idle tells
// write that the stream holds nothing more at hand (canonical.Buffered
// says so, or cannot tell), so that it flushes. Relay returns once write
// reports the response has ended. The caller does not hold mu.
func (k *Keepalive) Relay(stream canonical.Stream, write func(ev *canonical.Event, err error, idle bool) (done bool)) {
	ready, _ := stream.(canonical.Buffered)
	for {
		ev, err := stream.Recv()
		k.mu.Lock()
		done := write(ev, err, ready == nil || ready.Buffered() == 0)
		k.Wrote()
		k.mu.Unlock()
		if done {
			return
		}
	}
}

// Wrote records a write; the caller holds mu.
func (k *Keepalive) Wrote() { k.last = time.Now() }

// Stop stops the keepalive: send is not called once it has returned. The
// caller does not hold mu.
func (k *Keepalive) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	k.timer.Stop()
}

// fire sends when the stream has been silent for every, and sets the
// timer for when it next will have been.
func (k *Keepalive) fire() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	now := time.Now()
	if wait := k.every - now.Sub(k.last); wait > 0 {
		k.timer.Reset(wait)
		return
	}
	if err := k.send(); err != nil {
		k.stopped = true
		return
	}
	k.last = now
	k.timer.Reset(k.every)
}
