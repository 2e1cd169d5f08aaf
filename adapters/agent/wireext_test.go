package agent

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// randomWire is n wire events with random fields: namespaces and nodes
// the event's or not, text with the netstring's own colons and digits.
func randomWire(rng *rand.Rand, ev *canonical.Event, n int) []wireEvent {
	words := []string{"", "a", "1:2", "é", ":", "12", `"q"`, "ns:x", "\u2028"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	out := make([]wireEvent, n)
	for i := range out {
		w := wireEvent{method: str(), custom: str(), status: str(), timeMs: rng.Int64N(1 << 50), skip: rng.IntN(3),
			namespace: ev.GetNamespace(), node: ev.GetGraphNode()}
		if rng.IntN(3) == 0 {
			w.namespace = []string{str(), str()}
		}
		if rng.IntN(3) == 0 {
			w.node = str()
		}
		if rng.IntN(4) != 0 {
			w.data = []byte(`{"x":"` + str() + `"}`)
		}
		out[i] = w
	}
	return out
}

// Property: what wireList writes, wireRecords reads back, field for field,
// however many events and whatever their text.
func TestWireExtensionRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for c := range 2000 {
		ev := &canonical.Event{Seq: uint64(1 + rng.IntN(1000)), Namespace: []string{"n"}, GraphNode: "g", RunId: "r"}
		ws := randomWire(rng, ev, rng.IntN(4))
		ref := ""
		if rng.IntN(2) == 0 {
			ref = "ckpt-" + strings.Repeat("7", rng.IntN(3))
		}
		ev.Extensions = map[string]*structpb.Value{wireExt: wireList(ws, ev, ref)}
		recs := wireRecords(ev, nil)
		if len(recs) != len(ws) {
			t.Fatalf("case %d: %d records of %d", c, len(recs), len(ws))
		}
		for i, r := range recs {
			w := ws[i]
			if r.seq != ev.Seq || r.method != w.method || r.custom != w.custom || r.status != w.status || !slices.Equal(r.ns, w.namespace) || r.run != "r" {
				t.Fatalf("case %d, event %d: %+v, want %+v", c, i, r, w)
			}
			switch {
			case w.data == nil && ref != "":
				if r.ref != ref || r.frame != nil || r.wire.node != w.node || r.wire.timeMs != w.timeMs || r.wire.skip != w.skip {
					t.Fatalf("case %d, event %d: ref %q %+v, want %q %+v", c, i, r.ref, r.wire, ref, w)
				}
			default:
				if want := string(newFrame(ev.Seq, &w)); string(r.frame) != want {
					t.Fatalf("case %d, event %d: frame %s, want %s", c, i, r.frame, want)
				}
			}
		}
	}
}

// Whatever the extension holds, reading it does not panic, and a list
// cut short yields no event from the cut on.
func FuzzWireRecords(f *testing.F) {
	ev := &canonical.Event{Seq: 9, Namespace: []string{}}
	f.Add(wireList([]wireEvent{{method: "messages", data: []byte(`{"a":1}`)}}, ev, "").GetStringValue())
	f.Add("1:7")
	f.Add("3:abc")
	f.Fuzz(func(t *testing.T, s string) {
		ev := &canonical.Event{Seq: 9, Namespace: []string{}, Extensions: map[string]*structpb.Value{wireExt: structpb.NewStringValue(strings.ToValidUTF8(s, "?"))}}
		_ = wireRecords(ev, nil)
	})
}

// BenchmarkWireList: a text delta's one wire event, as the runtime
// attaches it to every delta of a run.
func BenchmarkWireList(b *testing.B) {
	ev := canonical.NewTextDelta(0, "tok ")
	ws := []wireEvent{{method: "messages", namespace: []string{}, timeMs: 1_795_842_541_085, data: []byte(`{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"tok "}}`)}}
	b.ReportAllocs()
	for b.Loop() {
		_ = wireList(ws, ev, "")
	}
}
