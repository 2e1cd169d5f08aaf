package bridge

import (
	"context"
	"errors"
	"google.golang.org/protobuf/proto"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/inspect"
	"github.com/interlingua-dev/interlingua/internal/metrics"
	"github.com/interlingua-dev/interlingua/internal/subject"
	"github.com/interlingua-dev/interlingua/internal/tracing"
)

// maxIdleThreads bounds the seq counters kept for threads with no run in
// flight; past it the oldest idle ones are forgotten (with a fabric, a
// thread's seq is recovered from the replay log).
const maxIdleThreads = 100_000

// Bridge routes requests to backends and runs them: it assigns run and
// thread ids, stamps every event with thread, run, per-thread seq and time,
// guarantees each run ends with exactly one terminal event, publishes events
// to the fabric for observers and replay (never blocking a local client),
// places runs whose backend this instance does not host on an instance that
// does, and drains on shutdown. It implements canonical.Runner.
type Bridge struct {
	router *Router
	fabric *Fabric // nil: no publishing, every backend local (unit tests)
	log    *slog.Logger
	now    func() time.Time
	// metrics are this bridge's own, served by its Server at /metrics.
	metrics *metrics.Metrics

	cluster clusterState
	owners  owners
	leases  *leases // nil: no other instance can run a thread (no fabric, or an embedded one alone)

	mu       sync.Mutex
	runs     map[string]*run
	draining bool
	idle     chan struct{} // closed when draining and no run is left
	threads  map[string]*thread
	idleFIFO []string                   // idle thread ids, oldest first
	keyRuns  map[string]int             // runs in flight per API key
	remotes  map[*remoteStream]struct{} // runs this instance's clients read from other instances
	// keyObservers counts the observers open per API key.
	keyObservers map[string]int
	// tails are the threads observed here, each shared by its observers.
	tailsMu   sync.Mutex
	tails     map[string]*threadTail
	tailCount atomic.Int64       // len(tails), read as events come (tailBytesNow)
	follower  logFollower        // the tails' live feed
	inspect   *inspect.Inspector // nil: the inspector is off (bridge/inspect.go)
	// runtimes are the protocol runtimes requests may name
	// (Request.Runtime), under mu (AddRuntime, runtime).
	runtimes map[string]canonical.Runtime
}

// thread is a thread's seq counter. Seq assignment and publish enqueue
// happen under mu, so the replay log sees a thread's events in seq order
// even when two of its runs are live at once.
type thread struct {
	mu   sync.Mutex
	seq  uint64
	refs int // runs in flight
	// holder is the publisher of the thread's last event, which may hold
	// it (and those before it) unqueued: another run of the thread queues
	// them before its own, so that the replay log has the thread's events
	// in seq order.
	holder *publisher
	// chain fences the thread's replay-log writes from this instance
	// (logchain.go): a new one as the thread's first run here starts (the
	// messages of runs before keep theirs).
	chain *logChain
	// skipped, when set, is what the next event numbered says it skips
	// after (thread.resume).
	skipped *uint64
	// fencedAt is the last seq this instance gave before it found its
	// writes of the thread fenced: given to its own clients, in no log.
	fencedAt uint64
}

// NewBridge returns a bridge; fabric may be nil.
func NewBridge(router *Router, fabric *Fabric, log *slog.Logger) *Bridge {
	b := &Bridge{
		router: router, fabric: fabric, log: log, now: time.Now, metrics: metrics.New(),
		runs: map[string]*run{}, threads: map[string]*thread{},
		keyRuns: map[string]int{}, keyObservers: map[string]int{}, tails: map[string]*threadTail{}, remotes: map[*remoteStream]struct{}{},
	}
	if fabric != nil {
		b.owners.kv, b.owners.log = fabric.Threads(), log
	}
	return b
}

// ThreadStore is the fabric's thread store; nil without a fabric.
func (b *Bridge) ThreadStore() canonical.ThreadStore {
	if b.fabric == nil {
		return nil
	}
	return b.fabric.ThreadStore()
}

// AddRuntime makes rt the runtime requests naming name run around their
// backend.
func (b *Bridge) AddRuntime(name string, rt canonical.Runtime) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.runtimes == nil {
		b.runtimes = map[string]canonical.Runtime{}
	}
	b.runtimes[name] = rt
}

// runtime returns the runtime named name, or nil.
func (b *Bridge) runtime(name string) canonical.Runtime {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runtimes[name]
}

