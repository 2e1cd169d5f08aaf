package wsconn

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"testing"
	"time"
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

// partialConn writes the first limit bytes it is given, then fails every
// write (a write deadline passing mid-frame).
type partialConn struct {
	net.Conn // nil: only Write is called
	limit    int
	out      []byte
}

var errWriteTimeout = errors.New("i/o timeout")

func (p *partialConn) Write(b []byte) (int, error) {
	n := min(len(b), p.limit-len(p.out))
	p.out = append(p.out, b[:n]...)
	if n < len(b) {
		return n, errWriteTimeout
	}
	return n, nil
}

// After a write that failed part-way, in a burst (release) or alone, no
// later write reaches the connection: a close frame written after half a
// data frame would be read by the peer as that frame's payload.
func TestHeldConnBrokenAfterPartialWrite(t *testing.T) {
	for _, held := range []bool{true, false} {
		pc := &partialConn{limit: 10}
		h := &heldConn{Conn: pc}
		if held {
			h.hold()
		}
		_, err := h.Write(bytes.Repeat([]byte("d"), 25))
		if held {
			err = h.release()
		}
		if !errors.Is(err, errWriteTimeout) {
			t.Fatalf("held %v: first write: %v, want the timeout", held, err)
		}
		pc.limit = 1 << 20 // the connection would take more now
		if n, err := h.Write([]byte("close frame")); n != 0 || !errors.Is(err, errWriteTimeout) {
			t.Fatalf("held %v: a write after the partial one = %d, %v; want 0 and the first error", held, n, err)
		}
		h.hold()
		_, _ = h.Write([]byte("more"))
		if err := h.release(); !errors.Is(err, errWriteTimeout) {
			t.Fatalf("held %v: release after the partial write: %v", held, err)
		}
		if string(pc.out) != "dddddddddd" {
			t.Fatalf("held %v: the connection got %q, want only the first 10 bytes", held, pc.out)
		}
	}
}

// deadlineConn records the write deadlines set on it.
type deadlineConn struct {
	net.Conn // nil: only the deadline setters are called
	writes   []time.Time
	fail     bool
}

func (d *deadlineConn) SetWriteDeadline(t time.Time) error {
	d.writes = append(d.writes, t)
	if d.fail {
		return errors.New("deadline refused")
	}
	return nil
}

func (d *deadlineConn) SetDeadline(t time.Time) error { return d.SetWriteDeadline(t) }

// TestHeldConnDeadlines checks that a write deadline reaches the
// connection unless it is the one set last (SetDeadline's included), and
// that after a setting that failed the next is set whatever it is.
func TestHeldConnDeadlines(t *testing.T) {
	dc := &deadlineConn{}
	h := &heldConn{Conn: dc}
	t0 := time.Unix(100, 0)
	t1 := t0.Add(time.Second)
	steps := []struct {
		set  func() error
		want int // connection settings so far
	}{
		{func() error { return h.SetWriteDeadline(t0) }, 1},
		{func() error { return h.SetWriteDeadline(t0) }, 1}, // the same: not again
		{func() error { return h.SetWriteDeadline(t1) }, 2}, // shortened or moved: set
		{func() error { return h.SetWriteDeadline(t0) }, 3},
		{func() error { return h.SetDeadline(t1) }, 4},
		{func() error { return h.SetWriteDeadline(t1) }, 4}, // SetDeadline set it
		{func() error { dc.fail = true; return nil }, 4},
		{func() error { _ = h.SetWriteDeadline(t0); dc.fail = false; return nil }, 5},
		{func() error { return h.SetWriteDeadline(t0) }, 6}, // the failed one is not known
		{func() error { return h.SetWriteDeadline(t0) }, 6},
	}
	for i, s := range steps {
		if err := s.set(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if len(dc.writes) != s.want {
			t.Fatalf("step %d: %d settings reached the connection, want %d", i, len(dc.writes), s.want)
		}
	}
}
