package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// LeasesBucket is the KV bucket of thread leases: which instance numbers a
// thread's events while it has runs.
const LeasesBucket = "interlingua-thread-leases"

// leases make one instance at a time number a thread's events. A thread's
// seq is its instance's counter, continued from the replay log when a run
// starts; two instances running the thread at once both continued from
// the same last seq and gave two events each seq. So a run of a thread a
// client named runs where the thread's lease is: the first run of the
// thread on an instance creates the lease's KV entry (the instance's other
// runs of the thread share it), the instance renews it while it runs the
// thread, and its last run's end frees it with the thread's last seq,
// which the next holder continues from (the replay log may not have
// acknowledged those events yet). A run started on another instance
// meanwhile is placed on the holder (subject <prefix>.place.<holder>),
// where it runs beside the others, as two runs of a thread on one
// instance do. A holder that does not host the run's backend, or is gone
// (its lease not yet expired), cannot take it: the run then waits for the
// lease, up to its TTL and half of nats.start_timeout, and is refused
// (aborted) if it is still held. A holder that dies stops renewing: its
// lease expires after leaseTTL, or sooner when a client of its runs,
// finding it gone, frees it (evict); the next holder continues from the
// replay log, past the seqs the dead holder may have given that the log
// never got when the holder's mark of the thread is still there
// (markHeld).
//
// A run on a thread named for it alone (thread id = run id) takes the
// lease while its backend starts: nobody else knows the thread before its
// first event, which waits for the lease, and a client that continues the
// thread elsewhere while the run goes on (or as it ends) finds it held.
// An embedded server that does not listen has no other instance: no lease
// is taken there.
type leases struct {
	kv jetstream.KeyValue
	// marks is the threads bucket, which does not age, where a holder
	// marks the threads it holds until it frees them (markHeld).
	marks jetstream.KeyValue
	self  string // this instance's holder id
	ttl   time.Duration
	wait  time.Duration // how long a run waits for another instance's lease
	log   *slog.Logger
	lost  func(thread string) // a lease found taken at renewal: its runs here end failed
	// settled, when not nil, is closed once the replay log has stored
	// the thread's events queued so far (Fabric.Settled).
	settled func(thread string) <-chan struct{}

	mu    sync.Mutex
	held  map[string]*lease // by thread
	frees sync.WaitGroup    // lease entries being freed (release)

	closing   chan struct{} // closed by close
	closeOnce sync.Once
}

// lease is a thread's lease as this instance holds it (or is taking it).
type lease struct {
	refs    int
	ready   chan struct{} // closed when taking it ended; err, holder and last are set then
	err     error
	holder  string // another instance's, holding the lease: not taken
	last    uint64 // the thread's last seq as the previous holder left it (0: unknown)
	created bool   // the entry was made anew: no holder left it free
	marked  uint64 // the revision of this instance's hold mark (markHeld); 0: none
	rev     uint64 // the KV entry's revision, of this instance's last write
	renewed time.Time
}

// leaseValue is a lease's KV entry: its holder, or none and the thread's
// last seq.
type leaseValue struct {
	Holder string `json:"holder,omitempty"`
	Last   uint64 `json:"last,omitempty"`
}

// bytes is v as its KV entry.
func (v leaseValue) bytes() []byte {
	b, _ := json.Marshal(v) // two plain members: it cannot fail
	return b
}

// readLease is the value of a lease entry; an unreadable one reads as
// free, with no last seq.
func readLease(e jetstream.KeyValueEntry) leaseValue {
	var v leaseValue
	if json.Unmarshal(e.Value(), &v) != nil {
		return leaseValue{}
	}
	return v
}

// leaseTTL is how long a lease outlives its holder's last renewal: ten
// heartbeats, at least a few seconds (a NATS reconnect must not lose it).
func leaseTTL(heartbeat time.Duration) time.Duration { return max(10*heartbeat, 3*time.Second) }

// leasePoll bounds the pause between looks at a lease another instance
// holds.
const leasePoll = 50 * time.Millisecond

func leaseKey(thread string) string { return subject.Key(thread) }

