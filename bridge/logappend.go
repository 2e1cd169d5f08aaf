package bridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
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
// ends run (another instance appended first) or belongs to a run that
// followed it, or errLogBehind when end
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
		m, err := f.lastThreadMsg(ctx, thread)
		switch {
		case err != nil:
			return nil, err
		case m != nil:
			evs, err := DecodeEvents(m.Data)
			if err != nil || len(evs) == 0 {
				return nil, fmt.Errorf("replay log message %d does not decode: %v", m.Sequence, err)
			}
			tail := evs[len(evs)-1]
			if _, ok := canonical.TerminalOf(tail); ok && tail.GetRunId() == run {
				return nil, errRunEnded
			}
			if tail.GetRunId() != run {
				if after, err := f.runFollowed(ctx, thread, run, m.Sequence); err != nil || after {
					return nil, cmp.Or(err, errRunEnded)
				}
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

// runFollowed reports whether the log holds events of run before its
// message at stream sequence tail, which is another run's: the thread's
// next run has started, so run is over (its lease is gone) and an end
// appended now would end it a second time, after that run's events.
func (f *Fabric) runFollowed(ctx context.Context, thread, run string, tail uint64) (bool, error) {
	m, err := f.events.GetLastMsgForSubject(ctx, f.EventSubject(thread, run))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil && m.Sequence < tail, err
}

// runGuard is a guard that has observed run's events as the replay log
// holds them, read from the run's first message on, at most catchUpEvents
// at a time: the events that end the run then finish what it left open,
// however long ago it opened it.
func (f *Fabric) runGuard(ctx context.Context, thread, run string) (*canonical.Guard, error) {
	g := &canonical.Guard{}
	first, err := f.events.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(f.EventSubject(thread, run)))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return g, nil
	case err != nil:
		return nil, err
	}
	span := logSpan{start: first.Sequence, before: math.MaxUint64, max: catchUpEvents}
	for {
		evs, next, err := f.readThreadLog(ctx, thread, span)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if ev.GetRunId() == run {
				_ = g.Observe(ev) // a rule broken: the guard finishes what it knows
			}
		}
		if len(evs) < span.max {
			return g, nil
		}
		span.start, span.after = next, evs[len(evs)-1].GetSeq()
	}
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

// readThreadLog reads span through ephemeral pull consumers of its own:
// nats.go's ordered consumer recreates its consumer at every Fetch with
// retries of its own that take no context (seen holding a client past any
// deadline while a killed server still held the consumer). It returns the
// events and the stream message the next read starts at.
//
// A consumer that acknowledges nothing forgets what it delivered, and a
// fetch drops what arrives after its wait ends (a process starved of CPU
// for the wait's last tenth: seen once as a bench's agent reader failing
// data_loss while the log held every event). A read that finds a delivery
// missing starts a new consumer after the last message it took, at most
// logReadRestarts times in a row without progress.
func (f *Fabric) readThreadLog(ctx context.Context, thread string, span logSpan) ([]*canonical.Event, uint64, error) {
	lastMsg, err := f.lastThreadMsg(ctx, thread)
	if err != nil || lastMsg == nil {
		return nil, span.start, err
	}
	filter := f.ThreadSubjects(thread)
	rd := logRead{span: span, last: lastMsg.Sequence, wait: f.logFetchWait, next: span.start}
	for stalls := 0; ; {
		if rd.next > rd.last {
			return rd.out, rd.next, nil
		}
		from := rd.next
		lost, err := f.readFrom(ctx, filter, &rd)
		if err != nil {
			return nil, rd.next, err
		}
		if !lost {
			return rd.out, rd.next, nil
		}
		if stalls++; rd.next != from {
			stalls = 0
		}
		if stalls > logReadRestarts {
			return nil, rd.next, fmt.Errorf("the replay log's deliveries to a reader were lost %d times in a row", stalls)
		}
	}
}

// logReadRestarts bounds the consumers in a row a read of the log starts
// without taking a message (readThreadLog).
const logReadRestarts = 3

