package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/subject"
	"github.com/interlingua-dev/interlingua/internal/tracing"
)

// The fabric's subjects, under the configured prefix p:
//
//	p.run.<backend>   start a run; queue group "interlingua", so any instance
//	                  hosting the backend takes it. Request: a canonical
//	                  Request (protobuf). Reply: empty, or the headers
//	                  Interlingua-Error-Code and Interlingua-Error.
//	p.events.<T>.<R>  the canonical events of run R of thread T: each
//	                  message an EventBatch (protobuf) of consecutive
//	                  events, kept by the JetStream replay stream.
//	p.hb.<T>.<R>      the run owner's heartbeat, every nats.heartbeat.
//	p.place.<H>       start a run on the instance whose lease holder id is
//	                  H, which holds the run's thread's lease (lease.go);
//	                  as p.run.<backend>, and its reply carries the header
//	                  Interlingua-Lease-Holder.
//	p.cmd.<T>         commands to live runs: {"cancel_run": "<run id>"},
//	                  or {"cancel_thread": "<T>"} (every run of T).
//	p.chb.<T>.<R>     the client's heartbeat: the instance whose client reads
//	                  run R (placed on another instance) says it still does,
//	                  every nats.heartbeat; the owner cancels a run placed
//	                  on it whose client's instance is quiet for
//	                  nats.owner_timeout (that instance died).
const (
	runQueue       = "interlingua"
	hdrErrorCode   = "Interlingua-Error-Code"
	hdrErrorDetail = "Interlingua-Error"
	// hdrPrincipal carries the caller (JSON canonical.Principal, as the
	// agent frontend's forwarded commands carry it) with a run placed on
	// another instance, which runs it as that key: its nested runs, its
	// metrics, its capture. Instances trust each other: the fabric is the
	// cluster's own NATS (nats.creds and TLS secure it).
	hdrPrincipal = "Interlingua-Principal"
	// hdrHolder, on the answer to a placed run, is the owner's lease
	// holder id: a client that finds the owner gone frees the lease of
	// the run's thread if the owner still holds it (lease.go).
	hdrHolder = "Interlingua-Lease-Holder"
)

// setPrincipal puts ctx's caller, if any, on msg.
func setPrincipal(ctx context.Context, msg *nats.Msg) {
	if p := canonical.PrincipalFrom(ctx); p != nil {
		// A key's name or targets are not checked as UTF-8: replace bad
		// bytes (as encoding/json did) rather than drop the header, which
		// would run the run as no key at all.
		b, _ := json.Marshal(p, json.AllowInvalidUTF8(true))
		msg.Header.Set(hdrPrincipal, string(b))
	}
}

// withPrincipal returns ctx with msg's caller, if it names one.
func withPrincipal(ctx context.Context, msg *nats.Msg) (context.Context, error) {
	h := msg.Header.Get(hdrPrincipal)
	if h == "" {
		return ctx, nil
	}
	p := &canonical.Principal{}
	if err := json.Unmarshal([]byte(h), p); err != nil {
		return ctx, canonical.Errorf(canonical.CodeInvalidArgument, "run request: unreadable %s header: %v", hdrPrincipal, err)
	}
	return canonical.WithPrincipal(ctx, p), nil
}

// clusterState is the bridge's part in the fabric.
type clusterState struct {
	hosted  map[string]bool // nil: every backend
	cfg     NATSConfig
	runSubs []*nats.Subscription
	cmdSub  *nats.Subscription
	chbSub  *nats.Subscription
	stop    chan struct{}
	wg      sync.WaitGroup // heartbeatLoop and pumps
	started bool
}

func (b *Bridge) hosts(backend string) bool {
	return b.fabric == nil || b.cluster.hosted == nil || b.cluster.hosted[backend]
}

