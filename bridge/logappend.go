package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
)

// appendAttempts bounds the tries of an append that keeps finding that
// another instance appended to the thread first.
const appendAttempts = 8

// errRunEnded: the run already has its terminal event in the replay log.
var errRunEnded = errors.New("the run has ended in the replay log")

// errLogBehind: the replay log ends before events the appender has seen
// (it lost them), so the seqs after its last are taken already.
var errLogBehind = errors.New("the replay log lacks events already delivered")

// AppendEnd appends to a thread's replay log the events that end run
// (from end, given the thread's last seq: the log's, or its floor when
// higher, seqfloor.go), when the instance
// that ran it is gone and nobody else can: the client's instance or an
// observer synthesises a failed run. The events take the seqs after the
// log's last, and the append is conditional on that last message (JetStream's
// expected-last-subject-sequence over the thread's subjects), so two
// instances appending at once never give two events one seq, and a later
// run of the thread, numbered from the log, never reuses them. It returns
// the events appended, or errRunEnded when the log's last message already
// ends run (another instance appended first), or errLogBehind when end
// returns nothing: the log's last seq is before one the caller delivered.
func (f *Fabric) AppendEnd(ctx context.Context, thread, run string, end func(last uint64) []*canonical.Event) ([]*canonical.Event, error) {
	filter := f.ThreadSubjects(thread)
	// The log may have let go of the thread's events (seqfloor.go); what
	// another appender adds meanwhile shows in the log's last.
	floor, err := f.floors.read(ctx, thread)
	if err != nil {
		return nil, err
	}
	for range appendAttempts {
		var streamSeq, last uint64
		m, err := f.events.GetLastMsgForSubject(ctx, filter)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return nil, err
		default:
			evs, err := DecodeEvents(m.Data)
			if err != nil || len(evs) == 0 {
				return nil, fmt.Errorf("replay log message %d does not decode: %v", m.Sequence, err)
			}
			tail := evs[len(evs)-1]
			if _, ok := canonical.TerminalOf(tail); ok && tail.GetRunId() == run {
				return nil, errRunEnded
			}
			streamSeq, last = m.Sequence, tail.GetSeq()
		}
		evs := end(max(last, floor))
		if len(evs) == 0 {
			return nil, errLogBehind
		}
		data, err := proto.Marshal(&canonical.EventBatch{Events: evs})
		if err != nil {
			return nil, err
		}
		msg := &nats.Msg{Subject: f.EventSubject(thread, run), Data: data, Header: nats.Header{}}
		msg.Header.Set(lastSeqHeader, strconv.FormatUint(evs[len(evs)-1].GetSeq(), 10))
		_, err = f.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequenceForSubject(streamSeq, filter))
		if err == nil {
			f.NoteLastSeq(thread, evs[len(evs)-1].GetSeq())
			return evs, nil
		}
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
			return nil, err
		}
	}
	return nil, fmt.Errorf("thread %q: appends kept racing (%d attempts)", thread, appendAttempts)
}

// threadEventsBetween reads from the replay log the thread's events with
// seqs in (after, before): what a live stream missed (a NATS reconnect
// drops a subscription's messages while it is away). It reads the thread's
// log up to its last message at the time of asking, within ctx.
func (f *Fabric) threadEventsBetween(ctx context.Context, thread string, after, before uint64) ([]*canonical.Event, error) {
	evs, _, err := f.readThreadLog(ctx, thread, logSpan{after: after, before: before})
	return evs, err
}

// logSpan is a read of a thread's replay log: the events with seqs in
// (after, before), from the stream's message start on (0: the thread's
// first), at most max of them (0: no bound; a read that stops at max may
// end inside a message, whose later events the next read, from the same
// message, gives).
type logSpan struct {
	start         uint64
	after, before uint64
	max           int
}

