package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// record is one event in a thread's buffer: its seq, what filters look at,
// and the complete envelope frame, which never changes once stored.
type record struct {
	seq    uint64
	method string
	custom string
	ns     []string
	frame  []byte
	// run and status of a lifecycle event (agent.getTree, reconnect).
	run, status string
	// ref, for a values event read from the replay log whose state is its
	// checkpoint's (wireRecords), names the checkpoint; frame is nil and
	// wire is the event to frame once the state is read.
	ref  string
	wire *wireEvent
}

// ring is a bounded buffer of the most recent records; its seqs are
// contiguous (every event of the thread enters it). It grows as events
// arrive, up to max, then overwrites the oldest; the thread also drops
// its oldest records past Config.BufferBytes (pop), counting their frames
// in bytes.
//
// The records are held in arrays of ringChunk, added as the ring fills
// and never moved. One array grown by append allocated five times the
// full ring and copied four: 6.2 MB and 39,000 copied records to fill the
// default 10,000 (120 bytes each), a third of all the bytes allocated in
// an unpaced agent-to-agent benchmark. Chunks allocate the ring once.
type ring struct {
	chunks [][]record // ringChunk records each; the last up to max
	head   int        // position of the oldest record
	n      int
	max    int
	bytes  int // the frames' bytes of the records held
}

// ringChunk is the records of one of a ring's arrays (30 KB).
const ringChunk = 256

// at returns the i-th oldest record. Positions run from 0 to max-1:
// while the ring first fills, head is 0 and record i is at position i.
func (r *ring) at(i int) *record {
	p := (r.head + i) % r.max
	return &r.chunks[p/ringChunk][p%ringChunk]
}

// push appends rec, returning the record it evicted (ok false when none).
func (r *ring) push(rec record) (old record, evicted bool) {
	r.bytes += len(rec.frame)
	if r.n < r.max { // not full
		// Positions are written in turn, so the first write to a chunk's
		// first position is the one that finds it missing.
		if p := (r.head + r.n) % r.max; p/ringChunk == len(r.chunks) {
			r.chunks = append(r.chunks, make([]record, min(ringChunk, r.max-p)))
		}
		*r.at(r.n) = rec
		r.n++
		return record{}, false
	}
	oldest := r.at(0)
	old, *oldest = *oldest, rec
	r.head = (r.head + 1) % r.max
	r.bytes -= len(old.frame)
	return old, true
}

// pop removes and returns the oldest record; its place lets go of the
// frame at once. The ring must not be empty.
func (r *ring) pop() record {
	oldest := r.at(0)
	old := *oldest
	*oldest = record{}
	r.head = (r.head + 1) % r.max
	r.n--
	r.bytes -= len(old.frame)
	return old
}

// evictions is how many of the oldest records storing n more records of
// size bytes in all evicts: those past max records, and those past
// maxBytes (none when maxBytes is 0) but the newest, which stays
// whatever its size.
func (r *ring) evictions(n, size, maxBytes int) int {
	k := max(0, r.n+n-r.max)
	if over := r.bytes + size - maxBytes; maxBytes > 0 && over > 0 {
		i := 0
		for ; over > 0 && i < r.n; i++ {
			over -= len(r.at(i).frame)
		}
		k = max(k, i)
	}
	return min(k, r.n)
}

// reader is one cursor over a thread's events: an SSE stream or a WebSocket
// connection. cursor is the last seq it has delivered or skipped; wake is
// signalled (without blocking) when events are appended. A reader whose
// cursor is in the buffer holds back a run's pump (awaitRoomLocked): the
// buffer does not evict an event it has not read.
type reader struct {
	cursor uint64
	wake   chan struct{}
	// notify, when set, is called (under the thread's lock; it must not
	// block) in place of signalling wake: an SSE stream starts its writer
	// only when there is something to write.
	notify func()
}

// gap reports that a reader asked for events the buffer no longer holds.
type gap struct {
	since    uint64 // the reader's position
	minAvail uint64 // the oldest seq still buffered
}

// subRec is a WebSocket subscription known to the thread, so
// subscription.reconnect can restore it on another connection: while its
// connection is open (owner set), and for SubscriptionKeep after.
type subRec struct {
	f       *filter
	owner   *wsConn
	expires time.Time
}

// nsStatus is the latest lifecycle status of a namespace of a run.
type nsStatus struct {
	ns     []string
	status string
}

// runInfo is what a thread remembers of a run for agent.getTree and
// subscription.reconnect: its namespaces' latest statuses.
type runInfo struct {
	id     string
	status map[string]*nsStatus // by namespace key
	order  []string
}