// start starts req on be, this instance's: through the runtime req names,
// which starts the backend itself, if it names one.
func (b *Bridge) start(ctx context.Context, be canonical.Backend, req *canonical.Request) (canonical.Stream, error) {
	name := req.GetRuntime()
	if name == "" {
		return be.Start(ctx, req)
	}
	rt := b.runtime(name)
	if rt == nil { // Run checked it: an instance built with other protocols
		return nil, canonical.Errorf(canonical.CodeUnimplemented, "runtime %q is not served here", name)
	}
	return rt.Start(ctx, req, be)
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
	start := b.now() // the request's arrival: time to first delta counts from here
	s, err := b.run(ctx, req, start)
	if err != nil {
		b.logRefused(ctx, req, start, err)
	}
	return s, err
}

// run is Run: the stream, or the reason the run did not start.
func (b *Bridge) run(ctx context.Context, req *canonical.Request, start time.Time) (canonical.Stream, error) {
	rt, be, ok := b.router.Resolve(req.GetTarget())
	p := canonical.PrincipalFrom(ctx)
	if ok && !p.Allows(req.GetTarget()) {
		// A target the key may not use reads as one no route serves, as
		// on every frontend (canonical.VisibleTarget); the log says why.
		b.log.Info("run refused: the API key may not use the target", "key", p.Name, "target", req.GetTarget())
		ok = false
	}
	if !ok {
		return nil, canonical.Errorf(canonical.CodeNotFound, "unknown target %q", req.GetTarget())
	}
	if name := req.GetRuntime(); name != "" && b.runtime(name) == nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "runtime: unknown runtime %q", name)
	}
	chosenRunID := req.RunId != ""
	if !chosenRunID {
		req.RunId = canonical.NewID("run-")
	}
	var claim <-chan error // a thread named for the run alone, being claimed for its key
	switch {
	case req.ThreadId == "" && chosenRunID:
		// A run id the client chose may name a thread that exists (another
		// key's): the claim is awaited, and refused before any event.
		req.ThreadId = req.RunId
		if err := <-b.owners.claimNew(ctx, req.GetThreadId(), p); err != nil {
			return nil, canonical.AsError(err)
		}
		if err := b.freshRunID(ctx, req.GetRunId()); err != nil {
			return nil, err
		}
	case req.ThreadId == "":
		// 128 random bits name no thread yet: the claim is made while the
		// run starts (the first event waits for it).
		req.ThreadId = req.RunId
		claim = b.owners.claimNew(ctx, req.GetThreadId(), p)
	default:
		if err := b.owners.check(ctx, req.GetThreadId(), p); err != nil {
			return nil, err
		}
	}
	release, err := b.admitKey(p)
	if err != nil {
		return nil, err
	}
	target := req.GetTarget()
	ctx, span := tracing.Tracer().Start(ctx, "interlingua.run", trace.WithAttributes(
		attribute.String("interlingua.target", target), attribute.String("interlingua.backend", rt.Backend),
		attribute.String("interlingua.frontend", frontendOf(ctx)), attribute.String("interlingua.thread", req.GetThreadId()),
		attribute.String("interlingua.run", req.GetRunId()), attribute.Bool("interlingua.remote", !b.hosts(rt.Backend))))
	var tapped *inspect.Run // the inspector's capture of the run, if any
	if b.inspect != nil {
		ctx, tapped = b.inspect.Begin(ctx, req, inspect.RunInfo{Target: target, Frontend: frontendOf(ctx), Backend: rt.Backend, Start: start})
	}
	var s canonical.Stream
	switch {
	case b.leases != nil && req.GetThreadId() != req.GetRunId():
		s, err = b.runOnThread(ctx, rt, be, req) // a thread a client named: lease.go
	case b.hosts(rt.Backend):
		s, err = b.runLocal(ctx, rt, be, req, false, claim, nil)
	default:
		s, err = b.runRemote(ctx, rt, req, claim, b.subject("run", subject.Token(rt.Backend)))
	}
	if err != nil {
		tapped.Refused(err)
		release()
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return nil, err
	}
	return tapped.Wrap(b.meter(ctx, s, req, target, rt.Backend, start, span, release)), nil
}

