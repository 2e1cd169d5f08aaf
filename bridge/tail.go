package bridge

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

const (
	// tailWindow and tailBytes bound the thread's latest events an
	// instance keeps for the thread's observers (the newest is kept
	// whatever its size); one behind them reads the replay log.
	tailWindow = 4096
	tailBytes  = 4 << 20
	// tailsBytes is what all of an instance's tails keep, shared out
	// among them (tailBytesNow), each keeping at least tailMinBytes: the
	// more threads observed, the fewer events each keeps, and the more
	// its readers read from the log.
	tailsBytes   = 256 << 20
	tailMinBytes = 16 << 10
	// catchUpEvents bounds one read of the replay log for an observer
	// behind the window, so a replay from the start of a long thread holds
	// at most this many events at a time.
	catchUpEvents = 1024
	// tailOpenTimeout bounds the opening of a tail (a read of the log's
	// last message, a consumer, a subscription).
	tailOpenTimeout = 10 * time.Second
	// catchUpPatience is how long a reader behind the window tries again
	// a replay log it cannot read (readLog).
	catchUpPatience = 30 * time.Second
	// feedStopWait is how long the follower waits for its feed to stop
	// by itself before it stops the feed's iterator from outside.
	feedStopWait = 5 * time.Second
)

// threadTail is a thread's live events on this instance, shared by every
// observer of the thread here: the instance's log follower (logFollower)
// hands it the thread's events as the replay log stores them, and it has
// one heartbeat subscription, however many observers. It keeps the
// thread's latest events (tailWindow);
// an observer behind them, a replay or a slow reader, reads the log in
// bounded steps until it reaches them, so a slow reader is never cut off
// while the log holds what it lacks. The events come from the log only, as
// stored, so an observer never sees an event the log may not give again.
type threadTail struct {
	b       *Bridge
	thread  string
	timeout time.Duration // nats.owner_timeout
	refs    int           // observers; guarded by b.tailsMu

	ready   chan struct{} // closed when open has ended, openErr saying how
	openErr error

	hbSub *nats.Subscription
	hb    chan *nats.Msg
	stop  chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	win     window
	last    uint64 // the highest seq held; 0 before the first
	err     error  // the live feed's end, for readers that have the window
	runs    map[string]*observedRun
	readers map[*tailReader]struct{}
}

type observedRun struct {
	id       string
	guard    canonical.Guard
	lastSeen time.Time
}

// tailReader is one observer's place in its thread's events.
type tailReader struct {
	next  uint64 // the seq it reads next
	since uint64 // what it asked for: the events after since
	// logNext is the replay-log message its next catch-up read starts at.
	logNext uint64
	// backlog is what the last catch-up read gave and r has not taken
	// (seqs up to next-1); then err, a hole that read found.
	backlog []*canonical.Event
	err     error
	// notify is called, under the tail's lock, when events or the feed's
	// end arrive: it must not block or call the tail.
	notify func()
}

// attachTail returns the thread's tail, opened if no observer here has it,
// counting one more observer of it. The observer that opens it holds its
// count meanwhile, so one that stops waiting cannot close it half open.
func (b *Bridge) attachTail(ctx context.Context, thread string) (*threadTail, error) {
	b.tailsMu.Lock()
	t := b.tails[thread]
	opener := t == nil
	if opener {
		t = &threadTail{b: b, thread: thread, ready: make(chan struct{})}
		b.tails[thread] = t
		b.tailCount.Add(1)
	}
	t.refs++
	b.tailsMu.Unlock()
	if opener {
		// Not ctx's end: observers waiting for the tail share the opening.
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tailOpenTimeout)
		t.openErr = t.open(octx)
		cancel()
		if t.openErr != nil {
			b.forgetTail(t)
		}
		close(t.ready)
	} else {
		select {
		case <-t.ready:
		case <-ctx.Done():
			b.detachTail(t)
			return nil, canonical.AsError(ctx.Err())
		}
	}
	if t.openErr != nil {
		b.detachTail(t)
		return nil, t.openErr
	}
	return t, nil
}

