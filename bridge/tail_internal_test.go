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
		w.push(ev, size)
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