// freshRunID refuses a client-chosen run id whose thread (the run's own,
// named by it) has events in the replay log: the id named a run that ran,
// here or on another instance, and a second run under it would number its
// events from 1 again, in the same thread.
func (b *Bridge) freshRunID(ctx context.Context, id string) error {
	if b.fabric == nil {
		return nil
	}
	last, err := b.fabric.LastSeq(ctx, id)
	if err != nil {
		return natsFailure(b.log.With("run", id), canonical.CodeUnavailable, "the run id could not be checked against the replay log", err)
	}
	if last > 0 {
		return canonical.Errorf(canonical.CodeAlreadyExists, "run %q already ran: a run id names one run", id)
	}
	return nil
}

// admitKey counts a run against its API key's max_runs; release undoes it.
func (b *Bridge) admitKey(p *canonical.Principal) (release func(), err error) {
	if p == nil {
		return func() {}, nil
	}
	return b.admit(b.keyRuns, p.Name, p.MaxRuns, "runs in flight (max_runs)")
}

// admitObserver counts an observer against its API key's max_observers;
// release undoes it.
func (b *Bridge) admitObserver(p *canonical.Principal) (release func(), err error) {
	if p == nil {
		return func() {}, nil
	}
	return b.admit(b.keyObservers, p.Name, p.MaxObservers, "observers open (max_observers)")
}

// admit counts one more of a key's resources in counts, or refuses it with
// ResourceExhausted when the key has limit already (limit 0: no bound).
// Only the key's own count is looked at, so one key at its bound blocks no
// other key. release undoes it, once.
func (b *Bridge) admit(counts map[string]int, key string, limit int, what string) (release func(), err error) {
	if limit <= 0 {
		return func() {}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if counts[key] >= limit {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "API key %q has %d %s", key, limit, what)
	}
	counts[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			if counts[key]--; counts[key] <= 0 {
				delete(counts, key)
			}
			b.mu.Unlock()
		})
	}, nil
}

