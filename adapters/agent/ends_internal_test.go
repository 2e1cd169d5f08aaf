package agent

import (
	"testing"
	"time"
)

// TestRecentEnds: an end is kept for endsKeep and no longer, a thread
// keeps its latest end however its runs end, and at most maxEnds are kept.
func TestRecentEnds(t *testing.T) {
	var e recentEnds
	t0 := time.Unix(1000, 0)
	e.note("a", 5, t0)
	e.note("b", 7, t0.Add(time.Second))
	e.note("a", 9, t0.Add(2*time.Second))
	if e.seq["a"] != 9 || e.seq["b"] != 7 {
		t.Fatalf("ends %v, want a 9, b 7", e.seq)
	}
	// a's first end lapses, its second is still kept.
	e.note("c", 1, t0.Add(endsKeep+time.Second/2))
	if e.seq["a"] != 9 || e.seq["b"] != 7 || len(e.order) != 3 {
		t.Fatalf("after a's first end lapsed: %v (%d kept)", e.seq, len(e.order))
	}
	e.note("c", 2, t0.Add(endsKeep+3*time.Second))
	if _, ok := e.seq["a"]; ok || e.seq["c"] != 2 {
		t.Fatalf("after endsKeep: %v", e.seq)
	}
	if _, ok := e.seq["b"]; ok {
		t.Fatalf("b's end outlived endsKeep: %v", e.seq)
	}

	var many recentEnds
	for i := range maxEnds + 10 {
		many.note("t", uint64(i+1), t0)
	}
	if len(many.order) > maxEnds || many.seq["t"] != maxEnds+10 {
		t.Fatalf("%d ends kept, latest %d; want at most %d, latest %d", len(many.order), many.seq["t"], maxEnds, maxEnds+10)
	}
}