// detachTail counts one observer less of t, and closes t after the last.
func (b *Bridge) detachTail(t *threadTail) {
	b.tailsMu.Lock()
	t.refs--
	last := t.refs == 0
	if last {
		b.unshareLocked(t)
	}
	b.tailsMu.Unlock()
	if last && t.openErr == nil {
		t.close()
	}
}

// forgetTail takes t out of the tails to share (it failed to open, or
// its feed ended): the next observer of the thread opens a new one.
func (b *Bridge) forgetTail(t *threadTail) {
	b.tailsMu.Lock()
	b.unshareLocked(t)
	b.tailsMu.Unlock()
}

// unshareLocked takes t out of b.tails, if it is still there, and out of
// their count. b.tailsMu is held.
func (b *Bridge) unshareLocked(t *threadTail) {
	if b.tails[t.thread] == t {
		delete(b.tails, t.thread)
		b.tailCount.Add(-1)
	}
}

// tailBytesNow is the bytes of events each tail keeps now: its share of
// tailsBytes, within tailMinBytes and tailBytes. A window is trimmed to
// it as events come, so the tails' sum follows their number.
func (b *Bridge) tailBytesNow() int {
	return min(tailBytes, max(tailMinBytes, tailsBytes/max(int(b.tailCount.Load()), 1)))
}

// open joins the instance's log follower, then reads the thread's last
// message in the log, which it holds from the start (the follower hands it
// every later one, and may hand it that one too: add keeps one of each
// seq), and subscribes to the thread's heartbeats.
func (t *threadTail) open(ctx context.Context) error {
	b := t.b
	cfg := b.cluster.cfg
	if !b.cluster.started { // a bridge outside the cluster: the defaults
		c := Config{}
		c.Defaults()
		cfg = c.NATS
	}
	t.timeout = cfg.OwnerTimeout
	t.runs, t.readers = map[string]*observedRun{}, map[*tailReader]struct{}{}
	t.hb, t.stop = make(chan *nats.Msg, 64), make(chan struct{})
	if err := b.follower.register(ctx, t); err != nil {
		return err
	}
	lastMsg, err := b.fabric.lastThreadMsg(ctx, t.thread)
	switch {
	case err != nil:
		b.follower.unregister(t)
		return b.replayLogError(err)
	case lastMsg != nil:
		if evs, err := DecodeEvents(lastMsg.Data); err == nil {
			t.add(evs, len(lastMsg.Data)/max(len(evs), 1))
		}
	}
	if t.hbSub, err = b.fabric.Conn().ChanSubscribe(b.subject("hb", subject.Token(t.thread), "*"), t.hb); err != nil {
		b.follower.unregister(t)
		return natsFailure(b.log, canonical.CodeUnavailable, "the thread's live events could not be subscribed to", err)
	}
	t.wg.Add(1)
	go t.watch()
	return nil
}

// end ends the live feed with err: each reader gets it once it has the
// window, and the next observer of the thread opens a new tail.
func (t *threadTail) end(err error) {
	t.b.forgetTail(t)
	t.mu.Lock()
	t.err = err
	t.notifyLocked()
	t.mu.Unlock()
}

// watch keeps the thread's runs' heartbeats and ends the runs whose owner
// has gone quiet.
func (t *threadTail) watch() {
	defer t.wg.Done()
	// A quarter timeout: a silent owner's runs end within 1.75 timeouts
	// of its last sign of life (expire waits 1.5).
	tick := time.NewTicker(t.timeout / 4)
	defer tick.Stop()
	ticked := time.Now()
	for {
		select {
		case m := <-t.hb:
			t.mu.Lock()
			if r := t.runs[lastToken(m.Subject)]; r != nil {
				r.lastSeen = t.b.now()
			}
			t.mu.Unlock()
		case <-tick.C:
			if late := time.Since(ticked) > t.timeout*3/4; late {
				// This instance was not running (paused, or starved): the
				// owners' heartbeats of that time may still be on their
				// way in, and its silence is not theirs.
				t.heardAll()
			} else {
				t.expire()
			}
			ticked = time.Now()
		case <-t.stop:
			return
		}
	}
}

