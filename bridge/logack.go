package bridge

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// ackedLog sends the replay log's event messages and keeps each until
// JetStream acknowledges it, resending what is not acknowledged. A message
// published without an acknowledgement is lost when the NATS node the
// instance is connected to, or the stream's leader, dies before storing
// it: a three-node cluster losing one node lost events of every run in
// flight (issue 28, check 10).
//
// Order: per thread, one message is in flight at a time and the thread's
// next messages wait (merged into fewer, larger messages meanwhile), so a
// resent message can never land in the log after a later one of its
// thread. Threads do not wait for each other. Duplicates: each message
// carries Nats-Msg-Id (its subject and first event's seq, which no other
// message of the log shares), so a resend of a message that was stored but
// whose acknowledgement was lost is dropped by the stream (within its
// duplicate window, logDuplicates, longer than logGiveUp).
//
// Only the publish loop sends; JetStream's callbacks only record the
// outcome and wake the loop (they run under the JetStream client's lock,
// which a send takes: sending from them could deadlock).
type ackedLog struct {
	js   jetstream.JetStream // with this log's callbacks
	wake func()              // wakes the publish loop
	drop func(events int, err error)
	// filter is a thread's subjects in the log; lastOf reads the Msg-Id
	// and sequence of its last message there (logchain.go); fence counts
	// the events of a fenced thread's messages, not written.
	filter func(thread string) string
	lastOf func(ctx context.Context, thread string) (msgID string, seq uint64, err error)
	fence  func(thread string, events int)

	mu       sync.Mutex
	threads  map[string]*threadLog // threads with a message in flight or waiting
	inflight map[*nats.Msg]*threadLog
	events   int // events held: in flight and waiting
	max      int // bound on events: past it the loop takes no more from its queue
}

// threadLog is one thread's messages not yet acknowledged, in order.
type threadLog struct {
	thread  string
	cur     *logMsg         // in flight, or waiting to be resent (retryAt)
	waiting []*logMsg       // after cur
	settled []chan struct{} // closed when the thread has no message left (settle)
}

// logMsg is one message of the log, sent until acknowledged.
type logMsg struct {
	msg     *nats.Msg
	chain   *logChain // nil: not conditional
	events  int
	first   time.Time // first sent
	tries   int
	retryAt time.Time // zero while in flight
}

// Timings of the acknowledged log. logAckTimeout is how long an
// acknowledgement may take before the message is resent (a stream leader
// election in a three-node cluster takes a few seconds, during which
// publishes time out or find no responder); resends back off from
// logRetryFirst to logRetryMax; a message unacknowledged for logGiveUp is
// dropped and counted (readers of the thread then see a gap and fail the
// run); logDuplicates is the stream's duplicate window, which must outlast
// logGiveUp so that no resend is stored twice.
const (
	logAckTimeout = 2 * time.Second
	logRetryFirst = 100 * time.Millisecond
	logRetryMax   = 2 * time.Second
	logGiveUp     = 60 * time.Second
	logDuplicates = 2 * time.Minute
)

func newAckedLog(nc *nats.Conn, max int, wake func(), drop func(int, error)) (*ackedLog, error) {
	l := &ackedLog{wake: wake, drop: drop, max: max, threads: map[string]*threadLog{}, inflight: map[*nats.Msg]*threadLog{}}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncAckHandler(l.acked),
		jetstream.WithPublishAsyncErrHandler(l.failed),
		jetstream.WithPublishAsyncTimeout(logAckTimeout))
	if err != nil {
		return nil, err
	}
	l.js = js
	return l, nil
}

// full reports whether the log holds as many events as it may: the publish
// loop then leaves its queue alone, which fills, so that runs slow down
// (or, for observers only, drop events) rather than memory growing.
func (l *ackedLog) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events >= l.max
}

// empty reports whether every message has been acknowledged or dropped.
func (l *ackedLog) empty() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.threads) == 0
}

// add queues one message of thread's events (an EventBatch, copied) on
// subject; first and last are its first and last events' seqs. It joins
// the thread's last waiting message when that has the same subject and
// room (maxBytes).
func (l *ackedLog) add(thread, subject string, chain *logChain, first, last uint64, data []byte, events, maxBytes int) {
	if chain != nil && chain.fenced.Load() {
		l.fence(thread, events)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events += events
	t := l.threads[thread]
	if t == nil {
		t = &threadLog{thread: thread}
		l.threads[thread] = t
	}
	if n := len(t.waiting); n > 0 {
		w := t.waiting[n-1]
		if w.msg.Subject == subject && w.chain == chain && len(w.msg.Data)+len(data) <= maxBytes {
			w.msg.Data = append(w.msg.Data, data...)
			w.msg.Header.Set(lastSeqHeader, strconv.FormatUint(last, 10))
			w.events += events
			return
		}
	}
	m := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: append(make([]byte, 0, len(data)), data...)}
	id := nuid.Next()
	if first != 0 {
		id = subject + "#" + strconv.FormatUint(first, 10)
	}
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Header.Set(lastSeqHeader, strconv.FormatUint(last, 10))
	t.waiting = append(t.waiting, &logMsg{msg: m, chain: chain, events: events})
}