// StartCluster joins the fabric: it takes runs for the hosted backends
// (nil: all; "none": none) from other instances, obeys commands, and
// heartbeats its runs. Without a fabric it does nothing.
func (b *Bridge) StartCluster(hosted []string, cfg NATSConfig) error {
	if b.fabric == nil {
		return nil
	}
	c := &b.cluster
	c.cfg, c.stop, c.started = cfg, make(chan struct{}), true
	if kv := b.fabric.leaseKV; kv != nil {
		// Half the start timeout: a run placed here by another instance
		// is refused while its client's instance still waits for the
		// answer.
		b.leases = &leases{kv: kv, marks: b.fabric.Threads(), self: nuid.Next(), ttl: leaseTTL(cfg.Heartbeat), wait: cfg.StartTimeout / 2,
			log: b.log, lost: func(thread string) { b.endThreadHere(thread, errLeaseLost) }, settled: b.fabric.Settled, closing: make(chan struct{})}
	}
	if hosted != nil {
		c.hosted = map[string]bool{}
		for _, h := range hosted {
			if h != "none" {
				c.hosted[h] = true
			}
		}
	}
	nc := b.fabric.Conn()
	seen := map[string]bool{}
	for _, rt := range b.router.routes {
		if seen[rt.Backend] || !b.hosts(rt.Backend) {
			continue
		}
		seen[rt.Backend] = true
		sub, err := nc.QueueSubscribe(b.subject("run", subject.Token(rt.Backend)), runQueue, b.serveRemoteStart)
		if err != nil {
			return fmt.Errorf("nats: subscribe run.%s: %w", rt.Backend, err)
		}
		c.runSubs = append(c.runSubs, sub)
	}
	if b.leases != nil { // runs of the threads whose lease this instance holds
		sub, err := nc.Subscribe(b.subject("place", b.leases.self), b.serveRemoteStart)
		if err != nil {
			return fmt.Errorf("nats: subscribe place: %w", err)
		}
		c.runSubs = append(c.runSubs, sub)
	}
	var err error
	if c.cmdSub, err = nc.Subscribe(b.subject("cmd", ">"), b.serveCommand); err != nil {
		return fmt.Errorf("nats: subscribe cmd: %w", err)
	}
	if c.chbSub, err = nc.Subscribe(b.subject("chb", "*", "*"), b.serveClientHeartbeat); err != nil {
		return fmt.Errorf("nats: subscribe chb: %w", err)
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	c.wg.Add(1)
	go b.heartbeatLoop()
	return nil
}

// StopAccepting stops taking runs from other instances, so they go to an
// instance that is not shutting down.
func (b *Bridge) StopAccepting() {
	for _, s := range b.cluster.runSubs {
		_ = s.Unsubscribe()
	}
	if len(b.cluster.runSubs) > 0 {
		_ = b.fabric.Conn().FlushTimeout(time.Second) // the server drops the interest now
	}
	b.cluster.runSubs = nil
}

// Stop stops a bridge that has no server of its own (a test's, the bench
// harness's): it takes no new run, lets the runs in flight end for up to
// wait, then cancels them and waits up to grace (Drain), and stops its
// cluster side. Its fabric is the caller's to close.
func (b *Bridge) Stop(wait, grace time.Duration) {
	b.StopAccepting()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	b.Drain(ctx, grace)
	b.StopCluster()
}

// StopCluster stops commands and heartbeats and waits for the pumps of runs
// owned for other instances (Drain ends those runs first).
func (b *Bridge) StopCluster() {
	c := &b.cluster
	if !c.started {
		return
	}
	b.StopAccepting()
	for _, sub := range []*nats.Subscription{c.cmdSub, c.chbSub} {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
	}
	close(c.stop)
	c.wg.Wait()
	if b.leases != nil {
		b.leases.close()
	}
	c.started = false
}

func (b *Bridge) subject(parts ...string) string {
	return b.fabric.Prefix() + "." + strings.Join(parts, ".")
}

// serveRemoteStart takes a run placed here by another instance.
func (b *Bridge) serveRemoteStart(msg *nats.Msg) {
	start := b.now()
	req := &canonical.Request{}
	if err := proto.Unmarshal(msg.Data, req); err != nil {
		respondError(msg, canonical.Errorf(canonical.CodeInvalidArgument, "run request does not decode: %v", err))
		return
	}
	rt, be, ok := b.router.Resolve(req.GetTarget())
	switch {
	case !ok:
		respondError(msg, canonical.Errorf(canonical.CodeNotFound, "unknown target %q", req.GetTarget()))
		return
	case !b.hosts(rt.Backend):
		respondError(msg, canonical.Errorf(canonical.CodeUnavailable, "backend %q is not hosted here", rt.Backend))
		return
	}
	ctx, span := tracing.Tracer().Start(tracing.FromNATS(context.Background(), msg), "interlingua.run.owner",
		trace.WithAttributes(attribute.String("interlingua.backend", rt.Backend), attribute.String("interlingua.run", req.GetRunId())))
	// The instance running the run logs and counts it too, as frontend
	// "remote" (its client's instance has its own line).
	ctx = context.WithValue(ctx, frontendKey{}, "remote")
	ctx, err := withPrincipal(ctx, msg)
	if err != nil {
		span.End()
		respondError(msg, canonical.AsError(err))
		return
	}
	var lease *leaseGrant
	if b.leases != nil && req.GetThreadId() != req.GetRunId() {
		// A run of a thread a client named is numbered here only while
		// this instance holds the thread's lease, waited for up to half
		// of the placer's timeout.
		if lease, err = b.leases.grant(ctx, req.GetThreadId(), b.leases.wait); err != nil {
			span.End()
			b.logRefused(ctx, req, start, err)
			respondError(msg, canonical.AsError(err))
			return
		}
	}
	s, err := b.runLocal(ctx, rt, be, req, true, nil, lease)
	if err != nil {
		span.End()
		b.logRefused(ctx, req, start, err)
		respondError(msg, canonical.AsError(err))
		return
	}
	s = b.meter(ctx, s, req, req.GetTarget(), rt.Backend, start, span, func() {})
	reply := nats.NewMsg(msg.Reply)
	if b.leases != nil {
		reply.Header.Set(hdrHolder, b.leases.self)
	}
	if err := msg.RespondMsg(reply); err != nil {
		_ = s.Close()
		return
	}
	b.cluster.wg.Add(1)
	go b.pump(s)
}

// pump drives a run owned for another instance; run.Recv publishes each
// event, which is how the client gets it.
func (b *Bridge) pump(s canonical.Stream) {
	defer b.cluster.wg.Done()
	defer s.Close()
	for {
		if _, err := s.Recv(); err != nil {
			return
		}
	}
}

func respondError(msg *nats.Msg, e *canonical.Error) {
	reply := nats.NewMsg(msg.Reply)
	reply.Header.Set(hdrErrorCode, strconv.Itoa(int(e.Code)))
	reply.Header.Set(hdrErrorDetail, e.Message)
	_ = msg.RespondMsg(reply)
}

type command struct {
	CancelRun    string `json:"cancel_run,omitempty"`
	CancelThread string `json:"cancel_thread,omitempty"`
}

// serveCommand obeys a command for a run that lives here. A command
// acts on its subject's thread only: the sender checked that the thread is
// its client's key's, not that a run id it was given is that thread's (a
// run of another key's thread, named through the caller's own, is left
// alone).
func (b *Bridge) serveCommand(msg *nats.Msg) {
	var c command
	if json.Unmarshal(msg.Data, &c) != nil {
		return
	}
	if c.CancelRun != "" {
		b.cancelRun(c.CancelRun, func(thread string) bool { return msg.Subject == b.commandSubject(thread) })
	}
	if c.CancelThread != "" && msg.Subject == b.commandSubject(c.CancelThread) {
		b.endThreadHere(c.CancelThread, nil)
	}
}

// heartbeatLoop says, for every local run, that its owner is alive, and
// for every run read from another instance, that its client is; it
// cancels the runs placed here whose client's instance went quiet.
func (b *Bridge) heartbeatLoop() {
	defer b.cluster.wg.Done()
	t := time.NewTicker(b.cluster.cfg.Heartbeat)
	defer t.Stop()
	var subjects []string
	var orphans []*run
	var offline time.Time // when the NATS connection was last seen down
	for {
		select {
		case <-b.cluster.stop:
			return
		case <-t.C:
		}
		now := b.now()
		if !b.fabric.Conn().IsConnected() {
			offline = now
		}
		// A client's heartbeats that could not reach us while we, or it,
		// were reconnecting are no sign of its death: runs are judged
		// orphans only after twice the timeout connected.
		quiet := now.Add(-b.cluster.cfg.OwnerTimeout).UnixNano()
		judge := now.Sub(offline) > 2*b.cluster.cfg.OwnerTimeout
		subjects, orphans = subjects[:0], orphans[:0]
		b.mu.Lock()
		for _, r := range b.runs {
			subjects = append(subjects, b.subject("hb", subject.Token(r.threadID), subject.Token(r.id)))
			if judge && r.forOther && r.clientSeen.Load() < quiet {
				orphans = append(orphans, r)
			}
		}
		for rs := range b.remotes {
			subjects = append(subjects, b.subject("chb", subject.Token(rs.thread), rs.runToken))
		}
		b.mu.Unlock()
		subjects = b.fabric.UnstoredRuns(subjects)
		for _, s := range subjects {
			b.fabric.Publish(s, nil)
		}
		if b.leases != nil {
			b.leases.renew(now)
		}
		for _, r := range orphans {
			b.log.Warn("run cancelled: its client's instance is gone", "thread", r.threadID, "run", r.id,
				"quiet_for", b.cluster.cfg.OwnerTimeout.String())
			r.cancel()
		}
	}
}

// serveClientHeartbeat notes that a run placed here still has its client.
func (b *Bridge) serveClientHeartbeat(msg *nats.Msg) {
	id := lastToken(msg.Subject)
	now := b.now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.runs[id]; r != nil && subject.Token(r.id) == id {
		r.clientSeen.Store(now)
		return
	}
	for _, r := range b.runs { // a run id that is not a plain token
		if r.forOther && subject.Token(r.id) == id {
			r.clientSeen.Store(now)
		}
	}
}

// runRemote places req on an instance that hosts the route's backend and
// streams its events back.
// A new thread's claim (see runLocal) is awaited before the stream is
// returned.
func (b *Bridge) runRemote(ctx context.Context, rt Route, req *canonical.Request, claim <-chan error, to string) (canonical.Stream, error) {
	if b.fabric == nil || !b.cluster.started {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "backend %q is not hosted here and the fabric is off", rt.Backend)
	}
	if b.Draining() {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "server is shutting down")
	}
	cfg := b.cluster.cfg
	nc := b.fabric.Conn()
	// Subscribe before asking, so no event can precede the subscription.
	sub, err := nc.SubscribeSync(b.subject("*", subject.Token(req.GetThreadId()), "*"))
	if err != nil {
		return nil, natsFailure(b.log, canonical.CodeUnavailable, "the cluster could not be reached", err)
	}
	_ = sub.SetPendingLimits(cfg.RemoteBuffer, cfg.RemoteBuffer*4096)
	data, err := proto.Marshal(req)
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	msg := nats.NewMsg(to)
	msg.Data = data
	tracing.ToNATS(ctx, msg)
	setPrincipal(ctx, msg)
	reply, err := nc.RequestMsgWithContext(sctx, msg)
	cancel()
	if err == nil && claim != nil {
		if err = <-claim; err != nil {
			b.cancelRemote(req.GetThreadId(), req.GetRunId())
		}
	}
	if err == nil {
		if code := reply.Header.Get(hdrErrorCode); code != "" {
			n, _ := strconv.Atoi(code)
			err = canonical.WireError(canonical.Code(n), reply.Header.Get(hdrErrorDetail))
		}
	}
	if err != nil {
		_ = sub.Unsubscribe()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return nil, canonical.Errorf(canonical.CodeUnavailable, "no instance hosts backend %q", rt.Backend)
		case ctx.Err() != nil:
			return nil, canonical.AsError(ctx.Err())
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			return nil, canonical.Errorf(canonical.CodeUnavailable, "no instance took the run for backend %q within %s", rt.Backend, cfg.StartTimeout)
		}
		return nil, canonical.AsError(err)
	}
	rs := &remoteStream{b: b, ctx: ctx, sub: sub, thread: req.GetThreadId(), run: req.GetRunId(),
		runToken: subject.Token(req.GetRunId()), timeout: cfg.OwnerTimeout, holder: reply.Header.Get(hdrHolder),
		fromStart: req.GetThreadId() == req.GetRunId()}
	rs.stopWatch = context.AfterFunc(ctx, rs.abort)
	b.mu.Lock()
	b.remotes[rs] = struct{}{}
	b.mu.Unlock()
	return rs, nil
}

