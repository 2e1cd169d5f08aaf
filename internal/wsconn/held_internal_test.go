package wsconn

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"
)

// recordConn records each write made to it.
type recordConn struct {
	net.Conn // nil: only Write is called
	writes   [][]byte
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

// TestHeldConnWrites checks heldConn's property over random write sizes: the
// bytes reach the connection unchanged and in order; a write outside
// hold/release goes straight through; a held one is written by release, or
// with a later write that would take the held bytes past maxHeld, in which
// case each connection write then carries more than maxHeld bytes (held
// bytes and that write together; here a plain Conn, so net.Buffers writes
// them one after the other).
func TestHeldConnWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		rc := &recordConn{}
		h := &heldConn{Conn: rc}
		var want []byte
		write := func(n int) {
			p := make([]byte, n)
			for i := range p { // position-dependent: order shows
				p[i] = byte((len(want) + i) % 251)
			}
			want = append(want, p...)
			if got, err := h.Write(p); got != n || err != nil {
				t.Fatalf("Write(%d bytes) = %d, %v", n, got, err)
			}
		}
		size := func() int { // mostly deltas, some frames past maxHeld
			if rng.IntN(20) == 0 {
				return rng.IntN(2 * maxHeld)
			}
			return 1 + rng.IntN(300)
		}

		write(size())
		if len(rc.writes) != 1 {
			t.Fatalf("a write outside hold made %d connection writes, want 1", len(rc.writes))
		}
		h.hold()
		heldFrom := len(rc.writes)
		var heldBytes int
		for range rng.IntN(400) {
			n := size()
			before := len(rc.writes)
			write(n)
			if len(rc.writes) == before {
				heldBytes += n
				if heldBytes > maxHeld {
					t.Fatalf("%d bytes held, over maxHeld", heldBytes)
				}
				continue
			}
			heldBytes = 0
		}
		if err := h.release(); err != nil {
			t.Fatal(err)
		}
		if heldBytes > 0 && len(rc.writes) == heldFrom {
			t.Fatal("release wrote nothing with bytes held")
		}
		if h.buf != nil || h.held {
			t.Fatalf("after release: buf %v, held %v", h.buf != nil, h.held)
		}
		write(size())
		if got := bytes.Join(rc.writes, nil); !bytes.Equal(got, want) {
			t.Fatalf("connection got %d bytes, want %d in the order written", len(got), len(want))
		}
	}
}

// TestHeldConnNil checks that a Conn not made by Upgrade, whose held is nil,
// can hold and release.
func TestHeldConnNil(t *testing.T) {
	var h *heldConn
	h.hold()
	if err := h.release(); err != nil {
		t.Fatal(err)
	}
}