// add appends the thread's events, of about size bytes each, to the
// window, after what it holds: an
// event at or before its last is one it has (an end made here that the
// log then gave too); one past the next starts the window again, and the
// readers that had the last read the hole from the log and report it.
func (t *threadTail) add(evs []*canonical.Event, size int) {
	now, bound := t.b.now(), t.b.tailBytesNow()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ev := range evs {
		seq := ev.GetSeq()
		if t.last != 0 && seq <= t.last {
			continue
		}
		if seq != t.last+1 {
			t.win.reset()
		}
		t.win.push(ev, size, bound)
		t.last = seq
		t.track(ev, now)
	}
	t.notifyLocked()
}

func (t *threadTail) notifyLocked() {
	for r := range t.readers {
		r.notify()
	}
}

// track keeps ev's run among the thread's runs until it ends.
func (t *threadTail) track(ev *canonical.Event, now time.Time) {
	id := subject.Token(ev.GetRunId())
	r := t.runs[id]
	if r == nil {
		r = &observedRun{id: ev.GetRunId()}
		t.runs[id] = r
	}
	r.lastSeen = now
	_ = r.guard.Observe(ev)
	if r.guard.Ended() {
		delete(t.runs, id)
	}
}

// heardAll counts every run of the thread as heard from now.
func (t *threadTail) heardAll() {
	now := t.b.now()
	t.mu.Lock()
	for _, r := range t.runs {
		r.lastSeen = now
	}
	t.mu.Unlock()
}

// expire ends the runs whose owner has gone quiet. The end is appended
// to the replay log (endQuiet), as the run's client does when it finds
// the owner quiet for the timeout (remoteStream.ownerGone): a run whose
// client is the owner itself, or is gone, has nobody else to end it.
func (t *threadTail) expire() {
	now := t.b.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	heard := t.b.fabric.heardSince()
	if heard.IsZero() {
		return // NATS is down here: the owners' silence is not theirs
	}
	for id, r := range t.runs {
		// Silence counts from the run's last sign of life, or from this
		// instance's last reconnect: an outage of its own connection is
		// no owner's silence. Half a timeout more than a client waits,
		// so the client's end, when it has one elsewhere, comes first.
		if now.Sub(latest(r.lastSeen, heard)) < t.timeout+t.timeout/2 {
			continue
		}
		delete(t.runs, id) // r is endQuiet's alone now
		t.wg.Add(1)        // watch, which calls expire, is counted: close waits
		go t.endQuiet(r, t.last)
	}
}

// endQuiet appends the events that end r's run to the replay log after
// the thread's last, unless the log already ends the run. They finish
// what the run left open as the log holds it (the tail may have opened
// after the run started), reach the observers from the log, under the
// seqs every reader sees, and a later run of the thread numbers after
// them. The owner, should it be only paused or cut off, then writes
// nothing more of the thread (its writes expect its own last message,
// logchain.go), so the log keeps one history. Only when the log cannot be
// written, or lacks events the tail gave (seen, the tail's last: their
// seqs are taken), is the run ended here alone, after every seq the tail
// holds.
func (t *threadTail) endQuiet(r *observedRun, seen uint64) {
	defer t.wg.Done()
	run := r.id
	// A timeout for reading the run, one for appending its end.
	ctx, cancel := context.WithTimeout(context.Background(), 2*t.timeout)
	defer cancel()
	go func() {
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	g := &r.guard
	rctx, rcancel := context.WithTimeout(ctx, t.timeout)
	if lg, err := t.b.fabric.runGuard(rctx, t.thread, run); err == nil {
		g = lg
	}
	rcancel()
	ended := g.End(nil, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "run owner sent neither event nor heartbeat for %s", t.timeout))
	_, err := t.b.appendEnd(ctx, t.thread, run, ended, seen)
	if err == nil || errors.Is(err, errRunEnded) || isReady(t.stop) {
		return
	}
	t.b.log.Warn("run end not appended to the replay log; ending it for this instance's observers", "thread", t.thread, "run", run, "err", err)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.stampOrphanEnd(ended, t.thread, run, t.last)
	t.win.reset() // the window's seqs are consecutive: readers skip to the end from the log (read)
	for _, ev := range ended {
		t.win.push(ev, proto.Size(ev), t.b.tailBytesNow())
	}
	if n := len(ended); n > 0 {
		t.last = ended[n-1].GetSeq()
	}
	// Its readers have these seqs now: no later run gives them again.
	t.b.fabric.NoteLastSeq(t.thread, t.last)
	t.notifyLocked()
}

