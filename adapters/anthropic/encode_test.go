package anthropic

import (
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/sse/ssetest"
)

// BenchmarkEncodeDelta is the frontend's per-delta cost: a canonical text
// delta rendered as content_block_delta and written as SSE.
func BenchmarkEncodeDelta(b *testing.B) {
	rw := ssetest.NewDiscard()
	sw, err := sse.NewWriter(rw)
	if err != nil {
		b.Fatal(err)
	}
	enc := newEncoder(&sseSink{w: rw, sw: sw, rid: "req_1"}, "m", nil, false)
	bl := canonical.NewBuilder()
	evs := bl.StartMessage(nil, "m1", "assistant")
	evs = bl.Text(evs, "first")
	for _, ev := range evs {
		if _, _, err := enc.event(ev); err != nil {
			b.Fatal(err)
		}
	}
	delta := bl.Text(nil, " token")[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := enc.event(delta); err != nil {
			b.Fatal(err)
		}
		if err := sw.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
