package xmlaction

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// step is one thing the fake model does: emit text, or wait for a channel.
type step struct {
	text   string
	wait   <-chan struct{}
	signal chan<- struct{} // closed when the step is reached
}

// fakeModel is a text backend streaming its steps as one text block.
type fakeModel struct {
	steps  []step
	status canonical.RunStatus // terminal status; completed if 0
	err    *canonical.Error
}

func (m *fakeModel) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	b := canonical.NewBuilder()
	s := &modelStream{ctx: ctx, b: b, m: m}
	s.pending = b.Lifecycle(nil, canonical.StatusRunning)
	s.pending = b.StartMessage(s.pending, "m1", "assistant")
	return s, nil
}

type modelStream struct {
	ctx     context.Context
	b       *canonical.Builder
	m       *fakeModel
	i       int
	pending []*canonical.Event
}

func (s *modelStream) Recv() (*canonical.Event, error) {
	for len(s.pending) == 0 {
		if s.b.Ended() {
			return nil, io.EOF
		}
		if s.ctx.Err() != nil {
			s.pending = s.b.End(s.pending, canonical.StatusCancelled, canonical.AsError(s.ctx.Err()))
			continue
		}
		if s.i == len(s.m.steps) {
			st := s.m.status
			if st == 0 {
				st = canonical.StatusCompleted
			}
			if st == canonical.StatusCompleted {
				s.pending = s.b.FinishMessage(s.pending, canonical.FinishStop, nil)
			}
			s.pending = s.b.End(s.pending, st, s.m.err)
			continue
		}
		st := s.m.steps[s.i]
		s.i++
		if st.signal != nil {
			close(st.signal)
		}
		if st.wait != nil {
			select {
			case <-st.wait:
			case <-s.ctx.Done():
				continue
			}
		}
		s.pending = s.b.Text(s.pending, st.text)
	}
	ev := s.pending[0]
	s.pending = s.pending[1:]
	return ev, nil
}

func (s *modelStream) Close() error { return nil }

// texts turns strings into text steps.
func texts(parts ...string) []step {
	out := make([]step, len(parts))
	for i, p := range parts {
		out[i] = step{text: p}
	}
	return out
}

// fakeTools runs tool functions by name.
type fakeTools struct {
	fns map[string]func(ctx context.Context, args map[string]any) (any, error)
}

func (f *fakeTools) Call(ctx context.Context, name string, args []byte) ([]byte, error) {
	fn, ok := f.fns[name]
	if !ok {
		return nil, canonical.Errorf(canonical.CodeNotFound, "tool %q is not in the allowlist", name)
	}
	var in map[string]any
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, err
	}
	v, err := fn(ctx, in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// fakeClock is a Clock that moves only when told to.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{}
}

type fakeTimer struct {
	at   time.Time
	f    func()
	gone bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_700_000_000, 0), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.notify()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.gone
		t.gone = true
		c.notify()
		return was
	}
}

func (c *fakeClock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// pending returns the durations of the active timers from now.
func (c *fakeClock) pending() []time.Duration {
	var out []time.Duration
	for _, t := range c.timers {
		if !t.gone {
			out = append(out, t.at.Sub(c.now))
		}
	}
	slices.Sort(out)
	return out
}

// waitFor blocks until an active timer due in exactly d exists.
func (c *fakeClock) waitFor(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		found := slices.Contains(c.pending(), d)
		ch := c.changed
		c.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			c.mu.Lock()
			p := c.pending()
			c.mu.Unlock()
			t.Fatalf("no timer of %s within 10s (pending: %v)", d, p)
		}
	}
}

// Advance moves the clock and fires the timers now due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	for _, t := range c.timers {
		if !t.gone && !t.at.After(c.now) {
			t.gone = true
			due = append(due, t)
		}
	}
	c.notify()
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}