// runLocal starts req on a backend this instance hosts. forOther marks a
// run placed here by another instance: its events are that client's only
// copy, so publishing them waits for room instead of dropping. A thread
// whose id is not the run's own existed before, so its seq continues from
// the replay log.
//
// claim, when not nil, is the claim of the run's new thread for the
// caller's key: it is made while the backend starts, and the run's first
// event waits for it, so no event of a thread reaches anyone before the
// thread is its key's on every instance. A failed claim fails the run.
//
// lease, when not nil, is the share of the thread's lease taken for the run
// (lease.go): the run releases it when it ends, or here if it does not
// start.
func (b *Bridge) runLocal(ctx context.Context, rt Route, be canonical.Backend, req *canonical.Request, forOther bool, claim <-chan error, lease *leaseGrant) (canonical.Stream, error) {
	knownThread := req.GetThreadId() != req.GetRunId()
	if rt.Model != "" {
		req.Target = rt.Model
	}
	for k, v := range rt.Parameters {
		if _, set := req.Parameters[k]; !set {
			if req.Parameters == nil {
				req.Parameters = map[string]*structpb.Value{}
			}
			req.Parameters[k] = canonical.Value(v)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	if d := req.GetDeadlineUnixNano(); d != 0 {
		var cancelDeadline context.CancelFunc
		runCtx, cancelDeadline = context.WithDeadline(runCtx, time.Unix(0, d))
		prev := cancel
		cancel = func() { cancelDeadline(); prev() }
	}
	r := &run{b: b, ctx: runCtx, cancel: cancel, threadID: req.GetThreadId(), id: req.GetRunId(),
		backend: rt.Backend, forOther: forOther, leased: lease != nil}
	r.clientSeen.Store(b.now().UnixNano())
	if b.fabric != nil {
		// A run's events wait for room in the publish queue, never dropped
		// from it, when the replay log holds its client's only copy: a run
		// owned for another instance, and a run a runtime executes (its
		// frontend's clients read the log).
		r.pub = b.fabric.publisher(r.threadID, r.id, forOther || req.GetRuntime() != "")
	}
	b.mu.Lock()
	if b.draining {
		b.mu.Unlock()
		cancel()
		r.releaseLease(0)
		return nil, canonical.Errorf(canonical.CodeUnavailable, "server is shutting down")
	}
	if _, dup := b.runs[r.id]; dup {
		b.mu.Unlock()
		cancel()
		r.releaseLease(0)
		return nil, canonical.Errorf(canonical.CodeAlreadyExists, "run %q is already running", r.id)
	}
	b.runs[r.id] = r
	r.thread = b.acquireThread(r.threadID)
	if r.pub != nil {
		r.pub.chain = r.thread.chain
	}
	b.mu.Unlock()
	fromLog := knownThread && b.fabric != nil
	if lease != nil && lease.last > 0 {
		// The previous holder's last seq: the log may lag it. The log is
		// read too: a holder whose writes were fenced leaves its own
		// count, behind the end another instance appended.
		r.thread.raise(lease.last)
	}
	// A thread named for this run takes its lease too (lease.go), while
	// the backend starts: nobody else knows the thread until its first
	// event, which waits for the lease. A lease taken is marked held
	// before the first event too (markHeld).
	newLease := lease == nil && !knownThread && b.leases != nil
	if fromLog || claim != nil || newLease || (lease != nil && lease.taken) {
		// The replay log is asked for the thread's last seq while the
		// backend starts (a JetStream request, up to a millisecond here,
		// was part of every Evergreen action's time to first delta); the
		// run's first event waits for the answer before it is numbered.
		r.seqReady = make(chan struct{})
		// Not the run's context: a run cancelled now still ends with an
		// event, numbered after the thread's last; the requests are
		// bounded by JetStream's default timeout.
		go r.readyThread(context.WithoutCancel(runCtx), lease, newLease, fromLog, claim)
	}

	up, err := b.start(runCtx, be, req)
	if err != nil {
		r.finish()
		return nil, canonical.AsError(err)
	}
	r.up = up
	r.upBuf, _ = up.(canonical.Buffered)
	return r, nil
}

// publishLocked hands ev, the thread's latest event, to p, after queueing
// the events another run of the thread holds: the replay log then has the
// thread's events in seq order (a run's next one reads its last seq from
// there). Called with t.mu held.
func (t *thread) publishLocked(p *publisher, ev *canonical.Event) bool {
	if t.holder != p && t.holder != nil {
		t.holder.queueHeld()
	}
	t.holder = p
	return p.publish(ev)
}

// queueHeld queues the events p, a publisher of one of the thread's runs,
// holds.
func (t *thread) queueHeld(p *publisher) {
	t.mu.Lock()
	p.queueHeld()
	if t.holder == p {
		t.holder = nil
	}
	t.mu.Unlock()
}

// acquireThread returns the thread's counter with a reference taken.
// Called with b.mu held.
func (b *Bridge) acquireThread(id string) *thread {
	t := b.threads[id]
	if t == nil {
		t = &thread{}
		b.threads[id] = t
	}
	if t.refs == 0 {
		if t.chain != nil && t.chain.fenced.Load() {
			// The seqs given here after the fence are in no log: the
			// thread's next run numbers from the log, past them
			// (thread.resume).
			t.mu.Lock()
			t.fencedAt, t.seq = max(t.fencedAt, t.seq), 0
			t.mu.Unlock()
		}
		t.chain = &logChain{onFence: func() { b.endThreadHere(id, errFenced) }}
	}
	t.refs++
	return t
}

// releaseThread drops a reference; idle counters are kept, up to
// maxIdleThreads. Called with b.mu held.
func (b *Bridge) releaseThread(id string, t *thread) {
	t.refs--
	if t.refs > 0 {
		return
	}
	b.idleFIFO = append(b.idleFIFO, id)
	for len(b.idleFIFO) > maxIdleThreads {
		old := b.idleFIFO[0]
		b.idleFIFO = b.idleFIFO[1:]
		if ot := b.threads[old]; ot != nil && ot.refs == 0 {
			delete(b.threads, old)
		}
	}
}

// recoverSeq raises the thread's counter to the last seq in the replay log,
// so a thread continues its seq whichever instance ran it before; with
// orphans (this instance made the thread's lease entry anew) after ending
// the run the log leaves unended, if any (endOrphanRun). With skip (the
// lease's last holder died holding it, markHeld) and no such run, the
// counter moves past the seqs that holder may have given its own clients
// of a run the log has nothing of, and the next event says so, as an
// orphaned run's end does (Bridge.stampOrphanEnd).
func (b *Bridge) recoverSeq(ctx context.Context, id string, t *thread, orphans, skip bool) error {
	m, err := b.fabric.lastThreadMsg(ctx, id)
	var last uint64
	if err == nil && orphans {
		last = b.endOrphanRun(ctx, id, m) // numbered after the log's last and the floor
	}
	var logged, floor uint64
	if err == nil && last == 0 {
		logged, floor, err = b.fabric.lastSeqs(ctx, id, m)
	}
	if err != nil {
		// Numbering from what this instance last saw could reuse seqs
		// another instance gave the thread since: the run fails instead.
		return natsFailure(b.log.With("thread", id), canonical.CodeUnavailable, "the thread's last seq could not be read from the replay log", err)
	}
	if last != 0 { // an orphan's end, which skipped what its owner may have given
		t.raise(last)
		return nil
	}
	if t.resume(logged, floor, b.fabric.ownerAhead(), skip) {
		b.log.Warn("thread's seqs given but never stored are skipped", "thread", id, "logged", logged, "floor", floor, "holder_died", skip)
	}
	return nil
}

// resume sets the thread's counter from the replay log's last seq
// (logged) and its floor for the thread's next run, past the seqs given
// that no log holds: ahead more when the lease's last holder died holding
// it (it may have given that many to its own clients), and past this
// instance's own given after its writes were fenced (fencedAt). When it
// moves past any, the next event numbered says it skips them
// (Event.skipped_after), after the seq readers have the thread's events
// up to. It reports whether it skips.
func (t *thread) resume(logged, floor, ahead uint64, holderDied bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	base := max(logged, floor)
	read := base // what readers have the thread's events up to
	if logged > 0 && floor > logged && t.seq < floor {
		// Another instance gave seqs to the floor that the log never got
		// (the log lets go of the oldest, never the newest).
		read = logged
	}
	next := base
	if holderDied {
		next += ahead
	}
	next = max(next, t.fencedAt)
	t.fencedAt = 0
	t.seq = max(t.seq, next)
	if next == read {
		return false
	}
	t.skipped = &read
	return true
}

// raise moves the thread's counter up to last, never down.
func (t *thread) raise(last uint64) {
	t.mu.Lock()
	t.seq = max(t.seq, last)
	t.mu.Unlock()
}

// last is the thread's last seq given.
func (t *thread) last() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
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
		r.stop(errShuttingDown)
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

// Running returns the number of local runs in flight.
func (b *Bridge) Running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.runs)
}