// Thread is one thread: its event buffer with the per-thread seq, the
// readers following it, and (runtime.go) its state and runs. All fields are
// guarded by mu.
type Thread struct {
	id string
	f  *Frontend

	mu  sync.Mutex
	seq uint64
	buf ring
	// evicted describes the events buf let go, for missed_events.
	evicted evictLog
	pinned  []record          // latest values event of a namespace, evicted from buf
	latest  map[string]uint64 // namespace key -> seq of its latest values event

	readers map[*reader]struct{}
	// room is signalled (without blocking) while pumpWaits when a reader
	// advances or detaches: the run's pump waits on it for the readers
	// that hold the buffer's oldest events (awaitRoomLocked).
	room      chan struct{}
	pumpWaits bool
	conns     int                // open SSE streams and WebSockets
	ownerSeen time.Time          // a Cluster's follower: when another instance last sent an event or heartbeat
	idle      *time.Timer        // evicts the thread from memory when it stays idle
	idleSince time.Time          // when idle was set
	counted   int                // buf's bytes as counted in the frontend's buffered
	gone      bool               // evicted: counts nothing any more
	subs      map[string]*subRec // WebSocket subscriptions by id
	runs      []*runInfo         // recent runs, oldest first, at most maxRunInfos

	// With a Cluster: evSub mirrors other instances' events while the
	// thread is in memory; cmdSub takes commands for the thread while this
	// instance runs or queues its runs, and after them while it may
	// (ownLocked in cluster.go).
	evSub, cmdSub *nats.Subscription
	cmdSubNew     bool   // cmdSub was just made: settleSub flushes it to the server
	cmdSubConn    uint64 // the connection's reconnect count when cmdSub was made
	evSubject     string // p.agent.events.<T>, made once

	rt runtime // state and runs (runtime.go)
}

const (
	maxRunInfos       = 32
	maxNamespacesKept = 1024
	maxSubsKept       = 4096
)

func nsKey(ns []string) string { return strings.Join(ns, "\x00") }

func newThread(f *Frontend, id string) *Thread {
	t := &Thread{
		id:      id,
		f:       f,
		buf:     ring{max: f.cfg.BufferEvents},
		latest:  map[string]uint64{},
		readers: map[*reader]struct{}{},
		room:    make(chan struct{}, 1),
		subs:    map[string]*subRec{},
	}
	t.rt.convo = convo{maxCheckpoints: f.cfg.MaxCheckpoints, maxBlockBytes: f.cfg.MaxBlockBytes, now: f.cfg.Now,
		emit: func(method string, data []byte, run string) { t.emitLocked(method, nil, data, run) }}
	return t
}

// oldest is the seq of the oldest buffered record (seq+1 when empty).
func (t *Thread) oldest() uint64 { return t.seq - uint64(t.buf.n) + 1 }

// appendLocked assigns the next seq to w, stores its frame and wakes the
// readers. t.mu must be held.
func (t *Thread) appendLocked(w *wireEvent, run string) uint64 {
	t.seq++
	rec := record{seq: t.seq, method: w.method, custom: w.custom, ns: w.namespace, frame: newFrame(t.seq, w)}
	if w.method == methodLifecycle {
		rec.run, rec.status = run, w.status
	}
	t.storeLocked(rec)
	t.publishLocked(&rec)
	return t.seq
}

