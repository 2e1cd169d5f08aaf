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
// Close it. A run of the thread whose owner stops sending events and
// heartbeats for nats.owner_timeout ends with failed (unavailable).
func (b *Bridge) Observe(ctx context.Context, threadID string, since uint64) (canonical.Stream, error) {
	if b.fabric == nil {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "no fabric to observe from")
	}
	if err := b.CheckThread(ctx, threadID); err != nil {
		return nil, err
	}
	cfg := b.cluster.cfg
	if !b.cluster.started { // a bridge outside the cluster: the defaults
		c := Config{}
		c.Defaults()
		cfg = c.NATS
	}
	cons, err := b.fabric.JetStream().OrderedConsumer(ctx, EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.subject("events", subject.Token(threadID), "*")},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "replay log: %v", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "replay log: %v", err)
	}
	o := &observer{
		b: b, ctx: ctx, it: it, thread: threadID, since: since, timeout: cfg.OwnerTimeout,
		events: make(chan *canonical.Event, cfg.RemoteBuffer), hb: make(chan *nats.Msg, 64),
		done: make(chan struct{}), runs: map[string]*observedRun{},
	}
	if o.hbSub, err = b.fabric.Conn().ChanSubscribe(b.subject("hb", subject.Token(threadID), "*"), o.hb); err != nil {
		it.Stop()
		return nil, canonical.Errorf(canonical.CodeUnavailable, "nats: %v", err)
	}
	o.wg.Add(1)
	go o.readLoop()
	return o, nil
}

type observedRun struct {
	id       string
	guard    canonical.Guard
	lastSeen time.Time
	lastSeq  uint64
}

// observer is a thread's event stream fed from the replay log.
type observer struct {
	b       *Bridge
	ctx     context.Context
	it      jetstream.MessagesContext
	hbSub   *nats.Subscription
	hb      chan *nats.Msg
	events  chan *canonical.Event
	done    chan struct{}
	wg      sync.WaitGroup
	thread  string
	since   uint64
	timeout time.Duration
	err     atomic.Pointer[canonical.Error]

	runs map[string]*observedRun // by subject token of the run id
	owed []*canonical.Event
	once sync.Once
}

// readLoop moves replay-log messages into the bounded events channel.
func (o *observer) readLoop() {
	defer o.wg.Done()
	defer close(o.events)
	for {
		m, err := o.it.Next()
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				o.err.Store(canonical.Errorf(canonical.CodeUnavailable, "replay log: %v", err))
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
		select {
		case ev, ok := <-o.events:
			if !ok {
				if e := o.err.Load(); e != nil {
					return nil, e
				}
				return nil, io.EOF
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
			return nil, io.EOF
		}
	}
	ev := o.owed[0]
	o.owed = o.owed[1:]
	return ev, nil
}

// track records ev's run and passes ev on unless it is at or before since.
func (o *observer) track(ev *canonical.Event) {
	id := subject.Token(ev.GetRunId())
	r := o.runs[id]
	if r == nil {
		r = &observedRun{id: ev.GetRunId()}
		o.runs[id] = r
	}
	r.lastSeen, r.lastSeq = o.b.now(), ev.GetSeq()
	_ = r.guard.Observe(ev)
	if r.guard.Ended() {
		delete(o.runs, id)
	}
	if ev.GetSeq() > o.since {
		o.owed = append(o.owed, ev)
	}
}

// expire ends the runs whose owner has gone quiet.
func (o *observer) expire() {
	now := o.b.now()
	for id, r := range o.runs {
		if now.Sub(r.lastSeen) < o.timeout {
			continue
		}
		for _, ev := range r.guard.End(nil, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "run owner sent neither event nor heartbeat for %s", o.timeout)) {
			r.lastSeq++
			ev.ThreadId, ev.RunId, ev.Seq = o.thread, r.id, r.lastSeq
			canonical.Stamp(ev, now)
			o.owed = append(o.owed, ev)
		}
		delete(o.runs, id)
	}
}

// Close implements canonical.Stream.
func (o *observer) Close() error {
	o.once.Do(func() {
		close(o.done)
		o.it.Stop()
		_ = o.hbSub.Unsubscribe()
		o.wg.Wait()
	})
	return nil
}

func lastToken(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}
