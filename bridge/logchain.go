package bridge

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/canonical"
)

// logChain fences one thread's replay-log writes from this instance. Each
// message of the thread expects the thread's last message in the log to
// be this instance's previous one (JetStream's expected last sequence over
// the thread's subjects, as AppendEnd's writes do): an instance that
// another took for gone (paused, or cut off from NATS past
// nats.owner_timeout) and whose run that one ended in the log writes
// nothing more of the thread when it comes back, where it wrote on before
// (the audit's two histories of one run: seqs stored twice, two ends).
// A fenced thread's runs here end failed; its messages are not written.
//
// The bridge makes one for a thread as the thread's first run here starts
// (thread.chain): another instance may have written the thread since this
// one last did, and the chain's first message, sent without an
// expectation, starts it. Messages of earlier runs keep their own chain.
type logChain struct {
	// last is the log's sequence of this instance's last message of the
	// thread, from its acknowledgement; 0: unknown, the next message is
	// not conditional.
	last    atomic.Uint64
	fenced  atomic.Bool
	onFence func() // ends the thread's runs here
}

// errFenced ends the runs of a thread whose log another instance wrote
// while this one ran it.
var errFenced = canonical.Errorf(canonical.CodeUnavailable,
	"another instance wrote this run's thread while this one was out of reach (taken for gone): the run ended there")

// expect sets m's expectation on its thread's last message (filter: the
// thread's subjects) from chain, or clears it while the chain is not
// started.
func expect(m *nats.Msg, chain *logChain, filter string) {
	if last := chain.last.Load(); last != 0 {
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
		m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, filter)
		return
	}
	m.Header.Del(jetstream.ExpectedLastSubjSeqHeader)
	m.Header.Del(jetstream.ExpectedLastSubjSeqSubjHeader)
}

// wrongLast reports a write refused because the thread's last message was
// not the one expected.
func wrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// verify decides a message of t refused as not following the thread's
// last: its own earlier send, stored with its acknowledgement lost (a
// single server checks the expectation before it finds the duplicate); a
// log that lost this instance's last writes; or another instance's write
// after them, which fences the thread. It runs on its own
// goroutine (JetStream's callbacks may not make requests).
func (l *ackedLog) verify(t *threadLog, m *logMsg) {
	ctx, cancel := context.WithTimeout(context.Background(), logAckTimeout)
	id, seq, err := l.lastOf(ctx, t.thread)
	cancel()
	l.mu.Lock()
	if t.cur != m || l.threads[t.thread] != t {
		l.mu.Unlock()
		return
	}
	switch {
	case err != nil: // asked again after the back-off
		m.retryAt = time.Now().Add(logRetryFirst)
		l.mu.Unlock()
		time.AfterFunc(logRetryFirst, l.wake)
		return
	case id == m.msg.Header.Get(jetstream.MsgIDHeader):
		m.chain.last.Store(seq)
		l.doneLocked(t)
		l.mu.Unlock()
		l.wake()
		return
	case seq <= m.chain.last.Load():
		// The log ends before this instance's last acknowledged message:
		// it lost what it had acknowledged (a NATS server killed while it
		// wrote in the background, persist_mode async), nobody wrote
		// after it. The chain goes on from the log as it is; readers see
		// the loss as a gap, as they did before chains.
		m.chain.last.Store(seq)
		m.retryAt = time.Now() // resent at once
		l.mu.Unlock()
		l.wake()
		return
	}
	m.chain.fenced.Store(true)
	events := l.fenceLocked(t)
	l.mu.Unlock()
	l.fence(t.thread, events)
	m.chain.onFence()
	l.wake()
}

// fenceLocked drops t's messages, in flight and waiting, and returns how
// many events they held.
func (l *ackedLog) fenceLocked(t *threadLog) int {
	events := t.cur.events
	for _, w := range t.waiting {
		events += w.events
	}
	t.waiting = nil
	l.events -= events - t.cur.events // doneLocked takes cur's
	l.doneLocked(t)
	return events
}