// acquire takes thread's lease for one run, waiting up to wait for
// another instance that holds it. It returns the thread's last seq as the
// previous holder left it (0: read it from the replay log), or, when
// another instance still holds the lease, that instance's holder id.
func (l *leases) acquire(ctx context.Context, thread string, wait time.Duration) (g leaseGrant, holder string, err error) {
	l.mu.Lock()
	if h := l.held[thread]; h != nil {
		h.refs++
		l.mu.Unlock()
		<-h.ready
		if h.err == nil && h.holder == "" {
			if err := l.confirm(ctx, thread, h); err != nil {
				l.release(thread, 0)
				return leaseGrant{}, "", err
			}
		}
		if h.err != nil || h.holder != "" {
			l.release(thread, 0)
		}
		return leaseGrant{}, h.holder, h.err // the counter here is the thread's already
	}
	h := &lease{refs: 1, ready: make(chan struct{})}
	if l.held == nil {
		l.held = map[string]*lease{}
	}
	l.held[thread] = h
	l.mu.Unlock()
	h.holder, h.err = l.take(ctx, thread, h, wait)
	close(h.ready)
	if h.err != nil || h.holder != "" {
		l.release(thread, 0)
	}
	return leaseGrant{last: h.last, created: h.created, taken: h.err == nil && h.holder == ""}, h.holder, h.err
}

// take writes this instance into thread's lease entry: a new one, or one
// that is free. While another instance holds it, it waits up to wait,
// then returns that instance's holder id.
func (l *leases) take(ctx context.Context, thread string, h *lease, wait time.Duration) (string, error) {
	key := leaseKey(thread)
	mine := leaseValue{Holder: l.self}.bytes()
	deadline := time.Now().Add(wait)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, leasePoll) {
		rev, err := l.kv.Create(ctx, key, mine)
		if err == nil {
			h.rev, h.renewed, h.created = rev, time.Now(), true
			return "", nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", natsFailure(l.log.With("thread", thread), canonical.CodeUnavailable, "the thread's lease could not be taken", err)
		}
		e, err := l.kv.Get(ctx, key)
		var v leaseValue
		if err == nil {
			v = readLease(e)
		}
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue // expired or freed between the two
		case err != nil:
			return "", natsFailure(l.log.With("thread", thread), canonical.CodeUnavailable, "the thread's lease could not be read", err)
		case v.Holder == "" || v.Holder == l.self:
			// Free (or this instance's own, left by a release that
			// failed): taken by a write conditional on its revision.
			if rev, err := l.kv.Update(ctx, key, mine, e.Revision()); err == nil {
				h.rev, h.renewed, h.last = rev, time.Now(), v.Last
				return "", nil
			}
			continue
		}
		if !time.Now().Before(deadline) {
			return v.Holder, nil
		}
		select {
		case <-ctx.Done():
			return "", canonical.AsError(ctx.Err())
		case <-time.After(pause):
		}
	}
}

// holderOf is the holder id of thread's lease, "" when nobody holds it
// (or it cannot be read: the run is then placed as any other).
func (l *leases) holderOf(ctx context.Context, thread string) string {
	e, err := l.kv.Get(ctx, leaseKey(thread))
	if err != nil {
		return ""
	}
	if h := readLease(e).Holder; h != l.self {
		return h
	}
	return ""
}

// release ends one run's share of thread's lease. The last share frees
// the entry, leaving last, the thread's last seq, for the next holder —
// once the replay log has stored the thread's events queued here (the
// next holder's events must follow them in the log), in the background:
// the run's end waits for no NATS request. Until then the lease is
// renewed, and a run of the thread starting here takes it back.
func (l *leases) release(thread string, last uint64) {
	l.mu.Lock()
	h := l.held[thread]
	if h == nil {
		l.mu.Unlock()
		return
	}
	if h.refs--; h.refs > 0 {
		l.mu.Unlock()
		return
	}
	if h.err != nil || h.holder != "" { // never taken
		delete(l.held, thread)
		l.mu.Unlock()
		return
	}
	h.last = last
	l.mu.Unlock()
	l.frees.Add(1)
	go l.free(thread, h)
}