// remoteStream is a run owned by another instance, as its client sees it.
// It reads the thread's events of every run (and their owners'
// heartbeats): the thread's seqs are consecutive, so a seq skipped tells
// that a message was missed (a NATS reconnect drops what a subscription
// was sent while it was away); the missed events are read from the replay
// log before delivery goes on, or the run ends failed (data loss), never
// completed with a hole.
type remoteStream struct {
	b         *Bridge
	ctx       context.Context
	sub       *nats.Subscription
	thread    string
	run       string
	runToken  string // run as its subjects' last token
	holder    string // the owner's lease holder id ("": it holds no lease)
	timeout   time.Duration
	stopWatch func() bool

	guard     canonical.Guard
	owed      []*canonical.Event
	lastSeq   uint64 // the run's last seq delivered
	threadSeq uint64 // the thread's last seq seen, of any run; 0 before the first
	// fromStart: the thread is the run's own, new (freshRunID), so its
	// first seq is 1 and a first message after it shows a loss too.
	fromStart bool
	alive     time.Time // when the owner last sent an event or heartbeat of the run
	leftAt    time.Time // when Recv first saw the client's context ended
	cancelled sync.Once // the run's cancel is sent to its owner
	ended     atomic.Bool
	once      sync.Once
}

// Recv implements canonical.Stream.
func (r *remoteStream) Recv() (*canonical.Event, error) {
	for len(r.owed) == 0 {
		if r.ended.Load() {
			return nil, io.EOF
		}
		msg, err := r.next()
		switch {
		case err == nil:
			r.receive(msg)
		case errors.Is(err, nats.ErrTimeout) && r.b.now().Sub(r.alive) < r.timeout:
			// The client left and the owner, alive, has not ended the run
			// it was asked to cancel within the timeout: it ends here.
			r.end(canonical.StatusCancelled, canonical.AsError(r.ctx.Err()))
		case errors.Is(err, nats.ErrTimeout):
			r.ownerGone()
		case errors.Is(err, nats.ErrSlowConsumer):
			r.end(canonical.StatusFailed, canonical.Errorf(canonical.CodeResourceExhausted, "remote run buffer overflowed (nats.remote_buffer)"))
		default:
			r.end(canonical.StatusFailed, natsFailure(r.b.log.With("thread", r.thread, "run", r.run), canonical.CodeUnavailable, "run owner unreachable", err))
		}
	}
	ev := r.owed[0]
	r.owed = r.owed[1:]
	if _, ok := canonical.TerminalOf(ev); ok {
		r.ended.Store(true)
		r.cleanup(false)
	}
	return ev, nil
}

