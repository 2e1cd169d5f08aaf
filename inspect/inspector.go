package inspect

import (
	"context"
	"log/slog"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/wiretap"
)

// Deps is what the inspector needs of the daemon.
type Deps struct {
	Log *slog.Logger
	// Admin reports whether the API key in ctx may use the inspector:
	// an admin key, or none when auth is off.
	Admin func(ctx context.Context) bool
	// BackendType names the adapter of a configured backend ("agent").
	BackendType func(backend string) string
}

// Inspector captures runs and serves them. Its methods are safe for
// concurrent use.
type Inspector struct {
	cfg    Config
	deps   Deps
	now    func() time.Time
	disarm func()

	mu      sync.Mutex
	runs    map[string]*Run
	order   []*Run               // oldest first
	armed   map[string]time.Time // target globs armed at run time, until
	changed chan struct{}        // closed and replaced on every recording
	closing chan struct{}
	closed  bool
}

// New returns an inspector for an enabled config.
func New(cfg Config, deps Deps) *Inspector {
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	if deps.BackendType == nil {
		deps.BackendType = func(string) string { return "" }
	}
	return &Inspector{cfg: cfg.withDefaults(), deps: deps, now: time.Now, disarm: wiretap.Arm(),
		runs: map[string]*Run{}, armed: map[string]time.Time{},
		changed: make(chan struct{}), closing: make(chan struct{})}
}

// Close ends the live streams of the page and stops capturing; runs
// already captured stay readable. A nil inspector does nothing.
func (in *Inspector) Close() {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed {
		in.closed = true
		close(in.closing)
		in.disarm()
	}
}

// RunInfo is what the bridge knows of a run as it starts.
type RunInfo struct {
	Target, Frontend, Backend string
	// Start is the request's arrival, from which times count.
	Start time.Time
}

// Begin decides whether a run is captured: its request asked for it, or
// its target is armed. It returns ctx carrying the upstream recorder and
// the capture, or ctx and nil.
func (in *Inspector) Begin(ctx context.Context, req *canonical.Request, info RunInfo) (context.Context, *Run) {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	if !(ex != nil && ex.optIn) && !in.targetArmed(info.Target) {
		return ctx, nil
	}
	r := &Run{in: in, id: req.GetRunId(), thread: req.GetThreadId(), target: info.Target, frontend: info.Frontend,
		backend: info.Backend, backendType: in.deps.BackendType(info.Backend), start: info.Start,
		until: info.Start.Add(in.cfg.MaxDuration).UnixNano(), status: "running"}
	if p := canonical.PrincipalFrom(ctx); p != nil {
		r.key = p.Name
	}
	if ex != nil {
		r.client = ex.w
	}
	r.upstream = newWire(in, info.Start)
	if js, err := protoJSON.Marshal(req); err == nil && len(js) <= in.cfg.MaxBytes {
		r.request = js
	}
	if !in.add(r) {
		return ctx, nil
	}
	return wiretap.WithRecorder(ctx, upstreamRecorder{r.upstream}), r
}

// Refused ends a capture whose run did not start; nil-safe.
func (r *Run) Refused(err error) {
	if r == nil {
		return
	}
	e := canonical.AsError(err)
	r.mu.Lock()
	r.status, r.code, r.message, r.end = "refused", e.Code.String(), e.Message, r.in.now()
	r.mu.Unlock()
	r.in.bump()
}

// targetArmed reports whether every run on target is captured.
func (in *Inspector) targetArmed(target string) bool {
	for _, g := range in.cfg.Targets {
		if ok, _ := path.Match(g, target); ok {
			return true
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.armed) == 0 {
		return false
	}
	now := in.now()
	for g, until := range in.armed {
		if now.After(until) {
			delete(in.armed, g)
			continue
		}
		if ok, _ := path.Match(g, target); ok {
			return true
		}
	}
	return false
}

// anyArmed reports whether some target is captured whatever its request
// says: the client wire of every request must then be recorded until its
// run's target is known.
func (in *Inspector) anyArmed() bool {
	if len(in.cfg.Targets) > 0 {
		return true
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	now := in.now()
	for g, until := range in.armed {
		if now.After(until) {
			delete(in.armed, g)
			continue
		}
		return true
	}
	return false
}

// arm captures every run on target (a name or glob) for d; d <= 0 disarms.
func (in *Inspector) arm(target string, d time.Duration) time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	if d <= 0 {
		delete(in.armed, target)
		return time.Time{}
	}
	until := in.now().Add(min(d, in.cfg.MaxArm))
	in.armed[target] = until
	return until
}

// armedList returns the targets armed at run time.
func (in *Inspector) armedList() map[string]time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string]time.Time{}
	now := in.now()
	for g, until := range in.armed {
		if now.Before(until) {
			out[g] = until
		}
	}
	return out
}

// add keeps r, dropping captures past max_runs and max_age; false when
// the inspector is closed.
func (in *Inspector) add(r *Run) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return false
	}
	in.evictLocked()
	for len(in.order) >= in.cfg.MaxRuns {
		delete(in.runs, in.order[0].id)
		in.order = slices.Delete(in.order, 0, 1)
	}
	in.runs[r.id] = r
	in.order = append(in.order, r)
	in.bumpLocked()
	return true
}

// evictLocked drops captures older than max_age. Called with in.mu held.
func (in *Inspector) evictLocked() {
	cut := in.now().Add(-in.cfg.MaxAge)
	n := 0
	for n < len(in.order) && in.order[n].start.Before(cut) {
		delete(in.runs, in.order[n].id)
		n++
	}
	in.order = slices.Delete(in.order, 0, n)
}

// get returns a capture by run id.
func (in *Inspector) get(id string) *Run {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.evictLocked()
	return in.runs[id]
}

// list returns the captures, newest first.
func (in *Inspector) list() []*Run {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.evictLocked()
	out := slices.Clone(in.order)
	slices.Reverse(out)
	return out
}

// bump wakes the page's live streams.
func (in *Inspector) bump() {
	in.mu.Lock()
	in.bumpLocked()
	in.mu.Unlock()
}

func (in *Inspector) bumpLocked() {
	close(in.changed)
	in.changed = make(chan struct{})
}

// changes returns a channel closed at the next recording, and the
// inspector's closing channel.
func (in *Inspector) changes() (changed, closing <-chan struct{}) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.changed, in.closing
}
