package bridge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nuid"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Bridge routes requests to backends and runs them: it assigns run and
// thread ids, stamps every event with thread, run, per-thread seq and time,
// guarantees each run ends with exactly one terminal event, publishes events
// to the fabric for observers and replay (never blocking the run), and
// drains on shutdown. It implements canonical.Runner.
type Bridge struct {
	router *Router
	fabric *Fabric // nil: no publishing (unit tests)
	log    *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	runs     map[string]*run
	draining bool
	idle     chan struct{} // closed when draining and no run is left
	seqs     map[string]uint64
}

// NewBridge returns a bridge; fabric may be nil.
func NewBridge(router *Router, fabric *Fabric, log *slog.Logger) *Bridge {
	return &Bridge{
		router: router, fabric: fabric, log: log, now: time.Now,
		runs: map[string]*run{}, seqs: map[string]uint64{},
	}
}

// Target implements canonical.Runner.
func (b *Bridge) Target(name string) (canonical.TargetInfo, bool) {
	rt, _, ok := b.router.Resolve(name)
	return canonical.TargetInfo{Name: name, Backend: rt.Backend}, ok
}

// Targets implements canonical.Runner.
func (b *Bridge) Targets() []canonical.TargetInfo { return b.router.Targets() }

// Run implements canonical.Runner. It takes ownership of req.
func (b *Bridge) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	rt, be, ok := b.router.Resolve(req.GetTarget())
	if !ok {
		return nil, canonical.Errorf(canonical.CodeNotFound, "unknown target %q", req.GetTarget())
	}
	if req.RunId == "" {
		req.RunId = "run-" + nuid.Next()
	}
	if req.ThreadId == "" {
		req.ThreadId = req.RunId
	}
	if rt.Model != "" {
		req.Target = rt.Model
	}
	runCtx, cancel := context.WithCancel(ctx)
	if d := req.GetDeadlineUnixNano(); d != 0 {
		var c2 context.CancelFunc
		runCtx, c2 = context.WithDeadline(runCtx, time.Unix(0, d))
		prev := cancel
		cancel = func() { c2(); prev() }
	}
	r := &run{b: b, ctx: runCtx, cancel: cancel, thread: req.GetThreadId(), id: req.GetRunId(), backend: rt.Backend, started: b.now()}
	b.mu.Lock()
	if b.draining {
		b.mu.Unlock()
		cancel()
		return nil, canonical.Errorf(canonical.CodeUnavailable, "server is shutting down")
	}
	if _, dup := b.runs[r.id]; dup {
		b.mu.Unlock()
		cancel()
		return nil, canonical.Errorf(canonical.CodeAlreadyExists, "run %q is already running", r.id)
	}
	b.runs[r.id] = r
	b.mu.Unlock()

	up, err := be.Start(runCtx, req)
	if err != nil {
		r.finish()
		return nil, canonical.AsError(err)
	}
	r.up = up
	return r, nil
}

// nextSeq assigns the thread's next seq.
//
// The counters live in memory for now; every thread that ever ran keeps an
// entry (16 bytes plus its id) for the life of the process.
func (b *Bridge) nextSeq(thread string) uint64 {
	b.mu.Lock()
	b.seqs[thread]++
	s := b.seqs[thread]
	b.mu.Unlock()
	return s
}

// Drain refuses new runs and waits until running ones end or ctx is done;
// then it cancels what is left (each ends with a cancelled event) and waits
// up to grace for them to deliver it.
func (b *Bridge) Drain(ctx context.Context, grace time.Duration) {
	b.mu.Lock()
	b.draining = true
	if b.idle == nil {
		b.idle = make(chan struct{})
		if len(b.runs) == 0 {
			close(b.idle)
		}
	}
	idle := b.idle
	b.mu.Unlock()
	select {
	case <-idle:
		return
	case <-ctx.Done():
	}
	b.mu.Lock()
	n := len(b.runs)
	for _, r := range b.runs {
		r.cancel()
	}
	b.mu.Unlock()
	b.log.Info("shutdown timeout: cancelling runs", "runs", n)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
		b.log.Warn("runs still open after cancel grace", "grace", grace)
	}
}

// Draining reports whether Drain has begun.
func (b *Bridge) Draining() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.draining
}

// Running returns the number of runs in flight.
func (b *Bridge) Running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.runs)
}

// run wraps a backend stream: it stamps events, guards the invariants and
// supplies the terminal event an upstream failed to send.
type run struct {
	b       *Bridge
	ctx     context.Context
	cancel  context.CancelFunc
	up      canonical.Stream
	thread  string
	id      string
	backend string
	started time.Time

	guard   canonical.Guard
	owed    []*canonical.Event
	ended   bool
	once    sync.Once
	outcome canonical.RunStatus
}

// Recv implements canonical.Stream.
func (r *run) Recv() (*canonical.Event, error) {
	for len(r.owed) == 0 {
		if r.ended {
			return nil, io.EOF
		}
		ev, err := r.up.Recv()
		if err != nil {
			st, ce := r.failure(err)
			r.owed = r.guard.End(r.owed, st, ce)
			continue
		}
		if v := r.guard.Observe(ev); v != nil {
			r.b.log.Warn("backend event refused", "run", r.id, "backend", r.backend, "err", v.Message)
			r.owed = r.guard.End(r.owed, canonical.StatusFailed, v)
			continue
		}
		r.owed = append(r.owed, ev)
	}
	ev := r.owed[0]
	r.owed = r.owed[1:]
	ev.ThreadId, ev.RunId = r.thread, r.id
	ev.Seq = r.b.nextSeq(r.thread)
	canonical.Stamp(ev, r.b.now())
	if r.b.fabric != nil {
		r.b.fabric.PublishEvent(ev)
	}
	if st, ok := canonical.TerminalOf(ev); ok {
		r.ended, r.outcome = true, st
		r.finish()
	}
	return ev, nil
}

// failure turns a stream error into the terminal status and error owed.
func (r *run) failure(err error) (canonical.RunStatus, *canonical.Error) {
	if ctxErr := r.ctx.Err(); ctxErr != nil {
		ce := canonical.AsError(ctxErr)
		if errors.Is(ctxErr, context.Canceled) {
			return canonical.StatusCancelled, ce
		}
		return canonical.StatusFailed, ce
	}
	if errors.Is(err, io.EOF) {
		return canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "backend %q ended the stream without a terminal event", r.backend)
	}
	ce := canonical.AsError(err)
	if ce.Code == canonical.CodeCanceled {
		return canonical.StatusCancelled, ce
	}
	return canonical.StatusFailed, ce
}

// Close implements canonical.Stream: it cancels the run if it is still going.
func (r *run) Close() error {
	r.finish()
	return nil
}

// finish unregisters the run and releases its upstream, once.
func (r *run) finish() {
	r.once.Do(func() {
		r.cancel()
		if r.up != nil {
			_ = r.up.Close()
		}
		b := r.b
		b.mu.Lock()
		delete(b.runs, r.id)
		if b.draining && len(b.runs) == 0 && b.idle != nil {
			select {
			case <-b.idle:
			default:
				close(b.idle)
			}
		}
		b.mu.Unlock()
		outcome := "abandoned"
		if r.ended {
			outcome = r.outcome.String()
		}
		b.log.Info("run end", "thread", r.thread, "run", r.id, "backend", r.backend, "outcome", outcome, "duration", b.now().Sub(r.started))
	})
}