// next waits for the thread's next message: while the owner is heard
// from within the timeout and, once the client has left (its run is being
// cancelled at the owner), for up to the timeout from then. The owner's
// own end of a cancelled run is what the client gets: it holds the seq
// the replay log gives it, which an end made here would reuse.
func (r *remoteStream) next() (*nats.Msg, error) {
	for {
		now := r.b.now()
		if r.alive.IsZero() {
			r.alive = now
		}
		wait := r.timeout - now.Sub(r.alive)
		if r.ctx.Err() != nil {
			if r.leftAt.IsZero() {
				r.leftAt = now
			}
			wait = min(wait, r.timeout-now.Sub(r.leftAt))
		}
		if wait <= 0 {
			return nil, nats.ErrTimeout
		}
		asked := time.Now()
		msg, err := r.sub.NextMsg(wait)
		if errors.Is(err, nats.ErrTimeout) && time.Since(asked) > wait+r.timeout/2 {
			// The wait took far longer than asked: this instance was not
			// running (paused, or starved), and the owner's messages of
			// that time may still be on their way in. Its silence is not
			// the owner's: the owner gets a timeout from now.
			r.alive = r.b.now()
			continue
		}
		return msg, err
	}
}

// receive takes one message of the thread: a heartbeat, or events.
func (r *remoteStream) receive(msg *nats.Msg) {
	if strings.HasPrefix(msg.Subject, r.b.fabric.Prefix()+".hb.") {
		if lastToken(msg.Subject) == r.runToken {
			r.alive = r.b.now()
		}
		return
	}
	evs, err := DecodeEvents(msg.Data)
	if err != nil {
		r.end(canonical.StatusFailed, canonical.Errorf(canonical.CodeDataLoss, "events from run owner do not decode: %v", err))
		return
	}
	for _, ev := range evs {
		r.accept(ev)
	}
}

