package bridge

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// testLeases are two instances' leases on one embedded server's bucket.
func testLeases(t *testing.T) (a, b *leases, lost chan string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Defaults()
	f, err := StartFabric(context.Background(), cfg.NATS, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	kv, err := openLeases(context.Background(), f.js, 1, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lost = make(chan string, 4)
	mk := func(self string) *leases {
		return &leases{kv: kv, self: self, ttl: 4 * time.Second, wait: 100 * time.Millisecond,
			log: slog.New(slog.DiscardHandler), lost: func(th string) { lost <- th }}
	}
	return mk("a"), mk("b"), lost
}

// Shares of one instance need one entry; another instance gets the holder
// until the last share is released, then the last seq it left.
func TestLeaseSharesAndHandover(t *testing.T) {
	a, b, _ := testLeases(t)
	ctx := context.Background()
	for range 2 {
		if _, holder, err := a.acquire(ctx, "th", 0); err != nil || holder != "" {
			t.Fatalf("a: %q %v", holder, err)
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
	a.close() // the entry is freed in the background
	last, holder, err := b.acquire(ctx, "th", 0)
	if err != nil || holder != "" || last != 9 {
		t.Fatalf("b after a's last share: last %d, holder %q, %v", last, holder, err)
	}
	if len(a.held) != 0 || len(b.held) != 1 {
		t.Fatalf("held: a %d, b %d", len(a.held), len(b.held))
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
	last, holder, err := b.acquire(ctx, "th", 0)
	if err != nil || holder != "" || last != 12 {
		t.Fatalf("b after a's eviction: last %d, holder %q, %v", last, holder, err)
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