// window is a tail's latest events, seqs consecutive, oldest first: at
// most tailWindow of them and the bytes of encodings push is given, the
// newest kept whatever its size.
type window struct {
	evs   []*canonical.Event
	sizes []int
	head  int // evs[:head] have left
	bytes int
}

func (w *window) len() int { return len(w.evs) - w.head }

func (w *window) reset() {
	clear(w.evs)
	w.evs, w.sizes, w.head, w.bytes = w.evs[:0], w.sizes[:0], 0, 0
}

// push appends ev, of size bytes, and lets go of the oldest past
// tailWindow events or maxBytes; the arrays are compacted once half of
// them has left.
func (w *window) push(ev *canonical.Event, size, maxBytes int) {
	w.evs, w.sizes = append(w.evs, ev), append(w.sizes, size)
	w.bytes += size
	for w.len() > 1 && (w.len() > tailWindow || w.bytes > maxBytes) {
		w.evs[w.head] = nil
		w.bytes -= w.sizes[w.head]
		w.head++
	}
	if w.head >= 64 && w.head >= len(w.evs)/2 {
		n := copy(w.evs, w.evs[w.head:])
		clear(w.evs[n:])
		copy(w.sizes, w.sizes[w.head:])
		w.evs, w.sizes, w.head = w.evs[:n], w.sizes[:n], 0
	}
}

// slice is n events from the i-th held.
func (w *window) slice(i, n int) []*canonical.Event { return w.evs[w.head+i : w.head+i+n] }

// empty reports whether the tail holds no event: the replay log had none
// of the thread when it opened, and none came since.
func (t *threadTail) empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last == 0
}

// attach registers a reader of the events after since.
func (t *threadTail) attach(since uint64, notify func()) *tailReader {
	r := &tailReader{next: since + 1, since: since, notify: notify}
	t.mu.Lock()
	t.readers[r] = struct{}{}
	t.mu.Unlock()
	return r
}

func (t *threadTail) detach(r *tailReader) {
	t.mu.Lock()
	delete(t.readers, r)
	t.mu.Unlock()
}

// read appends to out the events r has not read, at most max, without
// waiting for new ones: from the window, or from the replay log while r
// is behind it. An error ends r: a hole in what it reads (hole), or the
// live feed's end once r has every event held.
func (t *threadTail) read(ctx context.Context, r *tailReader, out []*canonical.Event, max int) ([]*canonical.Event, error) {
	if len(r.backlog) > 0 {
		n := min(max, len(r.backlog))
		out = append(out, r.backlog[:n]...)
		clear(r.backlog[:n])
		r.backlog = r.backlog[n:]
		return out, nil
	}
	if r.err != nil {
		return out, r.err
	}
	t.mu.Lock()
	first := t.last + 1 - uint64(t.win.len())
	if r.next < first && t.win.len() > 0 && canonical.Follows(t.win.evs[t.win.head], r.next-1) {
		r.next = first // r has every event before the seqs the window's first skips
	}
	if t.win.len() == 0 || r.next >= first {
		if t.win.len() > 0 && r.next <= t.last {
			n := min(uint64(max), t.last-r.next+1)
			out = append(out, t.win.slice(int(r.next-first), int(n))...)
			r.next += n
			t.mu.Unlock()
			return out, nil
		}
		err := t.err
		t.mu.Unlock()
		return out, err
	}
	t.mu.Unlock()
	return t.catchUp(ctx, r, first, out, max)
}

