package bridge

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// Observe streams a thread's events from the replay log, those after seq
// since first, then live ones, on any instance. It never ends by itself;
// Close it, or end ctx: either deletes its replay-log consumer and ends its
// goroutines. A run of the thread whose owner stops sending events and
// heartbeats ends with failed (unavailable): with the end its client
// appended to the log, or after twice nats.owner_timeout with one made
// here. The caller's API key may hold max_observers observers at once.
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
	o, err := b.openObserver(ctx, threadID, since)
	if err != nil {
		release()
		return nil, err
	}
	o.release = release
	o.stopOnCancel = context.AfterFunc(ctx, o.shut)
	return o, nil
}

// openObserver subscribes to the thread's replay log and heartbeats and
// starts the read loop.
func (b *Bridge) openObserver(ctx context.Context, threadID string, since uint64) (*observer, error) {
	cfg := b.cluster.cfg
	if !b.cluster.started { // a bridge outside the cluster: the defaults
		c := Config{}
		c.Defaults()
		cfg = c.NATS
	}
	cons, err := b.fabric.JetStream().OrderedConsumer(ctx, EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.fabric.ThreadSubjects(threadID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		// A backstop for a consumer Close could not delete (NATS
		// unreachable then): the server drops it once nobody pulls.
		InactiveThreshold: observerInactiveThreshold,
	})
	if err != nil {
		return nil, b.replayLogError(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		b.deleteObserverConsumer(cons, threadID)
		return nil, b.replayLogError(err)
	}
	o := &observer{
		b: b, ctx: ctx, cons: cons, it: it, thread: threadID, since: since, timeout: cfg.OwnerTimeout,
		events: make(chan *canonical.Event, cfg.RemoteBuffer), hb: make(chan *nats.Msg, 64),
		done: make(chan struct{}), runs: map[string]*observedRun{},
	}
	if o.hbSub, err = b.fabric.Conn().ChanSubscribe(b.subject("hb", subject.Token(threadID), "*"), o.hb); err != nil {
		it.Stop()
		b.deleteObserverConsumer(cons, threadID)
		return nil, natsFailure(b.log, canonical.CodeUnavailable, "the thread's live events could not be subscribed to", err)
	}
	o.wg.Add(1)
	go o.readLoop()
	return o, nil
}

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
	// observerInactiveThreshold is how long the server keeps an observer's
	// consumer that nobody pulls from; a live observer always has a pull
	// pending, so only one whose deletion failed reaches it.
	observerInactiveThreshold = 10 * time.Second
	// consumerDeleteTimeout bounds Close's wait for the consumer's deletion.
	consumerDeleteTimeout = 2 * time.Second
)

type observedRun struct {
	id       string
	guard    canonical.Guard
	lastSeen time.Time
}

// observer is a thread's event stream fed from the replay log.
type observer struct {
	b         *Bridge
	ctx       context.Context
	cons      jetstream.Consumer
	it        jetstream.MessagesContext
	hbSub     *nats.Subscription
	hb        chan *nats.Msg
	events    chan *canonical.Event
	done      chan struct{}
	wg        sync.WaitGroup
	thread    string
	since     uint64
	threadSeq uint64 // the highest seq of the thread read or made here
	broken    error  // a hole in the log: Recv returns it after what it owes
	timeout   time.Duration
	err       atomic.Pointer[canonical.Error]

	runs map[string]*observedRun // by subject token of the run id
	owed []*canonical.Event

	once         sync.Once
	release      func()      // gives back the API key's observer slot
	stopOnCancel func() bool // unregisters shut from the Observe context
}

// readLoop moves replay-log messages into the bounded events channel.
func (o *observer) readLoop() {
	defer o.wg.Done()
	defer close(o.events)
	for {
		m, err := o.it.Next()
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				o.err.Store(natsFailure(o.b.log.With("thread", o.thread), canonical.CodeUnavailable, "the replay log could not be read", err))
			}
			return
		}
		evs, err := DecodeEvents(m.Data())
		if err != nil {
			continue // not ours to judge; the owner's client saw it
		}
		for _, ev := range evs {
			select {
			case o.events <- ev:
			default:
				o.err.Store(canonical.Errorf(canonical.CodeResourceExhausted, "observer fell behind by %d events (nats.remote_buffer)", cap(o.events)))
				return
			case <-o.done:
				return
			}
		}
	}
}

// Recv implements canonical.Stream.
func (o *observer) Recv() (*canonical.Event, error) {
	tick := time.NewTicker(o.timeout / 2)
	defer tick.Stop()
	for len(o.owed) == 0 {
		if o.broken != nil {
			return nil, o.broken
		}
		select {
		case ev, ok := <-o.events:
			if !ok {
				return nil, o.endErr()
			}
			o.track(ev)
		case m := <-o.hb:
			if r := o.runs[lastToken(m.Subject)]; r != nil {
				r.lastSeen = o.b.now()
			}
		case <-tick.C:
			o.expire()
		case <-o.ctx.Done():
			return nil, canonical.AsError(o.ctx.Err())
		case <-o.done:
			return nil, o.endErr()
		}
	}
	ev := o.owed[0]
	o.owed = o.owed[1:]
	return ev, nil
}

