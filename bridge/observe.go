package bridge

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Observe streams a thread's events from the replay log, those after seq
// since first, then live ones, on any instance. It never ends by itself;
// Close it, or end ctx: either gives back its API key's observer slot, and
// the last observer of the thread here closes the thread's tail
// (tail.go), deleting its replay-log consumer. A run of the thread whose
// owner stops sending events and heartbeats ends with failed
// (unavailable): with the end its client appended to the log, or after
// 1.5 × nats.owner_timeout with one made here. The caller's API key may
// hold max_observers observers at once. The events are shared with the
// thread's other observers: read them, do not change them.
func (b *Bridge) Observe(ctx context.Context, threadID string, since uint64) (canonical.Stream, error) {
	if b.fabric == nil {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "no fabric to observe from")
	}
	if err := b.CheckThread(ctx, threadID); err != nil {
		return nil, err
	}
	release, err := b.admitObserver(canonical.PrincipalFrom(ctx))
	if err != nil {
		return nil, err
	}
	o, err := b.observe(ctx, threadID, since, release)
	if err != nil {
		release()
		return nil, err
	}
	return o, nil
}

// observe opens an observer of the thread's tail; release runs when it
// ends.
func (b *Bridge) observe(ctx context.Context, threadID string, since uint64, release func()) (*observer, error) {
	t, err := b.attachTail(ctx, threadID)
	if err != nil {
		return nil, err
	}
	if err := b.checkGone(ctx, t, since); err != nil {
		b.detachTail(t)
		return nil, err
	}
	o := &observer{ctx: ctx, tail: t, wake: make(chan struct{}, 1), done: make(chan struct{}), release: release}
	o.r = t.attach(since, o.notify)
	o.stopOnCancel = context.AfterFunc(ctx, o.shut)
	return o, nil
}

// checkGone refuses a replay after since of a thread whose events after
// since the replay log has let go of all of (its last seq, kept in the
// thread's floor, is past since, and the log holds none of its events): a
// reader behind the events the log holds learns so from the first it
// reads (tail.go hole), but here there is none to read until the thread's
// next run. A floor is written as a run ends, off its path, and may come
// before the run's last events reach the log (they go with acknowledged
// publishes): until floorInFlight after it was written, the log is looked
// at again for them.
func (b *Bridge) checkGone(ctx context.Context, t *threadTail, since uint64) error {
	if since == 0 || !t.empty() {
		return nil
	}
	floor, at, err := b.fabric.floors.readAt(ctx, t.thread)
	if err != nil {
		return natsFailure(b.log.With("thread", t.thread), canonical.CodeUnavailable, "the thread's last seq could not be read", err)
	}
	if floor <= since {
		return nil
	}
	for {
		m, err := b.fabric.lastThreadMsg(ctx, t.thread)
		switch {
		case err != nil:
			return b.replayLogError(err)
		case m != nil:
			return nil // they were on their way: the tail has them from the log
		case time.Since(at) > floorInFlight:
			return canonical.Errorf(canonical.CodeOutOfRange, "the replay log no longer holds the thread's events %d to %d (nats.replay_max_age, nats.replay_max_bytes), nor any later", since+1, floor)
		}
		select {
		case <-ctx.Done():
			return canonical.AsError(ctx.Err())
		case <-time.After(fillRetry):
		}
	}
}

// floorInFlight is how long after a thread's floor was written its run's
// last events may still be on their way to the replay log (checkGone):
// they are queued before the floor is noted and stored within an
// acknowledgement's time (logAckTimeout) unless NATS is in trouble, when
// a reader that waits for them meets the hole as it would have before.
const floorInFlight = 5 * time.Second

// replayLogError is the error for a consumer the replay log would not
// make: ResourceExhausted for its consumer limit (JetStream's 1,000 per
// stream by default, which every key and instance share), else Unavailable.
func (b *Bridge) replayLogError(err error) *canonical.Error {
	if errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		return natsFailure(b.log, canonical.CodeResourceExhausted, "the replay log has as many readers as it takes (observers of every key on every instance)", err)
	}
	return natsFailure(b.log, canonical.CodeUnavailable, "the replay log could not be read", err)
}

const (
	// observerInactiveThreshold is how long the server keeps the log
	// follower's consumer when nobody pulls from it; a live feed always
	// has a pull pending, so only one whose deletion failed reaches it.
	observerInactiveThreshold = 10 * time.Second
	// consumerDeleteTimeout bounds a wait for the follower's consumer's
	// deletion.
	consumerDeleteTimeout = 2 * time.Second
	// observerBatch is how many events an observer takes from its tail at
	// a time.
	observerBatch = 256
)

// observer is one reader of a thread's tail, as a canonical.Stream.
type observer struct {
	ctx     context.Context
	tail    *threadTail
	r       *tailReader
	wake    chan struct{} // a token when the tail has news
	done    chan struct{} // closed by shut
	owed    []*canonical.Event
	next    int   // owed[next] is the next event Recv returns
	err     error // after what is owed
	once    sync.Once
	release func() // gives back the API key's observer slot
	// onReady, when set (Notify), is called in place of signalling wake.
	onReady atomic.Pointer[func()]
	// stopOnCancel unregisters shut from the Observe context.
	stopOnCancel func() bool
}

func (o *observer) notify() {
	if f := o.onReady.Load(); f != nil {
		(*f)()
		return
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Notify implements canonical.Poller.
func (o *observer) Notify(f func()) { o.onReady.Store(&f) }

// Poll implements canonical.Poller.
func (o *observer) Poll(out []*canonical.Event, max int) ([]*canonical.Event, error) {
	if err := o.ctx.Err(); err != nil {
		return out, canonical.AsError(err)
	}
	select {
	case <-o.done:
		return out, io.EOF
	default:
	}
	return o.tail.read(o.ctx, o.r, out, max)
}

// LastSeq implements canonical.Observer.
func (b *Bridge) LastSeq(ctx context.Context, thread string) (uint64, error) {
	if b.fabric == nil {
		return 0, canonical.Errorf(canonical.CodeUnavailable, "no fabric to observe from")
	}
	if err := b.CheckThread(ctx, thread); err != nil {
		return 0, err
	}
	last, err := b.fabric.LastSeq(ctx, thread)
	if err != nil {
		return 0, natsFailure(b.log.With("thread", thread), canonical.CodeUnavailable, "the thread's last seq could not be read from the replay log", err)
	}
	return last, nil
}

// Recv implements canonical.Stream.
func (o *observer) Recv() (*canonical.Event, error) {
	for o.next == len(o.owed) {
		if o.err != nil {
			return nil, o.err
		}
		clear(o.owed)
		o.owed, o.err = o.Poll(o.owed[:0], observerBatch)
		o.next = 0
		if len(o.owed) > 0 || o.err != nil {
			continue
		}
		select {
		case <-o.wake:
		case <-o.ctx.Done():
		case <-o.done:
		}
	}
	ev := o.owed[o.next]
	o.next++
	return ev, nil
}

// Close implements canonical.Stream. It detaches from the tail and gives
// back the key's observer slot, as the end of the Observe context does.
func (o *observer) Close() error {
	o.stopOnCancel()
	o.shut()
	return nil
}

// shut is Close's work, once, from Close or when the Observe context ends.
func (o *observer) shut() {
	o.once.Do(func() {
		close(o.done)
		o.tail.detach(o.r)
		o.tail.b.detachTail(o.tail)
		o.release()
	})
}

func lastToken(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}