// cancelRun cancels the local run id when of reports that its thread is
// the one the cancel is for (a client's, or a command's subject's); false
// when no such run is here.
func (b *Bridge) cancelRun(id string, of func(thread string) bool) bool {
	b.mu.Lock()
	r := b.runs[id]
	b.mu.Unlock()
	if r == nil || !of(r.threadID) {
		return false
	}
	r.cancel()
	return true
}

// run wraps a local backend stream: it stamps events, guards the invariants
// and supplies the terminal event an upstream failed to send.
type run struct {
	b        *Bridge
	ctx      context.Context
	cancel   context.CancelFunc
	up       canonical.Stream
	threadID string
	thread   *thread
	id       string
	backend  string
	forOther bool // placed here by another instance, whose client heartbeats it
	// stopped: this instance ended the run, not its client (Drain, a
	// thread lease lost): it ends failed with this error, not cancelled
	// with "context canceled".
	stopped atomic.Pointer[canonical.Error]
	// clientSeen is when the client's instance last said it still reads
	// the run (unix ns); a run placed here whose client's instance went
	// quiet is cancelled (heartbeatLoop).
	clientSeen atomic.Int64
	pub        *publisher    // nil without a fabric
	seqReady   chan struct{} // closed when the thread's seq is recovered; nil: nothing to wait for
	seqKnown   bool          // take saw seqReady closed
	startErr   error         // the run's new thread could not be claimed, or its thread's last seq read (set before seqReady closes)
	unlogged   bool          // startErr ended the run: its end goes to its client only
	leased     bool          // the run holds a share of its thread's lease (lease.go)

	guard canonical.Guard
	owed  []*canonical.Event // events to deliver; owed[next:] are pending
	next  int
	ended bool // the terminal event was taken

	upBuf  canonical.Buffered // up, when it tells what it holds
	readAt time.Time          // the time stamped on the events of up's last read
	shared int                // events after the first stamped with readAt
	once   sync.Once
	upOnce sync.Once  // closeUp's
	takeMu sync.Mutex // take's: see takeNext

	// ahead, once readAhead runs, carries the events it takes (stamped,
	// sequenced and published) to Recv; it is closed after the terminal
	// event. readAhead starts when a frontend asks Buffered and the
	// backend's stream cannot tell: the queue's length then says what
	// Recv returns without waiting.
	mu        sync.Mutex // guards starting readAhead against finish
	closed    bool       // finish began: readAhead no longer starts
	ahead     chan *canonical.Event
	aheadStop chan struct{}
	aheadDone chan struct{}
}

