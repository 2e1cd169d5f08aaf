package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// testLeases are two instances' leases on one embedded server's bucket.
func testLeases(t *testing.T) (a, b *leases, lost chan string) {
	t.Helper()
	f := testFabric(t)
	kv, err := openLeases(context.Background(), f.js, 1, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lost = make(chan string, 4)
	mk := func(self string) *leases {
		return &leases{kv: kv, marks: f.Threads(), self: self, ttl: 4 * time.Second, wait: 100 * time.Millisecond,
			log: slog.New(slog.DiscardHandler), lost: func(th string) { lost <- th }, closing: make(chan struct{})}
	}
	return mk("a"), mk("b"), lost
}

// Shares of one instance need one entry, made anew by the first; another
// instance gets the holder until the last share is released, then the last
// seq it left, in the entry it left.
func TestLeaseSharesAndHandover(t *testing.T) {
	a, b, _ := testLeases(t)
	ctx := context.Background()
	for i := range 2 {
		g, holder, err := a.acquire(ctx, "th", 0)
		if err != nil || holder != "" || g.created != (i == 0) {
			t.Fatalf("a's share %d: %+v %q %v", i, g, holder, err)
		}
	}
	if _, holder, err := b.acquire(ctx, "th", 0); err != nil || holder != "a" {
		t.Fatalf("b while a holds: %q %v", holder, err)
	}
	a.release("th", 7)
	if _, holder, _ := b.acquire(ctx, "th", 0); holder != "a" {
		t.Fatalf("b while a holds one share: %q", holder)
	}
	a.release("th", 9)
	a.frees.Wait() // the entry is freed in the background
	g, holder, err := b.acquire(ctx, "th", 0)
	if err != nil || holder != "" || g != (leaseGrant{last: 9, taken: true}) {
		t.Fatalf("b after a's last share: %+v, holder %q, %v", g, holder, err)
	}
	if len(a.held) != 0 || len(b.held) != 1 {
		t.Fatalf("held: a %d, b %d", len(a.held), len(b.held))
	}
}

// A holder marks a lease it takes held, and deletes the mark when it
// frees the lease: the next holder of a lease freed finds none, and the
// next holder of one whose holder died holding it (never freed) finds
// that holder's, which tells it the dead holder may have given seqs the
// replay log has nothing of. Its own mark is no other's.
func TestLeaseHoldMark(t *testing.T) {
	a, b, _ := testLeases(t)
	ctx := context.Background()
	mark := func(l *leases, want bool) {
		t.Helper()
		g, holder, err := l.acquire(ctx, "th", 0)
		if err != nil || holder != "" || !g.taken {
			t.Fatalf("%s takes the lease: %+v, holder %q, %v", l.self, g, holder, err)
		}
		if orphaned, err := l.markHeld(ctx, "th"); err != nil || orphaned != want {
			t.Fatalf("%s marks it held: orphaned %v, %v; want %v", l.self, orphaned, err, want)
		}
	}
	mark(a, false)
	a.release("th", 3)
	a.frees.Wait()
	mark(b, false) // a freed it and its mark
	if orphaned, err := a.markHeld(ctx, "th"); err != nil || !orphaned {
		t.Fatalf("a marks it while b's mark is there (b never freed it): orphaned %v, %v; want true", orphaned, err)
	}
	if orphaned, err := a.markHeld(ctx, "th"); err != nil || orphaned {
		t.Fatalf("a marks it again: orphaned %v, %v; want false (its own)", orphaned, err)
	}
}

// A lease renewed keeps its entry; one found taken by another instance is
// reported lost (its runs are cancelled); evict frees a gone holder's
// lease only while that holder still has it.
func TestLeaseRenewLostEvict(t *testing.T) {
	a, b, lost := testLeases(t)
	ctx := context.Background()
	if _, holder, err := a.acquire(ctx, "th", 0); err != nil || holder != "" {
		t.Fatal(holder, err)
	}
	a.renew(time.Now().Add(time.Hour))
	if len(lost) != 0 {
		t.Fatalf("renewal reported %q lost", <-lost)
	}
	b.evict(ctx, "th", "someone-else", 3)
	if h := b.holderOf(ctx, "th"); h != "a" {
		t.Fatalf("evicting another holder freed a's lease: holder %q", h)
	}
	b.evict(ctx, "th", "a", 12)
	g, holder, err := b.acquire(ctx, "th", 0)
	if err != nil || holder != "" || g != (leaseGrant{last: 12, taken: true}) {
		t.Fatalf("b after a's eviction: %+v, holder %q, %v", g, holder, err)
	}
	a.renew(time.Now().Add(2 * time.Hour))
	select {
	case th := <-lost:
		if th != "th" {
			t.Fatalf("lost %q", th)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a's renewal of a lease b took was not reported lost")
	}
	e, err := b.kv.Get(ctx, leaseKey("th"))
	if err != nil {
		t.Fatal(err)
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil || v.Holder != "b" {
		t.Fatalf("entry %s after a's failed renewal", e.Value())
	}
}

// A renewal that timed out while NATS was out of reach and was applied
// once it came back (nats.go resends its reconnect buffer) leaves the
// entry this instance's at a revision it never learned: the next renewal
// keeps the lease instead of reporting it lost (the audit's 4 s NATS
// outage cancelled local runs so).
func TestLeaseRenewAfterUnseenRenewal(t *testing.T) {
	a, _, lost := testLeases(t)
	ctx := context.Background()
	if _, holder, err := a.acquire(ctx, "th", 0); err != nil || holder != "" {
		t.Fatal(holder, err)
	}
	// The renewal whose answer never came: applied, its revision unknown.
	if _, err := a.kv.Put(ctx, leaseKey("th"), leaseValue{Holder: "a"}.bytes()); err != nil {
		t.Fatal(err)
	}
	a.renew(time.Now().Add(time.Hour))
	select {
	case th := <-lost:
		t.Fatalf("lease of %q reported lost after its own unseen renewal", th)
	default:
	}
	e, err := a.kv.Get(ctx, leaseKey("th"))
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	rev := a.held["th"].rev
	a.mu.Unlock()
	if readLease(e).Holder != "a" || rev != e.Revision() {
		t.Fatalf("entry %s rev %d, held rev %d", e.Value(), e.Revision(), rev)
	}
	a.renew(time.Now().Add(2 * time.Hour)) // and renewals go on from there
	if len(lost) != 0 {
		t.Fatalf("second renewal reported %q lost", <-lost)
	}
}

// A settle marker is a group of its own, and the thread's messages queued
// after it do not join a group before it: the log's acknowledgement of
// everything before the marker is what frees a thread's lease.
func TestBatcherKeepsSettleMarkersInPlace(t *testing.T) {
	f := &Fabric{cfg: NATSConfig{SubjectPrefix: "p"}}
	msg := func(seq uint64) pubMsg {
		ev := canonical.NewTextDelta(0, "x")
		ev.ThreadId, ev.RunId, ev.Seq = "th", "run", seq
		data, _, err := appendBatchElem(nil, batchEventsField, ev)
		if err != nil {
			t.Fatal(err)
		}
		return pubMsg{subject: f.EventSubject("th", "run"), thread: "th", seq: seq, last: seq, data: data, events: 1}
	}
	marker := pubMsg{thread: "th", settled: make(chan struct{})}
	msgs := []pubMsg{msg(1), msg(2), marker, msg(3)}
	var b batcher
	b.group(msgs, 1<<16)
	var heads []int
	for _, g := range b.groups {
		heads = append(heads, g.head)
	}
	if fmt.Sprint(heads) != "[0 2 3]" || b.groups[0].events != 2 {
		t.Fatalf("groups %+v", b.groups)
	}
}

// settle closes at once for a thread with nothing unacknowledged, and
// otherwise once its last message is acknowledged.
func TestAckedLogSettle(t *testing.T) {
	l := &ackedLog{threads: map[string]*threadLog{}, inflight: map[*nats.Msg]*threadLog{}, max: 100, wake: func() {}}
	now := make(chan struct{})
	l.settle("idle", now)
	select {
	case <-now:
	default:
		t.Fatal("an idle thread's settle is not closed at once")
	}
	l.add("th", "p.events.th.run", nil, 1, 1, []byte{}, 1, 1<<16)
	l.mu.Lock()
	tl := l.threads["th"]
	tl.cur, tl.waiting = tl.waiting[0], nil
	l.inflight[tl.cur.msg] = tl
	l.mu.Unlock()
	later := make(chan struct{})
	l.settle("th", later)
	select {
	case <-later:
		t.Fatal("settled before the thread's message was acknowledged")
	default:
	}
	l.acked(nil, tl.cur.msg, nil)
	select {
	case <-later:
	default:
		t.Fatal("not settled once acknowledged")
	}
}

// A run sharing a lease this instance holds, whose renewals are late (the
// process was paused past half its TTL), first checks that the lease is
// still its own: another instance's now, the share is refused and the
// thread's runs here end (lost), before any seq is given on it. On time,
// a share asks NATS nothing.
func TestLeaseShareAfterLateRenewals(t *testing.T) {
	a, b, lost := testLeases(t)
	ctx := context.Background()
	if _, holder, err := a.acquire(ctx, "th", 0); err != nil || holder != "" {
		t.Fatalf("a takes it: %q %v", holder, err)
	}
	if _, holder, err := a.acquire(ctx, "th", 0); err != nil || holder != "" {
		t.Fatalf("a shares it on time: %q %v", holder, err)
	}
	a.release("th", 0)
	a.mu.Lock()
	a.held["th"].renewed = time.Now().Add(-a.ttl) // paused for a TTL
	a.mu.Unlock()
	if _, holder, err := a.acquire(ctx, "th", 0); err != nil || holder != "" {
		t.Fatalf("a shares it late, still its own: %q %v", holder, err)
	}
	a.release("th", 0)
	if err := a.kv.Delete(ctx, leaseKey("th")); err != nil { // expired meanwhile
		t.Fatal(err)
	}
	if _, holder, err := b.acquire(ctx, "th", 0); err != nil || holder != "" {
		t.Fatalf("b takes it once expired: %q %v", holder, err)
	}
	a.mu.Lock()
	a.held["th"].renewed = time.Now().Add(-a.ttl)
	a.mu.Unlock()
	_, holder, err := a.acquire(ctx, "th", 0)
	if canonical.CodeOf(err) != canonical.CodeUnavailable || holder != "" {
		t.Fatalf("a shares it late, b's now: %q %v; want unavailable", holder, err)
	}
	select {
	case th := <-lost:
		if th != "th" {
			t.Fatalf("lost %q", th)
		}
	default:
		t.Fatal("a's runs of the thread were not ended")
	}
}
