package agent

import "slices"

// evictLog remembers, of the events a thread's buffer let go, what a
// filter looks at, so subscription.reconnect's missed_events counts only
// the events its subscriptions would have delivered (issue 36 #4), not
// every event evicted. Consecutive events with the same method, custom
// name and namespace share one span: a run's thousands of message deltas
// in one namespace cost one. Spans are bounded (maxEvictSpans); seqs past
// the oldest kept span, and seqs this instance never held (a mirrored
// jump), are described by none, and a count over them is every seq: an
// upper bound, never an undercount.
type evictLog struct {
	spans []evictSpan // spans[head:] are kept: oldest first, seqs increasing, not overlapping
	head  int         // spans before it were dropped past maxEvictSpans
}

// evictSpan is evicted seqs first..last, each with the same filter fields.
type evictSpan struct {
	first, last uint64
	method      string
	custom      string
	ns          []string
}

// maxEvictSpans bounds a thread's evictLog (about 80 bytes each).
const maxEvictSpans = 1024

// add records an evicted record.
func (l *evictLog) add(rec *record) {
	if n := len(l.spans); n > l.head {
		s := &l.spans[n-1]
		if s.last+1 == rec.seq && s.method == rec.method && s.custom == rec.custom && slices.Equal(s.ns, rec.ns) {
			s.last = rec.seq
			return
		}
	}
	if len(l.spans)-l.head == maxEvictSpans {
		// The oldest goes; the array is compacted once a quarter of it is
		// dropped, not at every span (a stream whose events alternate
		// makes a span of each).
		l.spans[l.head] = evictSpan{}
		if l.head++; l.head == maxEvictSpans/4 {
			n := copy(l.spans, l.spans[l.head:])
			clear(l.spans[n:])
			l.spans, l.head = l.spans[:n], 0
		}
	}
	l.spans = append(l.spans, evictSpan{first: rec.seq, last: rec.seq, method: rec.method, custom: rec.custom, ns: rec.ns})
}

// kept is the spans still described.
func (l *evictLog) kept() []evictSpan { return l.spans[l.head:] }

// forgetFrom drops what is recorded of seqs from seq on: the buffer is
// rebuilt from there (a catch-up with the owner's).
func (l *evictLog) forgetFrom(seq uint64) {
	for n := len(l.spans); n > l.head; n = len(l.spans) {
		s := &l.spans[n-1]
		switch {
		case s.first >= seq:
			l.spans[n-1] = evictSpan{}
			l.spans = l.spans[:n-1]
			continue
		case s.last >= seq:
			s.last = seq - 1
		}
		return
	}
}

// missed counts the seqs in (after, before) that match: every seq no span
// describes, and those of spans whose fields match.
func (l *evictLog) missed(after, before uint64, match func(*record) bool) uint64 {
	if after+1 >= before {
		return 0
	}
	n := before - 1 - after
	for _, s := range l.kept() {
		lo, hi := max(s.first, after+1), min(s.last, before-1)
		if lo > hi {
			continue
		}
		if !match(&record{method: s.method, custom: s.custom, ns: s.ns}) {
			n -= hi - lo + 1
		}
	}
	return n
}

// missedLocked is how many events after seq after that match the thread
// no longer holds: those evicted from its buffer (or never held) but the
// namespaces' states it pinned, which a replay still sends.
func (t *Thread) missedLocked(after uint64, match func(*record) bool) uint64 {
	oldest := t.oldest()
	n := t.evicted.missed(after, oldest, match)
	for i := range t.pinned {
		if p := &t.pinned[i]; p.seq > after && p.seq < oldest && match(p) && n > 0 {
			n--
		}
	}
	return n
}