// accept takes an event of the thread, after the ones missed before it.
func (r *remoteStream) accept(ev *canonical.Event) {
	seq := ev.GetSeq()
	switch {
	case r.guard.Ended():
		return
	case r.threadSeq != 0 && seq <= r.threadSeq:
		return // delivered already (read from the log after a gap)
	case (r.threadSeq != 0 || r.fromStart) && !canonical.Follows(ev, r.threadSeq):
		// Those before it, or before the seqs it says are skipped.
		next := seq
		if ev.SkippedAfter != nil {
			next = ev.GetSkippedAfter() + 1
		}
		if next > r.threadSeq+1 && !r.fill(next) {
			return
		}
	}
	r.deliver(ev)
}

// fill delivers the thread's events between the last seen and next, read
// from the replay log; false, with the run ended failed, when the log
// does not have them all within fillTimeout.
func (r *remoteStream) fill(next uint64) bool {
	deadline := r.b.now().Add(fillTimeout(r.timeout))
	for {
		missed, err := r.readMissed(next)
		if err == nil {
			for _, ev := range missed {
				r.deliver(ev)
			}
			// The owner's heartbeats of the time the read took wait in the
			// subscription: its timeout counts from now.
			r.alive = r.b.now()
			return true
		}
		if r.b.now().After(deadline) {
			r.b.log.Warn("remote run missed events", "thread", r.thread, "run", r.run, "after", r.threadSeq, "before", next, "err", err)
			r.end(canonical.StatusFailed, canonical.Errorf(canonical.CodeDataLoss, "events %d to %d of the run's thread were lost in transit", r.threadSeq+1, next-1))
			return false
		}
		time.Sleep(fillRetry)
	}
}