// stampShare bounds the events in a row stamped with one reading of the
// clock (see take).
const stampShare = 64

// aheadEvents bounds the events readAhead takes before Recv asks for them.
const aheadEvents = 128

// Recv implements canonical.Stream.
func (r *run) Recv() (*canonical.Event, error) {
	var ev *canonical.Event
	if r.ahead != nil {
		var ok bool
		if ev, ok = <-r.ahead; !ok {
			return nil, io.EOF
		}
	} else {
		var err error
		if ev, err = r.takeNext(); err != nil {
			return nil, err
		}
	}
	if _, ok := canonical.TerminalOf(ev); ok {
		r.finish()
	}
	return ev, nil
}

// takeNext is take under takeMu: Recv's goroutine, readAhead's and
// finish's (endUnread) take events one at a time.
func (r *run) takeNext() (*canonical.Event, error) {
	r.takeMu.Lock()
	defer r.takeMu.Unlock()
	return r.take()
}

// take returns the run's next event, stamped with thread, run, seq and
// time and queued for publishing; io.EOF after the terminal event. It runs
// on Recv's goroutine, or on readAhead's once that started, or, for the
// end of a run its client closed, on finish's. Called with takeMu held.
func (r *run) take() (*canonical.Event, error) {
	if r.next == len(r.owed) { // reuse the queue's backing array
		r.owed, r.next = r.owed[:0], 0
	}
	sameRead := false // the event taken is one up held (never so for the guard's own)
	if r.seqReady != nil && !r.seqKnown {
		<-r.seqReady
		r.seqKnown = true
		if r.startErr != nil {
			// The run never began on its thread (not claimed, or its last
			// seq unknown): its end is its client's alone, written to no
			// log and taking no seq of the thread's.
			r.cancel()
			r.pub, r.unlogged = nil, true
			r.owed = r.guard.End(r.owed, canonical.StatusFailed, canonical.AsError(r.startErr))
		}
	}
	for len(r.owed) == 0 {
		held := r.upBuf != nil && r.upBuf.Buffered() > 0
		if !held && r.pub != nil {
			// The events taken so far have reached the frontend (it asks
			// for the next one after writing them), and the backend holds
			// no more: publish them now, before waiting on it.
			r.queueHeld()
		}
		if r.ended {
			return nil, io.EOF
		}
		// An event the backend holds came in with the one before (the
		// Triton backend's are those decoded from one read): it shares
		// that one's time. Reading the clock per event was 1.7% of the
		// process in an unpaced Triton run, whose deltas arrive many to a
		// read. A backend that holds more than one read's events gets a
		// fresh time every stampShare events at least.
		sameRead = held && r.shared < stampShare
		ev, err := r.up.Recv()
		if err == nil {
			ev = r.ownEnd(ev)
		}
		if err != nil {
			st, ce := r.failure(err)
			r.owed = r.guard.End(r.owed, st, ce)
			sameRead = false
			continue
		}
		if v := r.guard.Observe(ev); v != nil {
			r.b.log.Warn("backend event refused", "run", r.id, "backend", r.backend, "err", v.Message)
			r.owed = r.guard.End(r.owed, canonical.StatusFailed, v)
			sameRead = false
			continue
		}
		r.owed = append(r.owed, ev)
	}
	ev := r.owed[r.next]
	r.owed[r.next] = nil
	r.next++
	ev.ThreadId, ev.RunId = r.threadID, r.id
	if sameRead && !r.readAt.IsZero() {
		r.shared++
	} else {
		r.readAt, r.shared = r.b.now(), 0
	}
	canonical.Stamp(ev, r.readAt)
	t := r.thread
	t.mu.Lock()
	if r.unlogged { // numbered after the thread's events, taking none of their seqs
		ev.Seq, ev.SkippedAfter = t.seq+uint64(r.next), nil
		t.mu.Unlock()
		return r.taken(ev), nil
	}
	t.seq++
	ev.Seq, ev.SkippedAfter, t.skipped = t.seq, t.skipped, nil
	if r.pub != nil && !t.publishLocked(r.pub, ev) {
		t.seq-- // published nowhere, delivered to no one: the seq is free
		t.skipped = ev.SkippedAfter
		t.mu.Unlock()
		r.refuseTooLarge(ev)
		return r.take()
	}
	t.mu.Unlock()
	return r.taken(ev), nil
}