// storeLocked puts a record with the next seq into the buffer, keeps the
// namespaces' latest state and the runs' statuses, and wakes the readers:
// for events appended here and those mirrored from other instances.
func (t *Thread) storeLocked(rec record) {
	t.seq = rec.seq
	if rec.method == methodValues {
		k := nsKey(rec.ns)
		t.latest[k] = t.seq
		if len(t.pinned) > 0 { // a newer state supersedes the pinned one
			t.pinned = slices.DeleteFunc(t.pinned, func(p record) bool { return nsKey(p.ns) == k })
		}
	}
	if old, ok := t.buf.push(rec); ok {
		t.evictedLocked(old)
	}
	for maxBytes := t.f.cfg.BufferBytes; t.buf.bytes > maxBytes && t.buf.n > 1; {
		t.evictedLocked(t.buf.pop())
	}
	if rec.method == methodLifecycle && rec.run != "" {
		t.noteStatus(rec.run, rec.ns, rec.status)
	}
	t.countLocked(false)
	for r := range t.readers {
		if r.notify != nil {
			r.notify()
			continue
		}
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// countLocked brings the frontend's count of buffered bytes (for
// MaxBufferBytes) up to date with buf once they differ by countStep (an
// atomic add shared by every thread per event cost the agent pair's
// throughput), or at once with exact (the buffer dropped, the thread
// idle).
func (t *Thread) countLocked(exact bool) {
	d := t.buf.bytes - t.counted
	if t.gone || d == 0 || !exact && d < countStep && d > -countStep {
		return
	}
	t.counted = t.buf.bytes
	t.f.buffered.Add(int64(d))
}

// countStep is how far a thread's buffer may drift from what the frontend
// counts of it.
const countStep = 4 << 10

// evictedLocked keeps, of a record the buffer let go, what outlives it:
// a values event that is still its namespace's current state is pinned.
func (t *Thread) evictedLocked(old record) {
	t.evicted.add(&old)
	if old.method != methodValues {
		return
	}
	k := nsKey(old.ns)
	if t.latest[k] == old.seq { // still the namespace's current state: pin it
		t.pinLocked(old)
		t.trimPinnedLocked()
	} else if t.latest[k] < old.seq {
		delete(t.latest, k)
	}
}

// restartLocked empties the buffer so that the next record stored is
// seq+1: events before it were missed (mirroring). The namespaces' latest
// states in the buffer are pinned first, so readers still get the state.
func (t *Thread) restartLocked(seq uint64) {
	for i := 0; i < t.buf.n; i++ {
		rec := t.buf.at(i)
		if rec.method != methodValues {
			continue
		}
		if t.latest[nsKey(rec.ns)] == rec.seq {
			t.pinLocked(*rec)
		}
	}
	t.trimPinnedLocked()
	t.dropBufferLocked()
	t.seq = seq
}

// dropBufferLocked empties the buffer, recording what it held as evicted.
func (t *Thread) dropBufferLocked() {
	for i := 0; i < t.buf.n; i++ {
		t.evicted.add(t.buf.at(i))
	}
	t.buf = ring{max: t.buf.max}
	t.countLocked(true)
}

// pinLocked keeps rec, a values event, as its namespace's state past the
// buffer, in place of the one pinned before.
func (t *Thread) pinLocked(rec record) {
	k := nsKey(rec.ns)
	t.pinned = slices.DeleteFunc(t.pinned, func(p record) bool { return nsKey(p.ns) == k })
	t.pinned = append(t.pinned, rec)
}

// trimPinnedLocked forgets the oldest pinned states past
// maxNamespacesKept.
func (t *Thread) trimPinnedLocked() {
	if n := len(t.pinned) - maxNamespacesKept; n > 0 {
		for _, p := range t.pinned[:n] {
			delete(t.latest, nsKey(p.ns))
		}
		t.pinned = slices.Delete(t.pinned, 0, n)
	}
}

// noteStatus records a lifecycle status for agent.getTree and reconnect.
func (t *Thread) noteStatus(run string, ns []string, status string) {
	var ri *runInfo
	for _, r := range t.runs {
		if r.id == run {
			ri = r
		}
	}
	if ri == nil {
		ri = &runInfo{id: run, status: map[string]*nsStatus{}}
		if len(t.runs) == maxRunInfos {
			t.runs = t.runs[1:]
		}
		t.runs = append(t.runs, ri)
	}
	k := nsKey(ns)
	if s := ri.status[k]; s != nil {
		s.status = status
		return
	}
	if len(ri.order) < maxNamespacesKept {
		ri.status[k] = &nsStatus{ns: ns, status: status}
		ri.order = append(ri.order, k)
	}
}

func (t *Thread) runInfo(id string) *runInfo {
	for i := len(t.runs) - 1; i >= 0; i-- {
		if id == "" || t.runs[i].id == id {
			return t.runs[i]
		}
	}
	return nil
}

// attach registers a new reader positioned after since (when hasSince;
// otherwise at the start of the buffer) and returns the records it must
// deliver first: pinned values events it has not seen. A non-nil gap means
// events after since are no longer buffered; delivery resumes from the
// oldest buffered event. Registering and choosing the position under one
// lock is what makes replay and live delivery meet with no gap and no
// duplicate. The reader is told of new events by notify when it is not
// nil (see reader), else through its wake channel.
func (t *Thread) attach(since uint64, hasSince bool, notify func()) (*reader, []record, *gap) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &reader{notify: notify}
	if notify == nil {
		r.wake = make(chan struct{}, 1)
	}
	var g *gap
	oldest := t.oldest()
	switch {
	case !hasSince:
		r.cursor = oldest - 1
		since = 0
	case since+1 < oldest:
		g = &gap{since: since, minAvail: oldest}
		r.cursor = oldest - 1
	default:
		r.cursor = since
	}
	var first []record
	for _, p := range t.pinned {
		if p.seq > since && p.seq <= r.cursor {
			first = append(first, p)
		}
	}
	t.readers[r] = struct{}{}
	return r, first, g
}

// detach unregisters a reader; a pump it held goes on.
func (t *Thread) detach(r *reader) {
	t.mu.Lock()
	delete(t.readers, r)
	t.roomLocked()
	t.mu.Unlock()
}

// roomLocked wakes the run's pump if it waits for readers.
func (t *Thread) roomLocked() {
	if t.pumpWaits {
		select {
		case t.room <- struct{}{}:
		default:
		}
	}
}

// heldLocked reports whether storing n more events, of size bytes in
// all, would evict one that a reader in the buffer has not read: one whose
// cursor is at or after the oldest event's predecessor and before the
// last event evicted. A reader behind the buffer (it is about to get a
// gap report) holds nothing; nor does a reader past the newest seq (since
// ahead).
func (t *Thread) heldLocked(n, size int) bool {
	k := t.buf.evictions(n, size, t.f.cfg.BufferBytes)
	if k == 0 {
		return false
	}
	// The evicted are seqs oldest .. oldest+k-1: each reader must have
	// read them all.
	floor := t.oldest() - 1 + uint64(k)
	for r := range t.readers {
		if r.cursor+1 >= t.oldest() && r.cursor < floor {
			return true
		}
	}
	return false
}

// awaitRoomLocked is where a run's pump waits, before storing up to n
// events of about size bytes in all, for the readers it would otherwise
// overtake (backpressure, in place of a gap report to a live reader).
// t.mu is held, and released while waiting: readers advance under it. A
// reader that stops reading is cut off by its write deadline
// (WriteTimeout; a WebSocket's by internal/wsconn) and detached, so the
// wait is bounded; it ends at once when ctx, the run's, ends (cancel,
// Close). More than the buffer's events or bytes cannot all be kept for
// anyone: the pump then waits for the readers to have read the whole
// buffer, no more.
func (t *Thread) awaitRoomLocked(ctx context.Context, n, size int) {
	for t.heldLocked(n, size) && ctx.Err() == nil {
		t.pumpWaits = true
		t.mu.Unlock()
		select {
		case <-t.room:
		case <-ctx.Done():
		}
		t.mu.Lock()
		t.pumpWaits = false
	}
}

// read appends to out up to max more records after r's cursor that match, and
// advances the cursor past every record it looked at. A non-nil gap means
// the reader fell behind the buffer (it is moved to the oldest event).
func (t *Thread) read(r *reader, match func(*record) bool, max int, out []record) ([]record, *gap) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var g *gap
	oldest := t.oldest()
	if r.cursor+1 < oldest {
		g = &gap{since: r.cursor, minAvail: oldest}
		for _, p := range t.pinned { // the current state it missed
			if p.seq > r.cursor && match(&p) {
				out = append(out, p)
			}
		}
		r.cursor = oldest - 1
	}
	limit := len(out) + max
	for r.cursor < t.seq && len(out) < limit {
		rec := t.buf.at(int(r.cursor + 1 - oldest))
		r.cursor++
		if match(rec) {
			out = append(out, *rec)
		}
	}
	t.roomLocked()
	return out, g
}