// readThreadLog reads span through an ephemeral pull consumer of its own:
// nats.go's ordered consumer recreates its consumer at every Fetch with
// retries of its own that take no context (seen holding a client past any
// deadline while a killed server still held the consumer). It returns the
// events and the stream message the next read starts at.
func (f *Fabric) readThreadLog(ctx context.Context, thread string, span logSpan) ([]*canonical.Event, uint64, error) {
	filter := f.ThreadSubjects(thread)
	lastMsg, err := f.events.GetLastMsgForSubject(ctx, filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, span.start, nil
	}
	if err != nil {
		return nil, span.start, err
	}
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: 10 * time.Second, // should the delete below fail
		MemoryStorage:     true,
		Replicas:          1,
	}
	if span.start > 0 {
		if span.start > lastMsg.Sequence {
			return nil, span.start, nil
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, span.start
	}
	cons, err := f.js.CreateConsumer(ctx, EventsStream, cfg)
	if err != nil {
		return nil, span.start, err
	}
	defer func() { // do not leave it to its inactivity threshold (but do not wait long)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = f.js.DeleteConsumer(dctx, EventsStream, cons.CachedInfo().Name)
	}()
	return fetchSpan(ctx, cons, span, lastMsg.Sequence)
}

// fetchSpan reads span from cons, up to stream message last. Each fetch
// waits at most logFetchWait; one that gives nothing while the consumer
// has nothing pending means the log let go of the rest (replay_max_bytes
// discards the oldest while a reader reads), and the read ends there
// rather than wait for messages that will not come.
func fetchSpan(ctx context.Context, cons jetstream.Consumer, span logSpan, last uint64) ([]*canonical.Event, uint64, error) {
	var out []*canonical.Event
	next := span.start
	for {
		var got int
		var done bool
		var err error
		if out, next, got, done, err = fetchBatch(ctx, cons, span, last, out, next); err != nil {
			return nil, next, err
		}
		if done {
			return out, next, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, next, err
		}
		if got == 0 {
			if done, err := drained(ctx, cons); err != nil || done {
				return out, last + 1, err
			}
		}
	}
}

// fetchBatch is one fetch of fetchSpan, waiting at most logFetchWait: it
// appends span's events to out and says how many messages it got, and
// done when the read ends in them (next is then where the next read
// starts).
func fetchBatch(ctx context.Context, cons jetstream.Consumer, span logSpan, last uint64, out []*canonical.Event, next uint64) (_ []*canonical.Event, _ uint64, got int, done bool, err error) {
	fctx, cancel := context.WithTimeout(ctx, logFetchWait)
	defer cancel()
	batch, err := cons.Fetch(256, jetstream.FetchContext(fctx))
	if err != nil {
		return out, next, 0, false, err
	}
	for m := range batch.Messages() {
		got++
		evs, seq, err := decodeLogMsg(m)
		if err != nil {
			return out, next, got, false, err
		}
		next = seq + 1
		for _, ev := range evs {
			if s := ev.GetSeq(); s > span.after && s < span.before {
				if span.max > 0 && len(out) == span.max {
					return out, seq, got, true, nil // this message again, for the rest
				}
				out = append(out, ev)
			}
		}
		if len(evs) > 0 && evs[len(evs)-1].GetSeq() >= span.before {
			return out, seq, got, true, nil // this message again, for what is at or past before
		}
		if seq >= last {
			return out, next, got, true, nil
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return out, next, got, false, err
	}
	return out, next, got, false, nil
}

// logFetchWait bounds one fetch of a replay-log read.
const logFetchWait = 2 * time.Second

// decodeLogMsg is a replay-log message's events and stream sequence.
func decodeLogMsg(m jetstream.Msg) ([]*canonical.Event, uint64, error) {
	meta, err := m.Metadata()
	if err != nil {
		return nil, 0, err
	}
	evs, err := DecodeEvents(m.Data())
	if err != nil {
		return nil, 0, fmt.Errorf("replay log message %d does not decode: %v", meta.Sequence.Stream, err)
	}
	return evs, meta.Sequence.Stream, nil
}

// drained reports whether cons has nothing more to deliver.
func drained(ctx context.Context, cons jetstream.Consumer) (bool, error) {
	info, err := cons.Info(ctx)
	if err != nil {
		return false, err
	}
	return info.NumPending == 0 && info.NumAckPending == 0, nil
}