// ownEnd is the end the run owes for ev, a terminal event of the backend's
// after this instance stopped the run (failed, with the stop's error), or
// after its client cancelled it: a backend that reads its cancelled
// request as failed (code canceled) has the run cancelled, as the client
// asked. Any other event is itself.
func (r *run) ownEnd(ev *canonical.Event) *canonical.Event {
	st, ok := canonical.TerminalOf(ev)
	stop := r.stopped.Load()
	switch {
	case !ok:
		return ev
	case stop != nil && st == canonical.StatusCancelled:
		return canonical.Terminal(canonical.StatusFailed, stop)
	case stop == nil && st == canonical.StatusFailed && errors.Is(r.ctx.Err(), context.Canceled) &&
		canonical.Code(ev.GetLifecycle().GetError().GetCode()) == canonical.CodeCanceled:
		return canonical.Terminal(canonical.StatusCancelled, canonical.FromProto(ev.GetLifecycle().GetError()))
	}
	return ev
}

// readyThread readies the run's thread for its first event, then closes
// seqReady: the lease of a thread named for the run taken (newLease), a
// lease taken marked held (markHeld), the claim waited for, and the
// thread's counter set from the replay log (fromLog). The first failure
// is startErr.
func (r *run) readyThread(ctx context.Context, lease *leaseGrant, newLease, fromLog bool, claim <-chan error) {
	defer close(r.seqReady)
	mark := lease != nil && lease.taken
	if newLease { // while the claim, made since Run, is under way
		mark, r.startErr = r.takeLease(ctx)
	}
	var orphaned bool
	if mark && r.startErr == nil {
		orphaned, r.startErr = r.b.leases.markHeld(ctx, r.threadID)
	}
	if claim != nil {
		if err := <-claim; r.startErr == nil {
			r.startErr = err
		}
	}
	if fromLog && r.startErr == nil {
		created := lease != nil && lease.created
		r.startErr = r.b.recoverSeq(ctx, r.threadID, r.thread, created, created && orphaned)
	}
}

// takeLease takes the lease of the run's thread, new: another holder
// would mean another instance runs a thread named for this run. taken
// reports that this run took it (no run here held it).
func (r *run) takeLease(ctx context.Context) (taken bool, err error) {
	g, err := r.b.leases.grant(ctx, r.threadID, 0)
	if err == nil {
		r.leased = true // read by finish after seqReady
		taken = g.taken
	}
	return taken, err
}

// releaseLease releases the run's share of its thread's lease, if it has
// one, leaving last for the next holder when it is the last share.
func (r *run) releaseLease(last uint64) {
	if r.leased {
		r.leased = false
		r.b.leases.release(r.threadID, last)
	}
}

// taken notes that ev, the run's next event, was taken: the run has ended
// when it is the terminal one.
func (r *run) taken(ev *canonical.Event) *canonical.Event {
	if _, ok := canonical.TerminalOf(ev); ok {
		r.ended = true
		// The end has its seq in the thread: the upstream is closed now,
		// not when the client reads the end, so that a runtime holding the
		// thread's turn (the agent runtime's queued runs) gives it up
		// after its end's seq and never before, whatever the client's pace.
		r.closeUp()
	}
	return ev
}

// closeUp closes the upstream, once.
func (r *run) closeUp() {
	r.upOnce.Do(func() {
		if r.up != nil {
			_ = r.up.Close()
		}
	})
}

// refuseTooLarge ends the run failed in place of an event larger than a
// NATS message carries (nats max_payload): the replay log could not keep
// it, so delivering it here alone would leave a hole in every replay and
// remote stream of the thread. The events after it are dropped too.
func (r *run) refuseTooLarge(ev *canonical.Event) {
	r.b.log.Warn("run failed: event larger than NATS carries", "thread", r.threadID, "run", r.id,
		"bytes", proto.Size(ev), "limit", r.pub.limit)
	r.cancel()
	clear(r.owed[r.next:])
	r.owed = r.guard.End(r.owed[:r.next], canonical.StatusFailed, canonical.Errorf(canonical.CodeResourceExhausted,
		"an event of %d bytes is larger than NATS carries (its max_payload allows %d)", proto.Size(ev), r.pub.limit))
}

