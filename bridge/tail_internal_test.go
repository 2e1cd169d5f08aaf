package bridge

import (
	"math/rand/v2"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Property: after any pushes, a window holds the newest events pushed, in
// order, within tailWindow events and tailBytes (or the newest alone,
// whatever its size), and counts their bytes exactly.
func TestWindowKeepsTheNewestWithinItsBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var w window
	var pushed []*canonical.Event
	var sizes []int
	for i := range 3 * tailWindow {
		ev := &canonical.Event{Seq: uint64(i + 1)}
		size := rng.IntN(2 << 10)
		if rng.IntN(500) == 0 {
			size = tailBytes + rng.IntN(tailBytes) // larger than the window alone
		}
		w.push(ev, size, tailBytes)
		pushed, sizes = append(pushed, ev), append(sizes, size)
		n := w.len()
		if n < 1 || n > tailWindow {
			t.Fatalf("after %d pushes: %d events held", i+1, n)
		}
		held := w.slice(0, n)
		total := 0
		for j, got := range held {
			k := len(pushed) - n + j
			if got != pushed[k] {
				t.Fatalf("after %d pushes: event %d held is seq %d, want %d", i+1, j, got.GetSeq(), pushed[k].GetSeq())
			}
			total += sizes[k]
		}
		if total != w.bytes || (n > 1 && total > tailBytes) {
			t.Fatalf("after %d pushes: %d events of %d bytes held, counted %d (bound %d)", i+1, n, total, w.bytes, tailBytes)
		}
		// Not one event more would have fitted.
		if k := len(pushed) - n - 1; k >= 0 && n < tailWindow && total+sizes[k] <= tailBytes {
			t.Fatalf("after %d pushes: seq %d let go with room for it", i+1, pushed[k].GetSeq())
		}
	}
	w.reset()
	if w.len() != 0 || w.bytes != 0 {
		t.Fatalf("after reset: %d events, %d bytes", w.len(), w.bytes)
	}
}

// The tails of an instance share tailsBytes: each keeps its share, within
// tailMinBytes and tailBytes, and a window pushed with a smaller share
// lets go of its oldest events down to it.
func TestTailsShareTheirBytes(t *testing.T) {
	b := &Bridge{}
	for _, c := range []struct {
		tails int64
		want  int
	}{{0, tailBytes}, {1, tailBytes}, {64, tailBytes}, {100, tailsBytes / 100}, {1000, tailsBytes / 1000}, {1 << 20, tailMinBytes}} {
		b.tailCount.Store(c.tails)
		if got := b.tailBytesNow(); got != c.want {
			t.Errorf("%d tails: %d bytes each, want %d", c.tails, got, c.want)
		}
	}
	var w window
	for i := range 100 {
		w.push(&canonical.Event{Seq: uint64(i + 1)}, 1<<10, tailBytes)
	}
	w.push(&canonical.Event{Seq: 101}, 1<<10, 10<<10)
	if w.len() != 10 || w.bytes != 10<<10 || w.slice(0, 1)[0].GetSeq() != 92 {
		t.Fatalf("after a push with 10 KiB: %d events of %d bytes from seq %d, want 10 of 10240 from 92", w.len(), w.bytes, w.slice(0, 1)[0].GetSeq())
	}
}
