package evergreen

import (
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

// Fragments held for their predecessors are charged what they cost: a
// peer sending one-byte fragments out of order (seq 0 never comes) is
// aborted at max_bytes with the heap grown by at most 1.5 times the bound.
// Each fragment is decoded from its own wire bytes, as the transport
// decodes them. (Charged 65 bytes each, such fragments cost about 260 and
// took the heap to 4.6 times the bound.)
func TestHeldFragmentsHeapBound(t *testing.T) {
	const bound = 8 << 20
	lim := Limits{MaxBytes: bound, MaxNodes: 1 << 20}
	wire, err := proto.Marshal(L("node-0123456789abcdef0123456789abcdef", 1, true, "x"))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := newStore(lim, false)
	n := 0
	for seq := int32(1); ; seq++ {
		f := &ev.NodeFragment{}
		if err := proto.Unmarshal(wire, f); err != nil {
			t.Fatal(err)
		}
		f.Seq = seq
		err := s.apply(f)
		if err == nil {
			n++
			continue
		}
		if canonical.AsError(err).Code != canonical.CodeResourceExhausted {
			t.Fatalf("fragment %d: %v", seq, err)
		}
		break
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d fragments held; heap grew %d KiB (bound %d KiB, %.0f bytes a fragment)", n, grown>>10, bound>>10, float64(grown)/float64(n))
	if grown > bound*3/2 {
		t.Fatalf("heap grew %d bytes holding fragments under max_bytes %d: over 1.5x", grown, bound)
	}
	runtime.KeepAlive(s)
}
