package triton

import (
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/sse/ssetest"
)

// BenchmarkEncodeDelta: one canonical text delta to one flushed SSE
// event on the wire (frontend direction).
func BenchmarkEncodeDelta(b *testing.B) {
	enc := newResponseEncoder("", "ensemble", true, false, "", 1<<20)
	bl := canonical.NewBuilder()
	for _, ev := range bl.Text(nil, "x") {
		enc.event(ev)
	}
	sw, err := sse.NewWriter(ssetest.NewDiscard())
	if err != nil {
		b.Fatal(err)
	}
	ev := &canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: " token"}}}
	b.ReportAllocs()
	for b.Loop() {
		resp, _, _ := enc.event(ev)
		if err := sw.Data(resp); err != nil {
			b.Fatal(err)
		}
	}
}

var frame = []byte(`data: {"model_name":"ensemble","model_version":"1","text_output":" token"}` + "\n\n")

// BenchmarkDecodeDeltaWire: one SSE event read off the wire to the
// delta's whole-UTF-8 text (backend direction, wire side).
func BenchmarkDecodeDeltaWire(b *testing.B) {
	var (
		p      sse.Parser
		events []sse.Event
		f      responseFields
		r      responseReader
		acc    canonical.TextAccumulator
		err    error
	)
	b.ReportAllocs()
	for b.Loop() {
		if events, err = p.Feed(frame, events[:0]); err != nil || len(events) != 1 {
			b.Fatal(err)
		}
		if err = r.read(events[0].Data, &f, false); err != nil {
			b.Fatal(err)
		}
		if acc.Append(f.text) == "" {
			b.Fatal("no text")
		}
	}
}

// BenchmarkDecodeDelta: one SSE event to one canonical BlockDelta event
// (backend direction, including the canonical event's allocations).
func BenchmarkDecodeDelta(b *testing.B) { benchmarkDecode(b, frame) }

// trtllmFrame is a response of TensorRT-LLM's ensemble: its outputs not
// asked for come before text_output.
var trtllmFrame = []byte(`data: {"batch_index":0,"context_logits":0.0,"cum_log_probs":0.0,"generation_logits":0.0,"model_name":"ensemble","model_version":"1","output_log_probs":[0.0,0.0,0.0],"text_output":" token"}` + "\n\n")

// BenchmarkDecodeDeltaTRTLLM: BenchmarkDecodeDelta for TensorRT-LLM's
// responses.
func BenchmarkDecodeDeltaTRTLLM(b *testing.B) { benchmarkDecode(b, trtllmFrame) }

// BenchmarkDecodeDeltaEscaped: BenchmarkDecodeDelta for a delta whose
// text has an escape (a newline).
func BenchmarkDecodeDeltaEscaped(b *testing.B) {
	benchmarkDecode(b, []byte(`data: {"model_name":"ensemble","model_version":"1","text_output":" token\n"}`+"\n\n"))
}

func benchmarkDecode(b *testing.B, frame []byte) {
	d := newStreamDecoder(false, 1<<20, 200, "run-")
	out, err := d.Feed(frame, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if out, err = d.Feed(frame, out[:0]); err != nil || len(out) != 1 {
			b.Fatal(err, len(out))
		}
	}
}