// catchUp reads from the replay log the events r lacks before the window,
// which starts at seq before, at most catchUpEvents at a time, into r's
// backlog, and reads on from there.
func (t *threadTail) catchUp(ctx context.Context, r *tailReader, before uint64, out []*canonical.Event, max int) ([]*canonical.Event, error) {
	evs, next, err := t.readLog(ctx, r, before)
	if err != nil {
		if ctx.Err() != nil {
			return out, canonical.AsError(ctx.Err())
		}
		return out, t.b.replayLogError(err)
	}
	r.logNext = next
	r.backlog = r.backlog[:0]
	for _, ev := range evs {
		if !canonical.Follows(ev, r.next-1) {
			if r.err = t.hole(ctx, r, ev.GetSeq()); r.err != nil {
				break
			}
		}
		r.backlog = append(r.backlog, ev)
		r.next = ev.GetSeq() + 1
	}
	if len(evs) == 0 && r.next < before {
		// The log has nothing more before the window.
		if r.err = t.hole(ctx, r, before); r.err == nil {
			r.next = before
		}
	}
	return t.read(ctx, r, out, max)
}

// readLog reads r's next catch-up step from the replay log. A log that
// cannot be read is tried again for up to catchUpPatience: a step needs a
// consumer of its own, and JetStream's API is away while NATS reconnects
// or, a node lost, until a leader is elected (the tail's own consumer
// waits that out too). The stream's consumer limit is not waited for.
func (t *threadTail) readLog(ctx context.Context, r *tailReader, before uint64) ([]*canonical.Event, uint64, error) {
	span := logSpan{start: r.logNext, after: r.next - 1, before: before, max: catchUpEvents}
	deadline := t.b.now().Add(catchUpPatience)
	for {
		evs, next, err := t.b.fabric.readThreadLog(ctx, t.thread, span)
		if err == nil || ctx.Err() != nil || t.b.now().After(deadline) || errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
			return evs, next, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(fillRetry):
		}
	}
}

// hole reports the events missing before seq, the next the log holds
// after what r has. A thread's seqs are consecutive in the log but for
// the seqs an orphaned run's end says it skips (canonical.Follows, read
// as no hole), so a jump means the log has let go of events (they aged
// out, replay_max_age, or were discarded for replay_max_bytes, oldest
// first) or never got them (a write given up on). The reader is told rather than given the events
// around the hole as if they followed each other: out_of_range when the
// log holds none of the thread's events before seq (it let them go; a
// reader that fell behind meets this too), data_loss when it holds
// earlier ones. A replay from the start (since 0) begins with the oldest
// event the log holds.
func (t *threadTail) hole(ctx context.Context, r *tailReader, seq uint64) error {
	fresh := r.next == r.since+1 // nothing read yet
	if fresh && r.since == 0 {
		return nil
	}
	if !fresh {
		if oldest, err := t.b.fabric.oldestSeq(ctx, t.thread); err != nil || oldest < seq {
			return canonical.Errorf(canonical.CodeDataLoss, "the replay log lacks the thread's events %d to %d", r.next, seq-1)
		}
	}
	return canonical.Errorf(canonical.CodeOutOfRange, "the replay log no longer holds the thread's events %d to %d (nats.replay_max_age, nats.replay_max_bytes): the oldest after %d is %d", r.next, seq-1, r.next-1, seq)
}

// close stops the heartbeats and leaves the log follower.
func (t *threadTail) close() {
	close(t.stop)
	_ = t.hbSub.Unsubscribe()
	t.wg.Wait()
	t.b.follower.unregister(t)
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
