package loadgen

import (
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

// The two benchmarks below back a proposed change to canonical.Builder
// (see docs/benchmarks.md): a text delta event is three heap objects
// (Event, the oneof wrapper, BlockDelta); allocated as one struct it is
// one, which takes every decoder's per-delta count down by two.

var sinkEvent *canonical.Event

// BenchmarkTextEventBuilder is today's canonical.Builder.Text per delta.
func BenchmarkTextEventBuilder(b *testing.B) {
	bd := canonical.NewBuilder()
	out := bd.Text(nil, "tok ")
	b.ReportAllocs()
	for b.Loop() {
		out = bd.Text(out[:0], "tok ")
		sinkEvent = out[0]
	}
}

// textEvent is the proposal: the event and its kind in one allocation.
type textEvent struct {
	ev   canonical.Event
	kind canonical.KindBlockDelta
	bd   canonical.BlockDelta
}

func newTextEvent(index uint32, s string) *canonical.Event {
	t := &textEvent{}
	t.bd.Index, t.bd.Text = index, s
	t.kind.BlockDelta = &t.bd
	t.ev.Kind = &t.kind
	return &t.ev
}

// BenchmarkTextEventOneAlloc is the proposed allocation.
func BenchmarkTextEventOneAlloc(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkEvent = newTextEvent(1, "tok ")
	}
}

func TestTextEventOneAllocIsAnEvent(t *testing.T) {
	ev := newTextEvent(2, "tok ")
	if got := ev.GetBlockDelta().GetText(); got != "tok " || ev.GetBlockDelta().GetIndex() != 2 {
		t.Fatalf("got %q index %d", got, ev.GetBlockDelta().GetIndex())
	}
	if n := testing.AllocsPerRun(100, func() { sinkEvent = newTextEvent(1, "x") }); n != 1 {
		t.Fatalf("%v allocations, want 1", n)
	}
}
