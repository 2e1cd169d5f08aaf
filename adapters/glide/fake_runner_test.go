package glide

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// timeout bounds the wait for anything that must happen.
const timeout = 10 * time.Second

// fakeRunner is a canonical.Runner whose runs the test drives. Target
// "lock" runs produce only what the test pushes (so the test decides the
// interleaving of frames on the wire); target "echo" runs stream the
// prompt back a word per delta at once; target "refuse" fails Run.
type fakeRunner struct {
	t       *testing.T
	started chan *fakeRun

	mu   sync.Mutex
	runs []*fakeRun
}

func newFakeRunner(t *testing.T) *fakeRunner {
	return &fakeRunner{t: t, started: make(chan *fakeRun, 64)}
}

func (r *fakeRunner) Target(name string) (canonical.TargetInfo, bool) {
	switch name {
	case "lock", "echo", "refuse":
		return canonical.TargetInfo{Name: name, Backend: "fake"}, true
	}
	return canonical.TargetInfo{}, false
}

func (r *fakeRunner) Targets() []canonical.TargetInfo { return nil }

func (r *fakeRunner) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	if req.GetTarget() == "refuse" {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "backend is down")
	}
	run := &fakeRun{
		t: r.t, ctx: ctx, req: req, id: req.GetExtensions()[extID].GetStringValue(),
		push: make(chan []*canonical.Event, 16), b: canonical.NewBuilder(), v: canonical.NewValidator(),
		closed: make(chan struct{}),
	}
	if req.GetTarget() == "echo" {
		var evs []*canonical.Event
		evs = run.b.Lifecycle(evs, canonical.StatusRunning)
		for _, w := range strings.Fields(canonical.PromptText(req)) {
			evs = run.b.Text(evs, w+" ")
		}
		evs = run.b.FinishMessage(evs, canonical.FinishStop, nil)
		evs = run.b.End(evs, canonical.StatusCompleted, nil)
		run.push <- evs
	}
	r.mu.Lock()
	r.runs = append(r.runs, run)
	r.mu.Unlock()
	r.started <- run
	return run, nil
}

// await returns the next n runs started, by glide id.
func (r *fakeRunner) await(n int) map[string]*fakeRun {
	r.t.Helper()
	out := map[string]*fakeRun{}
	for len(out) < n {
		select {
		case run := <-r.started:
			out[run.id] = run
		case <-time.After(timeout):
			r.t.Fatalf("%d of %d runs started", len(out), n)
		}
	}
	return out
}

// fakeRun is one run: events pushed by the test (built with its Builder),
// checked by a Validator as they are received; when its context ends it
// ends cancelled, as a backend must.
type fakeRun struct {
	t   *testing.T
	ctx context.Context
	req *canonical.Request
	id  string

	b    *canonical.Builder // used by the test goroutine only
	push chan []*canonical.Event

	v       *canonical.Validator // used by the Recv goroutine only
	guard   canonical.Guard
	pending []*canonical.Event
	owed    bool // pending came from guard.End (already observed)

	closeOnce sync.Once
	closed    chan struct{}
}

// send pushes what build appends; it must produce exactly one frame for
// the lockstep tests to stay in step.
func (r *fakeRun) send(build func(b *canonical.Builder, out []*canonical.Event) []*canonical.Event) {
	r.push <- build(r.b, nil)
}

func (r *fakeRun) text(s string) {
	r.send(func(b *canonical.Builder, out []*canonical.Event) []*canonical.Event { return b.Text(out, s) })
}

func (r *fakeRun) complete() {
	r.send(func(b *canonical.Builder, out []*canonical.Event) []*canonical.Event {
		out = b.FinishMessage(out, canonical.FinishStop, nil)
		return b.End(out, canonical.StatusCompleted, nil)
	})
}

// startModel opens a message naming a model (no frame of its own: push it
// together with the first text).
func startModel(out []*canonical.Event, b *canonical.Builder, id, provider, name string) []*canonical.Event {
	out = b.StartMessage(out, "", "assistant")
	out[len(out)-1].GetMessageStart().Metadata = map[string]*structpb.Value{
		metaModelID: structpb.NewStringValue(id), metaProvider: structpb.NewStringValue(provider), metaModel: structpb.NewStringValue(name)}
	return out
}

// Recv implements canonical.Stream.
func (r *fakeRun) Recv() (*canonical.Event, error) {
	for len(r.pending) == 0 {
		if r.guard.Ended() {
			if err := r.v.End(); err != nil {
				r.t.Errorf("run %s: %v", r.id, err)
			}
			return nil, io.EOF
		}
		select {
		case evs := <-r.push:
			r.pending, r.owed = evs, false
		case <-r.ctx.Done():
			r.pending, r.owed = r.guard.End(nil, canonical.StatusCancelled, canonical.AsError(r.ctx.Err())), true
		}
	}
	ev := r.pending[0]
	r.pending = r.pending[1:]
	if v := r.guard.Observe(ev); v != nil && !r.owed {
		r.t.Errorf("run %s: %v", r.id, v)
	}
	if err := r.v.Check(ev); err != nil {
		r.t.Errorf("run %s: %v", r.id, err)
	}
	return ev, nil
}

// Close implements canonical.Stream.
func (r *fakeRun) Close() error {
	r.closeOnce.Do(func() { close(r.closed) })
	return nil
}

// cancelled waits until the run's context is done and it was closed.
func (r *fakeRun) cancelled() error {
	select {
	case <-r.ctx.Done():
	case <-time.After(timeout):
		return errors.New("run " + r.id + " not cancelled")
	}
	select {
	case <-r.closed:
		return nil
	case <-time.After(timeout):
		return errors.New("run " + r.id + " not closed")
	}
}