// queueHeld queues the events the run's publisher holds.
func (r *run) queueHeld() { r.thread.queueHeld(r.pub) }

// Buffered returns how many events Recv returns without waiting.
// Frontends use it to write a burst of events at once and flush only
// before a Recv that may wait. A backend stream with a Buffered() int
// method says how many it holds; for any other, the first call that finds
// nothing owed starts readAhead, and the count is then its queue's (after
// Close, Recv returns what readAhead had queued, then io.EOF). It is
// called from the goroutine that calls Recv.
func (r *run) Buffered() int {
	if r.ahead != nil {
		return len(r.ahead)
	}
	n := len(r.owed) - r.next
	if n > 0 || r.ended {
		return n
	}
	if b, ok := r.up.(canonical.Buffered); ok {
		return b.Buffered()
	}
	r.startAhead()
	return 0
}

// startAhead starts readAhead, unless the run is finishing.
func (r *run) startAhead() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.ahead = make(chan *canonical.Event, aheadEvents)
	r.aheadStop, r.aheadDone = make(chan struct{}), make(chan struct{})
	go r.readAhead()
}

// readAhead takes the run's events into r.ahead until the terminal one
// is queued or finish stops it; finish waits for it to return.
func (r *run) readAhead() {
	defer close(r.aheadDone)
	defer close(r.ahead)
	for {
		ev, err := r.takeNext()
		if err != nil {
			return
		}
		select {
		case r.ahead <- ev:
		case <-r.aheadStop:
			return
		}
	}
}

// errShuttingDown ends the runs a server's shutdown cancels: the client
// did not cancel them, and may run them again elsewhere (unavailable).
var errShuttingDown = canonical.Errorf(canonical.CodeUnavailable, "the server is shutting down")

// stop ends the run failed with e, which this instance, not the client,
// decided (the first such decision's error stays).
func (r *run) stop(e *canonical.Error) {
	r.stopped.CompareAndSwap(nil, e)
	r.cancel()
}

// failure turns a stream error into the terminal status and error owed.
func (r *run) failure(err error) (canonical.RunStatus, *canonical.Error) {
	if stop := r.stopped.Load(); stop != nil {
		return canonical.StatusFailed, stop
	}
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

// endUnread takes, numbers and publishes the rest of a run its client
// closed before taking its end (it left, or was cut off as a slow
// consumer): the backend's events it held, then the end the run owes,
// cancelled (failed when this instance stopped it). Without it the replay
// log kept the run with no end: its observers, finding the owner quiet,
// later ended it "failed" for a cause that was not, and a next run of the
// thread followed it as if it had ended. The upstream is closed by then,
// so the backend's stream ends at once. A Recv blocked on another
// goroutine takes its event first (takeMu).
func (r *run) endUnread() {
	if r.up == nil {
		return // the backend never started it
	}
	r.takeMu.Lock()
	defer r.takeMu.Unlock()
	for !r.ended && r.pub != nil { // nil: no log to end it in (take may unset it)
		if _, err := r.take(); err != nil {
			return
		}
	}
}

// Close implements canonical.Stream: it cancels the run if it is still going.
func (r *run) Close() error {
	r.finish()
	return nil
}

// finish unregisters the run and releases its upstream, once; it stops
// readAhead and waits for it.
func (r *run) finish() {
	r.once.Do(func() {
		r.cancel()
		r.closeUp()
		if r.seqReady != nil {
			<-r.seqReady // cancelled: the request returns
		}
		r.mu.Lock()
		r.closed = true
		stop, done := r.aheadStop, r.aheadDone
		r.mu.Unlock()
		if stop != nil {
			close(stop)
			<-done
		}
		r.endUnread()
		b := r.b
		last := r.thread.last()
		if r.pub != nil {
			r.queueHeld()
			r.pub.publishNow()
			if r.pub.chain.fenced.Load() {
				// Its seqs after the fence are in no log: another
				// instance ended the run there and the thread goes on
				// from that end.
				last = 0
			} else {
				b.fabric.NoteLastSeq(r.threadID, last)
			}
		}
		r.releaseLease(last)
		b.mu.Lock()
		delete(b.runs, r.id)
		b.releaseThread(r.threadID, r.thread)
		if b.draining && len(b.runs) == 0 && b.idle != nil {
			select {
			case <-b.idle:
			default:
				close(b.idle)
			}
		}
		b.mu.Unlock()
	})
}