// fillTimeout is how long a live stream tries to read the events it missed
// from the replay log: a reconnect that dropped them may also have lost
// the JetStream meta leader, without which no consumer is created (a
// three-node cluster elects the next in a few seconds), and a consumer
// reads a replica that may lag its leader. An owner that heartbeats all
// along is waited for that long; a gap stays a failure.
func fillTimeout(ownerTimeout time.Duration) time.Duration { return 5 * ownerTimeout }

const fillRetry = 250 * time.Millisecond

// readMissed reads the thread's events between the last seen and next;
// an error when the log has not them all: each must follow the one
// before (canonical.Follows: an orphaned run's end among them skips seqs),
// the last right before next.
func (r *remoteStream) readMissed(next uint64) ([]*canonical.Event, error) {
	// Not the client's context: a client that left still gets the
	// owner's end of the run, after the events before it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.timeout)
	defer cancel()
	missed, err := r.b.fabric.threadEventsBetween(ctx, r.thread, r.threadSeq, next)
	if err != nil {
		return nil, err
	}
	prev := r.threadSeq
	for _, ev := range missed {
		if !canonical.Follows(ev, prev) {
			break
		}
		prev = ev.GetSeq()
	}
	if prev != next-1 {
		return nil, fmt.Errorf("the replay log has them to %d only (%d events)", prev, len(missed))
	}
	return missed, nil
}

// deliver passes on an event of the thread that is the run's.
func (r *remoteStream) deliver(ev *canonical.Event) {
	r.threadSeq = ev.GetSeq()
	if ev.GetRunId() != r.run || r.guard.Ended() {
		return
	}
	r.alive = r.b.now()
	if v := r.guard.Observe(ev); v != nil {
		r.end(canonical.StatusFailed, v)
		return
	}
	r.lastSeq = ev.GetSeq()
	r.owed = append(r.owed, ev)
}

