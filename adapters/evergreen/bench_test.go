package evergreen

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

// nopSink is a renderer sink over a store that drops messages, optionally
// marshaling them as a gRPC transport would.
type nopSink struct {
	memSink
	marshal bool
	buf     []byte
}

func (s *nopSink) send(m *ev.SessionMessage) error {
	if s.marshal {
		var err error
		s.buf, err = proto.MarshalOptions{}.MarshalAppend(s.buf[:0], m)
		return err
	}
	return nil
}

func bigStore() *store { return newStore(Limits{MaxBytes: 1 << 40}, false) }

// BenchmarkAssembleDelta is the receive side per text delta: one fragment
// appended to a streaming leaf.
func BenchmarkAssembleDelta(b *testing.B) {
	st := bigStore()
	if err := st.apply(L("a", 0, true, "tok ", tp)); err != nil {
		b.Fatal(err)
	}
	f := L("a", 1, true, "tok ")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f.Seq = int32(i + 1)
		if err := st.apply(f); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRender(b *testing.B, marshal bool) {
	st := bigStore()
	counterIDs(st)
	out, _ := st.reserve("r")
	sk := &nopSink{memSink: memSink{st: st}, marshal: marshal}
	r := newRenderer(sk, &generate{response: []*node{out}}, false, false, 1<<20)
	for _, e := range echoRun()[:4] { // running, message start, block start, first delta
		if _, err := r.event(e); err != nil {
			b.Fatal(err)
		}
	}
	delta := &canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "tok "}}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := r.event(delta); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderDelta is the send side per text delta: the fragment
// built and the produced node recorded in the store.
func BenchmarkRenderDelta(b *testing.B) { benchRender(b, false) }

// BenchmarkRenderDeltaMarshal adds the protobuf encoding gRPC does.
func BenchmarkRenderDeltaMarshal(b *testing.B) { benchRender(b, true) }

// BenchmarkDecodeDelta is the backend's per-delta path: an upstream
// fragment assembled and turned into a canonical text delta.
func BenchmarkDecodeDelta(b *testing.B) {
	st := bigStore()
	out, _ := st.node("r")
	d := newOutputDecoder(map[string]*node{"response": out}, []string{"response"}, 1<<20)
	if err := st.apply(L("r", 0, true, "tok ", tp)); err != nil {
		b.Fatal(err)
	}
	events, _ := d.advance(nil)
	f := L("r", 1, true, "tok ")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f.Seq = int32(i + 1)
		if err := st.apply(f); err != nil {
			b.Fatal(err)
		}
		events, _ = d.advance(events[:0])
	}
}