// endErr is why the stream ended: the Observe context's end (which shuts
// the observer, so it can show as the events' end), the read loop's error,
// or io.EOF after Close.
func (o *observer) endErr() error {
	if err := o.ctx.Err(); err != nil {
		return canonical.AsError(err)
	}
	if e := o.err.Load(); e != nil {
		return e
	}
	return io.EOF
}

// track records ev's run and passes ev on unless it is at or before since.
func (o *observer) track(ev *canonical.Event) {
	id := subject.Token(ev.GetRunId())
	r := o.runs[id]
	if r == nil {
		r = &observedRun{id: ev.GetRunId()}
		o.runs[id] = r
	}
	r.lastSeen = o.b.now()
	prev := o.threadSeq
	o.threadSeq = max(o.threadSeq, ev.GetSeq())
	_ = r.guard.Observe(ev)
	if r.guard.Ended() {
		delete(o.runs, id)
	}
	if ev.GetSeq() > o.since && o.broken == nil {
		if o.broken = o.hole(prev, ev.GetSeq()); o.broken == nil {
			o.owed = append(o.owed, ev)
		}
	}
}

// hole reports the events missing before seq, the next to pass on, when
// the thread's highest seq so far is prev (past since: the last passed
// on, or made here by expire). A thread's seqs are consecutive in the
// log, so a jump means the log has let go of events (they aged out,
// replay_max_age, or were discarded for replay_max_bytes, oldest first)
// or never got them (a write given up on). The reader is told rather than
// given the events around the hole as if they followed each other. A
// replay from the start (since 0) begins with the oldest event the log
// holds.
func (o *observer) hole(prev, seq uint64) error {
	switch {
	case prev <= o.since && o.since > 0 && seq > o.since+1:
		return canonical.Errorf(canonical.CodeOutOfRange, "the replay log no longer holds the thread's events %d to %d (nats.replay_max_age, nats.replay_max_bytes): the oldest after %d is %d", o.since+1, seq-1, o.since, seq)
	case prev > o.since && seq > prev+1:
		return canonical.Errorf(canonical.CodeDataLoss, "the replay log lacks the thread's events %d to %d", prev+1, seq-1)
	}
	return nil
}

// expire ends the runs whose owner has gone quiet.
func (o *observer) expire() {
	now := o.b.now()
	for id, r := range o.runs {
		if now.Sub(r.lastSeen) < 2*o.timeout {
			continue
		}
		// The run's client appends its end to the log when the owner goes
		// quiet for the timeout (remoteStream.ownerGone), and it reaches
		// this observer from there, under the seq every reader sees. An
		// observer appends nothing: what it reads is the log, which may
		// have lost a run's last events (a replay stream without a leader
		// stores nothing), and seqs after its end may be taken. A run
		// still without an end after twice the timeout ends here alone.
		delete(o.runs, id)
		if o.broken != nil {
			continue
		}
		ended := r.guard.End(nil, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "run owner sent neither event nor heartbeat for %s", o.timeout))
		// After every seq of the thread delivered, not only the run's.
		o.owed = append(o.owed, stampEnd(ended, o.thread, r.id, o.threadSeq, now)...)
		o.threadSeq += uint64(len(ended))
		// Its reader has these seqs now: no later run gives them again.
		o.b.fabric.NoteLastSeq(o.thread, o.threadSeq)
	}
}

// Close implements canonical.Stream. It ends the read loop, deletes the
// replay-log consumer and gives back the key's observer slot, as the end of
// the Observe context does.
func (o *observer) Close() error {
	o.stopOnCancel()
	o.shut()
	return nil
}

// shut is Close's work, once, from Close or when the Observe context ends.
func (o *observer) shut() {
	o.once.Do(func() {
		close(o.done)
		o.it.Stop()
		_ = o.hbSub.Unsubscribe()
		o.wg.Wait()
		o.b.deleteObserverConsumer(o.cons, o.thread)
		o.release()
	})
}

// deleteObserverConsumer deletes an ordered consumer's current
// server-side consumer (the library deletes the ones it replaced); it would
// otherwise hold its place in the stream's consumer limit, which every key
// shares, until observerInactiveThreshold. The consumer's iterator is
// stopped and its read loop ended, so no reset can replace it meanwhile.
func (b *Bridge) deleteObserverConsumer(cons jetstream.Consumer, thread string) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumerDeleteTimeout)
	defer cancel()
	if err := b.fabric.JetStream().DeleteConsumer(ctx, EventsStream, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		b.log.Warn("replay log: deleting an observer's consumer", "thread", thread, "consumer", info.Name, "err", err)
	}
}

func lastToken(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}