// ownerGone ends the run whose owner went quiet. The failure is appended
// to the replay log with the thread's next seqs, so every observer sees the
// same end and no later run of the thread reuses those seqs; when the log
// already ends the run (another instance appended it first, or the owner's
// last events were sent after all), that is read instead. Only when the
// log cannot be written, or lacks events this client got (a replay stream
// that lost its leader stores nothing until the next is elected), is the
// failure made here alone.
func (r *remoteStream) ownerGone() {
	e := canonical.Errorf(canonical.CodeUnavailable, "run owner sent neither event nor heartbeat for %s", r.timeout)
	ended := r.guard.End(nil, canonical.StatusFailed, e)
	evs, err := r.appendOwnerGone(ended)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.timeout)
	defer cancel()
	switch {
	case err == nil:
		r.threadSeq = evs[len(evs)-1].GetSeq()
		r.owed = append(r.owed, evs...)
		r.freeLease(ctx)
		return
	case errors.Is(err, errRunEnded):
		// The guard has ended the run already; the log's events, which
		// their writer checked, pass as they are.
		var rest []*canonical.Event
		if rest, err = r.b.fabric.threadEventsBetween(ctx, r.thread, r.threadSeq, math.MaxUint64); err == nil {
			for _, ev := range rest {
				if ev.GetRunId() == r.run {
					r.owed = append(r.owed, ev)
				}
			}
			if n := len(r.owed); n > 0 {
				if _, ok := canonical.TerminalOf(r.owed[n-1]); ok {
					r.threadSeq = max(r.threadSeq, r.owed[n-1].GetSeq())
					r.freeLease(ctx)
					return
				}
			}
			r.owed = r.owed[:0]
			err = errors.New("the replay log's end of the run was not found")
		}
	}
	r.b.log.Warn("run end not appended to the replay log", "thread", r.thread, "run", r.run, "err", err)
	end := r.b.stampOrphanEnd(ended, r.thread, r.run, max(r.lastSeq, r.threadSeq))
	r.owed = append(r.owed, end...)
	if n := len(end); n > 0 {
		// The seqs this client got, which the log may lack, and the end
		// made here are given: no later run of the thread gives them
		// again (seqfloor.go).
		r.b.fabric.NoteLastSeq(r.thread, end[n-1].GetSeq())
	}
}

// appendOwnerGone appends ended to the replay log (appendEnd), trying
// again, fillRetry apart, for as long as fill waits for the log
// (fillTimeout) unless the log ends the run already: an instance that was
// itself paused or cut off finds NATS slow to answer as it comes back, and
// an end made here alone may differ from the log's (the owner, finding
// this client gone, ends the run cancelled there).
func (r *remoteStream) appendOwnerGone(ended []*canonical.Event) ([]*canonical.Event, error) {
	deadline := r.b.now().Add(fillTimeout(r.timeout))
	for {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.timeout)
		evs, err := r.b.appendEnd(ctx, r.thread, r.run, ended, r.threadSeq)
		cancel()
		if err == nil || errors.Is(err, errRunEnded) || !r.b.now().Before(deadline) {
			return evs, err
		}
		time.Sleep(fillRetry)
	}
}

// freeLease frees the lease of the run's thread if the owner, gone, still
// holds it, leaving the thread's last seq as the log now ends it: the
// thread's next run need not wait for the lease to expire.
func (r *remoteStream) freeLease(ctx context.Context) {
	if r.b.leases != nil && r.holder != "" {
		r.b.leases.evict(ctx, r.thread, r.holder, r.threadSeq)
	}
}

// end appends the events owed when the stream fails here, stamped as the
// owner would have: the client alone gets them (it is going away, or the
// stream broke on this side).
func (r *remoteStream) end(st canonical.RunStatus, e *canonical.Error) {
	evs := stampEnd(r.guard.End(nil, st, e), r.thread, r.run, max(r.lastSeq, r.threadSeq), r.b.now())
	r.owed = append(r.owed, evs...)
}

// appendEnd appends ended, the events that end run, to thread's replay
// log (AppendEnd), numbered after the log's last seq, unless that is
// before seen, a seq the caller gave: the log lost events, their seqs are
// taken, and nothing is appended (errLogBehind).
func (b *Bridge) appendEnd(ctx context.Context, thread, run string, ended []*canonical.Event, seen uint64) ([]*canonical.Event, error) {
	return b.fabric.AppendEnd(ctx, thread, run, func(last uint64) []*canonical.Event {
		if last < seen {
			return nil
		}
		return b.stampOrphanEnd(ended, thread, run, last)
	})
}