// free frees thread's lease h once the replay log has stored the thread's
// events queued so far (bounded by the lease's TTL), unless a run of the
// thread took it back meanwhile. (Here, not in release: queueing the
// marker may wait for room in the publish queue.)
func (l *leases) free(thread string, h *lease) {
	defer l.frees.Done()
	var settled <-chan struct{} = closedChan
	if l.settled != nil {
		settled = l.settled(thread)
	}
	select {
	case <-settled:
	case <-l.closing: // shutting down: free it now, with the last seq
	case <-time.After(l.ttl):
		l.log.Warn("thread lease freed before the replay log stored the thread's last events", "thread", thread)
	}
	l.mu.Lock()
	if h.refs > 0 || l.held[thread] != h {
		l.mu.Unlock()
		return // taken back
	}
	delete(l.held, thread)
	rev, last, marked := h.rev, h.last, h.marked
	l.mu.Unlock()
	free := leaseValue{Last: last}.bytes()
	timeout := 5 * time.Second
	if isReady(l.closing) {
		timeout = time.Second // shutting down: it expires anyway
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := l.kv.Update(ctx, leaseKey(thread), free, rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// A renewal landed meanwhile: free it at its revision, unless a
		// run of this instance has taken it since (it holds it then).
		var e jetstream.KeyValueEntry
		if e, err = l.kv.Get(ctx, leaseKey(thread)); err == nil && l.mine(e) && !l.holds(thread) {
			_, err = l.kv.Update(ctx, leaseKey(thread), free, e.Revision())
		}
	}
	switch {
	case err == nil:
		l.unmark(ctx, thread, marked)
	case !errors.Is(err, jetstream.ErrKeyExists):
		// It expires instead; the next holder reads the replay log.
		l.log.Warn("thread lease not freed", "thread", thread, "err", err)
	}
}

// confirm checks, when the renewals of thread's lease h, held here, are
// late (more than half its TTL since the last: the process was paused, or
// NATS slow), that the lease is still this instance's before a run shares
// it: a run numbering the thread on a lease another instance has taken
// since gives its client seqs that the other gives too (the log fences
// its writes, not what its client reads). A lease found another's, or
// gone, is lost: the thread's runs here end failed, as renew ends them.
func (l *leases) confirm(ctx context.Context, thread string, h *lease) error {
	l.mu.Lock()
	late := time.Since(h.renewed) > l.ttl/2
	l.mu.Unlock()
	if !late {
		return nil
	}
	e, err := l.kv.Get(ctx, leaseKey(thread))
	switch {
	case err == nil && l.mine(e):
		return nil
	case err == nil || errors.Is(err, jetstream.ErrKeyNotFound):
		l.log.Error("thread lease lost: the thread's runs here end failed", "thread", thread, "found", "at a run's start, its renewals late")
		if l.lost != nil {
			l.lost(thread)
		}
		return canonical.Errorf(canonical.CodeUnavailable, "this instance's lease of thread %q lapsed while its renewals were late: try again", thread)
	}
	return natsFailure(l.log.With("thread", thread), canonical.CodeUnavailable, "the thread's lease could not be read", err)
}

// holdMarkKey is the threads bucket's key of thread's hold mark.
func holdMarkKey(thread string) string { return "held." + subject.Key(thread) }

// markHeld marks thread, whose lease a run here has just taken, held by
// this instance until free deletes the mark, before the run's first
// event: a holder gives a client on its own instance each event before
// the replay log stores it, so one that died holding the lease may have
// given seqs past the log's last that nothing in the log tells of (a run
// none of whose events the log got). It reports whether another
// instance's mark was there: that instance never freed the thread.
func (l *leases) markHeld(ctx context.Context, thread string) (orphaned bool, err error) {
	key, mine := holdMarkKey(thread), []byte(l.self)
	var rev uint64
	for range 3 { // a mark deleted between the two requests: again
		if rev, err = l.marks.Create(ctx, key, mine); !errors.Is(err, jetstream.ErrKeyExists) {
			break
		}
		var e jetstream.KeyValueEntry
		if e, err = l.marks.Get(ctx, key); err == nil {
			orphaned = string(e.Value()) != l.self
			if rev, err = l.marks.Update(ctx, key, mine, e.Revision()); err == nil {
				break
			}
		}
	}
	if err != nil {
		return false, natsFailure(l.log.With("thread", thread), canonical.CodeUnavailable, "the thread's lease could not be marked held", err)
	}
	l.mu.Lock()
	if h := l.held[thread]; h != nil {
		h.marked = rev
	}
	l.mu.Unlock()
	return orphaned, nil
}

// unmark deletes this instance's hold mark of a thread it freed, unless
// the next holder's replaced it. One left (the request failed, or this
// instance died between) costs the next holder that takes the lease anew
// only seqs it skips.
func (l *leases) unmark(ctx context.Context, thread string, rev uint64) {
	if rev == 0 {
		return
	}
	if err := l.marks.Delete(ctx, holdMarkKey(thread), jetstream.LastRevision(rev)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		l.log.Debug("thread hold mark not deleted", "thread", thread, "err", err)
	}
}

// mine reports whether a lease entry names this instance.
func (l *leases) mine(e jetstream.KeyValueEntry) bool {
	return readLease(e).Holder == l.self
}

// holds reports whether a run here holds (or is taking) thread's lease.
func (l *leases) holds(thread string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[thread] != nil
}

// close frees the leases being freed without waiting for the replay log
// any longer (the fabric drains it as it closes), and waits for that.
func (l *leases) close() {
	l.closeOnce.Do(func() { close(l.closing) })
	l.frees.Wait()
}

// evict frees thread's lease if holder, an instance taken for dead, still
// holds it, leaving last, the thread's last seq as the replay log now
// ends it. The write is conditional on the entry read: a holder that
// renewed meanwhile keeps it.
func (l *leases) evict(ctx context.Context, thread, holder string, last uint64) {
	key := leaseKey(thread)
	e, err := l.kv.Get(ctx, key)
	if err != nil {
		return // none, or it expires on its own
	}
	if readLease(e).Holder != holder {
		return
	}
	if _, err := l.kv.Update(ctx, key, leaseValue{Last: last}.bytes(), e.Revision()); err == nil {
		l.log.Info("thread lease of a gone instance freed", "thread", thread, "last_seq", last)
	}
}

// leaseGrant is a share of a thread's lease taken for a run: the thread's
// last seq as the previous holder left it (0: unknown), and whether this
// instance made the lease's entry anew. A holder that ends its last run of
// the thread leaves the entry free, for its TTL, and the next holder
// continues from it; an entry made anew follows one that expired, with a
// holder that died, perhaps in the middle of a run (endOrphanRun), or
// one freed long enough ago.
type leaseGrant struct {
	last    uint64
	created bool
	taken   bool // this run took the lease (no run here held it): it marks it held
}

// grant takes a share of thread's lease for a run, waiting up to wait for
// another instance holding it; CodeAborted when it still does.
func (l *leases) grant(ctx context.Context, thread string, wait time.Duration) (*leaseGrant, error) {
	g, holder, err := l.acquire(ctx, thread, wait)
	if err != nil {
		return nil, err
	}
	if holder != "" {
		return nil, canonical.Errorf(canonical.CodeAborted, "thread %q has a run on another instance (waited %s for it to end)", thread, wait)
	}
	return &g, nil
}

// runOnThread runs req, of a thread a client named, where the thread's
// events are numbered: here, when this instance hosts the backend and
// takes (or has) the thread's lease; otherwise on the instance holding the
// lease. When that instance cannot take the run (it does not host the
// backend, or is gone with its lease not yet expired), the run waits for
// the lease here, up to its TTL and half of nats.start_timeout, or is
// placed on an instance hosting the backend, which waits as long for it.
func (b *Bridge) runOnThread(ctx context.Context, rt Route, be canonical.Backend, req *canonical.Request) (canonical.Stream, error) {
	thread := req.GetThreadId()
	anyHost := b.subject("run", subject.Token(rt.Backend))
	if !b.hosts(rt.Backend) {
		if h := b.leases.holderOf(ctx, thread); h != "" {
			if s, err := b.runRemote(ctx, rt, req, nil, b.subject("place", h)); !placementFailed(err) {
				return s, err
			}
		}
		return b.runRemote(ctx, rt, req, nil, anyHost)
	}
	g, holder, err := b.leases.acquire(ctx, thread, 0)
	if err != nil {
		return nil, err
	}
	if holder != "" {
		s, err := b.runRemote(ctx, rt, req, nil, b.subject("place", holder))
		if !placementFailed(err) {
			return s, err
		}
		lease, err := b.leases.grant(ctx, thread, b.leases.ttl+b.leases.wait)
		if err != nil {
			return nil, err
		}
		return b.runLocal(ctx, rt, be, req, false, nil, lease)
	}
	return b.runLocal(ctx, rt, be, req, false, nil, &g)
}

// endOrphanRun appends to thread's replay log a failed end for the run of
// m, the thread's last message there, when it leaves the run unended and
// this instance has made the thread's lease entry anew; it returns the
// end's last seq (0: none appended). The run's owner then let its lease expire without ending it: it
// died (kill -9, a lost machine), and nobody else ends such a run when its
// client was on the owner too. Without this its readers would wait for an
// end forever, and the thread's next runs would follow it in the log as if
// it had ended. An owner only cut off from NATS has lost the lease as
// well (its runs end failed there), and the end appended here fences
// what it would still write (logchain.go). A run of the thread running
// here is not an orphan; only the run of the log's last event is looked
// at.
func (b *Bridge) endOrphanRun(ctx context.Context, thread string, m *jetstream.RawStreamMsg) uint64 {
	if m == nil {
		return 0
	}
	evs, err := DecodeEvents(m.Data)
	if err != nil || len(evs) == 0 {
		return 0
	}
	tail := evs[len(evs)-1]
	if _, ended := canonical.TerminalOf(tail); ended {
		return 0
	}
	run := tail.GetRunId()
	b.mu.Lock()
	_, here := b.runs[run]
	b.mu.Unlock()
	if here {
		return 0
	}
	g, err := b.fabric.runGuard(ctx, thread, run)
	if err == nil {
		ended := g.End(nil, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "run owner's lease of the thread expired before the run ended (the owner stopped)"))
		if evs, err = b.appendEnd(ctx, thread, run, ended, 0); err == nil {
			b.log.Warn("run left unended by an instance gone: failed end appended to the replay log", "thread", thread, "run", run)
			return evs[len(evs)-1].GetSeq()
		}
	}
	if !errors.Is(err, errRunEnded) {
		b.log.Warn("run left unended by an instance gone: its end could not be appended", "thread", thread, "run", run, "err", err)
	}
	return 0
}