// replay appends the buffered records (pinned ones first) with seq in
// (after, upTo] that match.
func (t *Thread) replayLocked(after, upTo uint64, match func(*record) bool, out []record) []record {
	for _, p := range t.pinned {
		if p.seq > after && p.seq <= upTo && match(&p) {
			out = append(out, p)
		}
	}
	for i := 0; i < t.buf.n; i++ {
		rec := t.buf.at(i)
		if rec.seq > upTo {
			break
		}
		if rec.seq > after && match(rec) {
			out = append(out, *rec)
		}
	}
	return out
}

// addSubLocked registers a live subscription; false when the thread holds
// too many (MaxSubscriptions per connection bounds each connection; this
// bounds connections that come and go).
func (t *Thread) addSubLocked(id string, f *filter, owner *wsConn, now time.Time) bool {
	if len(t.subs) >= maxSubsKept {
		for k, v := range t.subs {
			if v.owner == nil && now.After(v.expires) {
				delete(t.subs, k)
			}
		}
		if len(t.subs) >= maxSubsKept {
			return false
		}
	}
	t.subs[id] = &subRec{f: f, owner: owner}
	return true
}

// releaseSubs keeps a closed connection's subscriptions for reconnect.
func (t *Thread) releaseSubs(owner *wsConn, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.subs {
		if v.owner == owner {
			v.owner, v.expires = nil, now.Add(t.f.cfg.SubscriptionKeep)
		} else if v.owner == nil && now.After(v.expires) {
			delete(t.subs, k)
		}
	}
}