// stampOrphanEnd numbers the events that end a run whose owner went
// silent after the thread's seq last, the last this instance knows given,
// leaving the owner's run-ahead (Fabric.ownerAhead) unused between: the
// owner gave a client on its own instance each event before the replay
// log stored it, so seqs past last may be in that client's hands, and it
// resumes elsewhere from the last it read. The first event says what it
// skips (canonical.Follows), so readers read across with no hole.
func (b *Bridge) stampOrphanEnd(evs []*canonical.Event, thread, run string, last uint64) []*canonical.Event {
	if len(evs) == 0 {
		return evs
	}
	stampEnd(evs, thread, run, last+b.fabric.ownerAhead(), b.now())
	evs[0].SkippedAfter = proto.Uint64(last)
	return evs
}

// stampEnd numbers the events that end a run after seq last.
func stampEnd(evs []*canonical.Event, thread, run string, last uint64, now time.Time) []*canonical.Event {
	for i, ev := range evs {
		ev.ThreadId, ev.RunId, ev.Seq = thread, run, last+uint64(i)+1
		canonical.Stamp(ev, now)
	}
	return evs
}

// abort runs when the client's context ends: the run is cancelled at its
// owner, whose end of it Recv then waits for.
func (r *remoteStream) abort() {
	r.cancelled.Do(func() { r.b.cancelRemote(r.thread, r.run) })
}

// Close implements canonical.Stream.
func (r *remoteStream) Close() error {
	r.cleanup(!r.ended.Load())
	return nil
}

func (r *remoteStream) cleanup(cancelRun bool) {
	r.once.Do(func() {
		r.stopWatch()
		r.b.mu.Lock()
		delete(r.b.remotes, r)
		r.b.mu.Unlock()
		if cancelRun {
			r.abort()
		}
		_ = r.sub.Unsubscribe()
	})
}

// CancelThread cancels every run of thread, on whichever instance runs it:
// a frontend whose client asks, on any instance, to stop what it started
// on another (an OpenAI Responses background response cancelled through
// a load balancer). Each run ends cancelled, as a client that left ends
// it. The caller has checked that the thread is the caller's key's.
func (b *Bridge) CancelThread(thread string) {
	b.endThreadHere(thread, nil)
	if b.fabric != nil && b.cluster.started {
		b.sendCommand(thread, command{CancelThread: thread})
	}
}

// CancelRun cancels a run of thread on whichever instance runs it (it
// ends cancelled); the caller has checked the thread is the caller's. A
// run of that id on another thread is not cancelled, here or elsewhere
// (serveCommand).
func (b *Bridge) CancelRun(thread, run string) {
	if b.cancelRun(run, func(t string) bool { return t == thread }) {
		return
	}
	if b.fabric != nil && b.cluster.started {
		b.cancelRemote(thread, run)
	}
}

// endThreadHere cancels the thread's runs on this instance: ended as
// their clients cancelled them, or, with stop, failed with it (the
// instance ended them).
func (b *Bridge) endThreadHere(thread string, stop *canonical.Error) {
	b.mu.Lock()
	var runs []*run
	for _, r := range b.runs {
		if r.threadID == thread {
			runs = append(runs, r)
		}
	}
	b.mu.Unlock()
	for _, r := range runs {
		if stop != nil {
			r.stop(stop)
		} else {
			r.cancel()
		}
	}
}

// errLeaseLost ends the runs of a thread whose lease this instance lost
// (NATS out of reach for the lease's TTL): another instance may number
// the thread's events now.
var errLeaseLost = canonical.Errorf(canonical.CodeUnavailable, "this instance lost the thread's lease: another may run it now")

// cancelRemote asks the instance running a run to cancel it.
func (b *Bridge) cancelRemote(thread, run string) {
	b.sendCommand(thread, command{CancelRun: run})
}

// sendCommand publishes c on thread's command subject, which every
// instance serves (serveCommand).
func (b *Bridge) sendCommand(thread string, c command) {
	data, _ := json.Marshal(c)
	b.fabric.Publish(b.commandSubject(thread), data)
}

// commandSubject is thread's command subject.
func (b *Bridge) commandSubject(thread string) string {
	return b.subject("cmd", subject.Token(thread))
}