// placementFailed reports whether a run placed on another instance was not
// taken there (it is not there, does not host the backend, or could not
// take the thread), as opposed to refused for itself.
func placementFailed(err error) bool {
	c := canonical.CodeOf(err)
	return err != nil && (c == canonical.CodeUnavailable || c == canonical.CodeAborted)
}

// renew rewrites the leases held longer than a quarter of their TTL ago,
// so they do not expire while their threads run.
func (l *leases) renew(now time.Time) {
	type due struct {
		thread string
		rev    uint64
	}
	var dues []due
	l.mu.Lock()
	for thread, h := range l.held {
		if isReady(h.ready) && h.err == nil && h.holder == "" && now.Sub(h.renewed) >= l.ttl/4 {
			dues = append(dues, due{thread, h.rev})
		}
	}
	l.mu.Unlock()
	mine := leaseValue{Holder: l.self}.bytes()
	for _, d := range dues {
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/4)
		rev, err := l.kv.Update(ctx, leaseKey(d.thread), mine, d.rev)
		if errors.Is(err, jetstream.ErrKeyExists) {
			rev, err = l.rewrite(ctx, d.thread, mine)
		}
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound):
			// It expired (NATS was out of reach for its TTL) and may be
			// another instance's: this one's runs of the thread end failed.
			l.log.Error("thread lease lost: the thread's runs here end failed", "thread", d.thread, "err", err)
			if l.lost != nil {
				l.lost(d.thread)
			}
			continue
		case err != nil:
			l.log.Warn("thread lease not renewed; retried at the next heartbeat", "thread", d.thread, "err", err)
			continue
		}
		l.mu.Lock()
		// Another lease of the thread may have replaced the one renewed,
		// and be being taken still: take writes its fields until ready.
		if h := l.held[d.thread]; h != nil && isReady(h.ready) && h.rev == d.rev {
			h.rev, h.renewed = rev, now
		}
		l.mu.Unlock()
	}
}

// rewrite renews thread's lease from the entry as it is now, when it is
// still this instance's: a renewal that timed out while NATS was out of
// reach stays in the client's reconnect buffer and is applied once it is
// back, so the entry is this instance's at a revision it never learned
// (the lease was never lost). ErrKeyExists when the entry is another's.
func (l *leases) rewrite(ctx context.Context, thread string, mine []byte) (uint64, error) {
	e, err := l.kv.Get(ctx, leaseKey(thread))
	if err != nil {
		return 0, err
	}
	if readLease(e).Holder != l.self {
		return 0, jetstream.ErrKeyExists
	}
	return l.kv.Update(ctx, leaseKey(thread), mine, e.Revision())
}

func isReady(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// openLeases opens the lease bucket: its TTL is the leases'.
func openLeases(ctx context.Context, js jetstream.JetStream, replicas int, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeasesBucket, History: 1,
		TTL: ttl, Storage: jetstream.FileStorage, Replicas: replicas})
	if err != nil {
		return nil, fmt.Errorf("nats: lease bucket %s: %w", LeasesBucket, err)
	}
	return kv, nil
}
