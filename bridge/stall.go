package bridge

import (
	"cmp"
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// defaultStallTimeout is backends.<name>.stall_timeout's default: as long
// as the Glide backend's idle_timeout, half the HTTP backends' timeout
// for a whole run.
const defaultStallTimeout = 5 * time.Minute

// stallingBackend bounds the wait for each event of its backend's runs:
// an upstream that stops sending, its connection still open, would
// otherwise hold the run (its goroutine, its connection, its client) up to
// the whole run's timeout, or for ever on a backend with none (the agent
// and Evergreen backends). It wraps the backend itself, not the bridge's
// run, so that what a runtime or a route's XML executor waits for (a
// thread's turn, a tool, an action's nested run) is not counted: only the
// upstream's silence.
type stallingBackend struct {
	canonical.Backend
	name    string
	timeout time.Duration
}

// stallDefaulter is implemented by a backend whose runs' events may
// rightly be far apart while its upstream shows it is alive in a way the
// canonical stream does not carry (the agent protocol's heartbeats, while
// a graph's node runs): its default replaces defaultStallTimeout.
type stallDefaulter interface{ DefaultStallTimeout() time.Duration }

// stalling wraps be, the backend named name, unless timeout (the option,
// else the backend's default, else defaultStallTimeout) is negative: the
// bound is off.
func stalling(be canonical.Backend, name string, timeout time.Duration) canonical.Backend {
	if d, ok := be.(stallDefaulter); ok && timeout == 0 {
		timeout = d.DefaultStallTimeout()
	}
	if timeout < 0 {
		return be
	}
	return &stallingBackend{Backend: be, name: name, timeout: cmp.Or(timeout, defaultStallTimeout)}
}

// Start implements canonical.Backend.
func (b *stallingBackend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	s, err := b.Backend.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	st := &stallStream{Stream: s, b: b}
	st.timer = time.AfterFunc(time.Hour, st.stall)
	st.timer.Stop()
	if buf, ok := s.(canonical.Buffered); ok {
		return &bufferedStallStream{stallStream: st, buf: buf}, nil
	}
	return st, nil
}

// Knows forwards the backend's own answer (true when it has none), so a
// route still serves only the targets its backend knows.
func (b *stallingBackend) Knows(target string) bool {
	k, ok := b.Backend.(knower)
	return !ok || k.Knows(target)
}

// Close closes the backend when it has something to release.
func (b *stallingBackend) Close() error {
	if c, ok := b.Backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// stallStream is a backend stream whose every Recv that may wait is
// bounded: when no event comes for the timeout, the stream is closed
// (canonical.Stream lets Close abort a blocked Recv, which releases the
// upstream's request) and Recv fails with deadline_exceeded, whatever the
// closed stream returned.
type stallStream struct {
	canonical.Stream
	b       *stallingBackend
	timer   *time.Timer
	stalled atomic.Bool
}

func (s *stallStream) Recv() (*canonical.Event, error) {
	s.timer.Reset(s.b.timeout)
	ev, err := s.Stream.Recv()
	s.timer.Stop()
	return s.checked(ev, err)
}

// checked replaces the end of a stream that stalled: the closed stream's
// own (an error, or a cancelled run's event) is not what happened. An
// event that came as the timer fired is still delivered; the next Recv
// ends the run.
func (s *stallStream) checked(ev *canonical.Event, err error) (*canonical.Event, error) {
	if !s.stalled.Load() {
		return ev, err
	}
	if _, end := canonical.TerminalOf(ev); err == nil && !end {
		return ev, nil
	}
	return nil, canonical.Errorf(canonical.CodeDeadlineExceeded,
		"backend %q sent no event for %s (backends.%s.stall_timeout)", s.b.name, s.b.timeout, s.b.name)
}

// stall runs on the timer's goroutine.
func (s *stallStream) stall() {
	s.stalled.Store(true)
	_ = s.Stream.Close()
}

func (s *stallStream) Close() error {
	s.timer.Stop()
	return s.Stream.Close()
}

// bufferedStallStream is a stallStream over a stream that says how many
// events it holds: a Recv of one of those does not wait, so it is not
// timed, and an unpaced stream pays a timer's reset per read of its
// upstream, not per event.
type bufferedStallStream struct {
	*stallStream
	buf canonical.Buffered
}

func (s *bufferedStallStream) Recv() (*canonical.Event, error) {
	if s.buf.Buffered() > 0 {
		ev, err := s.Stream.Recv()
		return s.checked(ev, err)
	}
	return s.stallStream.Recv()
}

// Buffered implements canonical.Buffered.
func (s *bufferedStallStream) Buffered() int { return s.buf.Buffered() }
