package bridge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// logFollower is the replay log's live feed for every tail of an
// instance: one ordered consumer over the whole log while the instance
// has a tail, each message it delivers handed to the tail of the thread
// it is of. A consumer per thread, filtered by the thread's subjects, made
// the server look through every other thread's messages for each one it
// delivered (nats-server's msgBlock.firstMatching: 14% of the process's
// CPU with 100 threads paced at 10,000 events/s), and took one of the
// stream's consumers (1,000 on the embedded server) per thread observed.
// What it costs instead: the instance receives the events of threads it
// does not observe while it observes any, and drops them unread.
type logFollower struct {
	mu    sync.Mutex             // taken before a tail's
	tails map[string]*threadTail // by the thread's subject token
	feed  *followFeed            // nil: none running
}

// followFeed is one consumer of the follower's and the goroutine reading
// it; a feed that ends (the last tail closed, or the log unreadable) is
// not used again.
type followFeed struct {
	b      *Bridge
	ctx    context.Context
	cancel context.CancelFunc
	cons   jetstream.Consumer
	it     jetstream.MessagesContext
	done   chan struct{} // closed when the feed's goroutine has returned
	// failed: the log could not be read, and the feed's tails were ended;
	// the next register or unregister stops it. Guarded by the follower's mu.
	failed bool
}

// register hands t the log's events of its thread from now on, starting
// the feed if none runs. The events before now are t's to read (open
// reads the thread's last message after this).
func (f *logFollower) register(ctx context.Context, t *threadTail) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.feed != nil && f.feed.failed {
		f.stop(f.feed) // its goroutine has returned, or is returning
		f.feed = nil
	}
	if f.feed == nil {
		feed, err := f.start(ctx, t.b)
		if err != nil {
			return err
		}
		f.feed = feed
	}
	if f.tails == nil {
		f.tails = map[string]*threadTail{}
	}
	f.tails[subject.Token(t.thread)] = t
	return nil
}

// unregister stops handing t events, and stops the feed after the last
// tail: it returns once the feed's goroutine has.
func (f *logFollower) unregister(t *threadTail) {
	f.mu.Lock()
	tok := subject.Token(t.thread)
	if f.tails[tok] == t {
		delete(f.tails, tok)
	}
	var feed *followFeed
	if len(f.tails) == 0 && f.feed != nil {
		feed, f.feed = f.feed, nil
	}
	f.mu.Unlock()
	if feed != nil {
		f.stop(feed)
	}
}

// start creates the consumer, delivering what the log stores from now
// on, and the goroutine that reads it.
func (f *logFollower) start(ctx context.Context, b *Bridge) (*followFeed, error) {
	cons, err := b.fabric.JetStream().OrderedConsumer(ctx, EventsStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy,
		// A backstop for a consumer stop could not delete (NATS
		// unreachable then): the server drops it once nobody pulls.
		InactiveThreshold: observerInactiveThreshold,
	})
	if err != nil {
		return nil, b.replayLogError(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		deleteConsumer(b, cons)
		return nil, b.replayLogError(err)
	}
	feed := &followFeed{b: b, cons: cons, it: it, done: make(chan struct{})}
	feed.ctx, feed.cancel = context.WithCancel(context.Background())
	go f.run(feed)
	return feed, nil
}

// run moves the log's messages to their threads' tails. It stops the
// iterator itself when it returns: nats.go's ordered consumer replaces its
// subscription inside Next (a reset, after a missed message or
// heartbeat), and a Stop from another goroutine during that reset stops
// the old one, leaving Next waiting on the new one for ever (nats.go
// v1.55 jetstream/ordered.go, resetMessages). So stop ends the wait
// through the feed's context, and only this goroutine stops the iterator.
func (f *logFollower) run(feed *followFeed) {
	defer close(feed.done)
	defer feed.it.Stop()
	prefix := feed.b.fabric.Prefix() + ".events."
	for {
		m, err := feed.it.Next(jetstream.NextContext(feed.ctx))
		if err != nil {
			if feed.ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				f.fail(feed, err)
			}
			return
		}
		t := f.tailOf(m.Subject(), prefix)
		if t == nil {
			continue
		}
		evs, err := DecodeEvents(m.Data())
		if err != nil {
			continue // not ours to judge; the owner's client saw it
		}
		t.add(evs, len(m.Data())/max(len(evs), 1))
	}
}

// tailOf is the tail of the thread an events subject
// (<prefix>.events.<thread>.<run>) is of; nil when none is here.
func (f *logFollower) tailOf(subj, prefix string) *threadTail {
	tok, ok := strings.CutPrefix(subj, prefix)
	if !ok {
		return nil
	}
	if i := strings.IndexByte(tok, '.'); i >= 0 {
		tok = tok[:i]
	}
	f.mu.Lock()
	t := f.tails[tok]
	f.mu.Unlock()
	return t
}

// fail ends every tail the feed fed: the log could not be read. Their
// next observers open tails, and a feed, anew.
func (f *logFollower) fail(feed *followFeed, err error) {
	f.mu.Lock()
	if f.feed != feed { // stopped meanwhile: its tails are another feed's
		f.mu.Unlock()
		return
	}
	feed.failed = true
	tails := f.tails
	f.tails = nil
	f.mu.Unlock()
	failure := natsFailure(feed.b.log, canonical.CodeUnavailable, "the replay log could not be read", err)
	for _, t := range tails {
		t.end(failure)
	}
}

// stop ends feed's goroutine and deletes its consumer. A reset retrying a
// server that is away ends its backoff only when the iterator stops: past
// feedStopWait, stop stops it from here.
func (f *logFollower) stop(feed *followFeed) {
	feed.cancel()
	select {
	case <-feed.done:
	case <-time.After(feedStopWait):
		feed.it.Stop()
		<-feed.done
	}
	deleteConsumer(feed.b, feed.cons)
}

// deleteConsumer deletes an ordered consumer's current server-side
// consumer (the library deletes the ones it replaced); it would otherwise
// hold its place in the stream's consumer limit, which every key shares,
// until observerInactiveThreshold. The consumer's iterator is stopped and
// its read loop ended, so no reset can replace it meanwhile.
func deleteConsumer(b *Bridge, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumerDeleteTimeout)
	defer cancel()
	if err := b.fabric.JetStream().DeleteConsumer(ctx, EventsStream, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		b.log.Warn("replay log: deleting the log follower's consumer", "consumer", info.Name, "err", err)
	}
}