// flush sends each thread's next message when it has none in flight, and
// resends those whose retry time has come.
func (l *ackedLog) flush(now time.Time) {
	var sent []*logMsg
	l.mu.Lock()
	for _, t := range l.threads {
		switch {
		case t.cur == nil && len(t.waiting) > 0:
			t.cur, t.waiting = t.waiting[0], t.waiting[1:]
			if len(t.waiting) == 0 {
				t.waiting = nil // let the array go with its pointers
			}
		case t.cur != nil && !t.cur.retryAt.IsZero() && !now.Before(t.cur.retryAt):
		default:
			continue
		}
		m := t.cur
		if m.chain != nil {
			expect(m.msg, m.chain, l.filter(t.thread))
		}
		m.retryAt, m.tries = time.Time{}, m.tries+1
		if m.first.IsZero() {
			m.first = now
		}
		l.inflight[m.msg] = t
		sent = append(sent, m)
	}
	l.mu.Unlock()
	for _, m := range sent {
		if _, err := l.js.PublishMsgAsync(m.msg); err != nil {
			l.failed(l.js, m.msg, err)
		}
	}
}

// acked is JetStream's callback for a stored message (a duplicate too:
// an earlier send of it was stored).
func (l *ackedLog) acked(_ jetstream.JetStream, msg *nats.Msg, ack *jetstream.PubAck) {
	l.mu.Lock()
	t := l.inflight[msg]
	if t == nil || t.cur == nil || t.cur.msg != msg {
		l.mu.Unlock()
		return
	}
	if c := t.cur.chain; c != nil && ack != nil {
		c.last.Store(ack.Sequence)
	}
	l.doneLocked(t)
	l.mu.Unlock()
	l.wake()
}

// doneLocked retires t's current message.
func (l *ackedLog) doneLocked(t *threadLog) {
	delete(l.inflight, t.cur.msg)
	l.events -= t.cur.events
	t.cur = nil
	if len(t.waiting) == 0 {
		delete(l.threads, t.thread)
		t.closeSettled()
	}
}

// closeSettled tells those waiting for t to settle that it has.
func (t *threadLog) closeSettled() {
	for _, ch := range t.settled {
		close(ch)
	}
}

// settle closes ch once thread has no message left to acknowledge: at
// once when it has none now. (Messages added meanwhile delay it too.)
func (l *ackedLog) settle(thread string, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.threads[thread]; t != nil {
		t.settled = append(t.settled, ch)
		return
	}
	close(ch)
}

// failed is JetStream's callback for a message not acknowledged (timed
// out, no stream responded, the connection refused it): it is resent after
// a back-off, or dropped once it has been failing for logGiveUp.
func (l *ackedLog) failed(_ jetstream.JetStream, msg *nats.Msg, err error) {
	l.mu.Lock()
	t := l.inflight[msg]
	if t == nil || t.cur == nil || t.cur.msg != msg || !t.cur.retryAt.IsZero() {
		l.mu.Unlock()
		return
	}
	m := t.cur
	if m.chain != nil && wrongLast(err) && time.Since(m.first) < logGiveUp { // another's write, or this one's stored
		m.retryAt = time.Now().Add(logGiveUp) // not resent meanwhile
		l.mu.Unlock()
		go l.verify(t, m)
		return
	}
	// Too large for the server: no resend will do (the event is counted
	// dropped; readers elsewhere see the gap and fail the run).
	if errors.Is(err, nats.ErrMaxPayload) || time.Since(m.first) >= logGiveUp {
		l.doneLocked(t)
		l.mu.Unlock()
		l.drop(m.events, errors.Join(errors.New("replay log did not acknowledge"), err))
		l.wake()
		return
	}
	wait := min(logRetryFirst<<min(m.tries-1, 8), logRetryMax)
	m.retryAt = time.Now().Add(wait)
	l.mu.Unlock()
	time.AfterFunc(wait, l.wake)
}

// subjects adds to set the subjects of the messages not yet acknowledged.
func (l *ackedLog) subjects(set map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.threads {
		if t.cur != nil {
			set[t.cur.msg.Subject] = true
		}
		for _, m := range t.waiting {
			set[m.msg.Subject] = true
		}
	}
}

// abandon drops every message not yet acknowledged (the fabric is
// closing), counting their events.
func (l *ackedLog) abandon(err error) {
	l.mu.Lock()
	n := l.events
	for _, t := range l.threads {
		t.closeSettled()
	}
	clear(l.threads)
	clear(l.inflight)
	l.events = 0
	l.mu.Unlock()
	if n > 0 {
		l.drop(n, err)
	}
}