// readFrom reads rd on through a new consumer starting at rd.next (0:
// the thread's first message); lost when a delivery went missing and the
// read must go on from rd.next through another.
func (f *Fabric) readFrom(ctx context.Context, filter string, rd *logRead) (lost bool, err error) {
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: 10 * time.Second, // should the delete below fail
		MemoryStorage:     true,
		Replicas:          1,
	}
	if rd.next > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, rd.next
	}
	cons, err := f.js.CreateConsumer(ctx, EventsStream, cfg)
	if err != nil {
		return false, err
	}
	defer func() { // do not leave it to its inactivity threshold (but do not wait long)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = f.js.DeleteConsumer(dctx, EventsStream, cons.CachedInfo().Name)
	}()
	rd.cons, rd.taken = cons, 0
	return rd.fetchSpan(ctx)
}

// logRead is one read of a thread's replay log: its span, the stream
// message the log ended at when it began, what it has read and where it
// goes on, and its current consumer with the deliveries taken from it.
type logRead struct {
	span  logSpan
	last  uint64
	wait  time.Duration // one fetch's (logFetchWait)
	out   []*canonical.Event
	next  uint64 // the stream message the read goes on at
	cons  jetstream.Consumer
	taken uint64 // the consumer's deliveries taken, in order
	batch int    // messages the last fetch asked for
}

// fetchSpan reads the span on from rd.cons, up to stream message last.
// Each fetch waits at most rd.wait; one that gives nothing while the
// consumer has delivered everything it took and has nothing pending means
// the log let go of the rest (replay_max_bytes discards the oldest while a
// reader reads), and the read ends there rather than wait for messages
// that will not come. lost: a delivery went missing (the consumer's
// delivery numbers skip one, or it delivered more than was taken).
func (rd *logRead) fetchSpan(ctx context.Context) (lost bool, err error) {
	for {
		got, done, lost, err := rd.fetchBatch(ctx)
		if err != nil || done || lost {
			return lost, err
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if got > 0 {
			continue
		}
		info, err := rd.cons.Info(ctx)
		switch {
		case err != nil:
			return false, err
		case info.Delivered.Consumer != rd.taken:
			return true, nil
		case info.NumPending == 0 && info.NumAckPending == 0:
			rd.next = rd.last + 1
			return false, nil
		}
	}
}

// fetchBatch is one fetch of fetchSpan, waiting at most rd.wait: it
// appends the span's events to rd.out and says how many messages it got,
// done when the read ends in them (rd.next is then where the next read
// starts), lost when one before them went missing (rd.next is the
// first not read).
func (rd *logRead) fetchBatch(ctx context.Context) (got int, done, lost bool, err error) {
	fctx, cancel := context.WithTimeout(ctx, rd.wait)
	defer cancel()
	// A read that stops at span.max may need a few messages of the
	// hundreds a fetch could give (a message holds up to 64 KiB of
	// events), and the server loads and sends every message asked for:
	// the first fetch asks for few, the one after a full one for twice
	// as many.
	if rd.batch == 0 {
		rd.batch = logFetchFirst
	}
	batch, err := rd.cons.Fetch(rd.batch, jetstream.FetchContext(fctx))
	if err != nil {
		return 0, false, false, err
	}
	span := rd.span
	for m := range batch.Messages() {
		got++
		meta, err := m.Metadata()
		if err != nil {
			return got, false, false, err
		}
		if meta.Sequence.Consumer != rd.taken+1 {
			return got, false, true, nil
		}
		rd.taken++
		seq := meta.Sequence.Stream
		evs, err := DecodeEvents(m.Data())
		if err != nil {
			return got, false, false, fmt.Errorf("replay log message %d does not decode: %v", seq, err)
		}
		for _, ev := range evs {
			if s := ev.GetSeq(); s > span.after && s < span.before {
				if span.max > 0 && len(rd.out) == span.max {
					rd.next = seq // this message again, for the rest
					return got, true, false, nil
				}
				rd.out = append(rd.out, ev)
			}
		}
		if len(evs) > 0 && evs[len(evs)-1].GetSeq() >= span.before {
			rd.next = seq // this message again, for what is at or past before
			return got, true, false, nil
		}
		rd.next = seq + 1
		if seq >= rd.last {
			return got, true, false, nil
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return got, false, false, err
	}
	if got == rd.batch {
		rd.batch = min(2*rd.batch, logFetchMax)
	}
	return got, false, false, nil
}

// logFetchWait bounds one fetch of a replay-log read.
const logFetchWait = 2 * time.Second

// A read of the log asks its first fetch for logFetchFirst messages and
// each next for twice as many, up to logFetchMax (fetchBatch).
const (
	logFetchFirst = 8
	logFetchMax   = 256
)
