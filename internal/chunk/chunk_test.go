package chunk

import (
	"bytes"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Any split concatenates back to the input, has at most k pieces, and the
// same seed gives the same cut.
func TestSplit(t *testing.T) {
	data := []byte("hello, \U0001F600 world")
	for seed := uint64(0); seed < 200; seed++ {
		k := 1 + int(seed%9)
		a, b := Split(data, seed, k), Split(data, seed, k)
		if len(a) > k || !bytes.Equal(bytes.Join(a, nil), data) {
			t.Fatalf("seed %d: %d pieces %q", seed, len(a), a)
		}
		if len(a) != len(b) {
			t.Fatalf("seed %d: not deterministic", seed)
		}
	}
	for i := 0; i <= len(data); i++ {
		if p := TwoWay(data, i); !bytes.Equal(append(p[0], p[1]...), data) {
			t.Fatalf("TwoWay %d", i)
		}
	}
	if p := Bytes(data); len(p) != len(data) {
		t.Fatalf("Bytes: %d pieces", len(p))
	}
}

// Random's pieces join back to the input, and a run of seeds reaches both
// ends of its range: one piece, and as many as the input has bytes.
func TestRandom(t *testing.T) {
	data := []byte("0123456789abcdef")
	fewest, most := len(data)+2, 0
	for seed := range uint64(500) {
		p := Random(data, seed)
		if !bytes.Equal(bytes.Join(p, nil), data) || len(p) > len(data)+1 {
			t.Fatalf("seed %d: %q", seed, p)
		}
		fewest, most = min(fewest, len(p)), max(most, len(p))
	}
	if fewest != 1 || most < len(data) {
		t.Fatalf("piece counts from %d to %d, want 1 to at least %d", fewest, most, len(data))
	}
}

// Feed hands over copies, in order, overwrites each once feed returns,
// leaves the pieces alone and stops at the first error.
func TestFeed(t *testing.T) {
	data := []byte("abcdef")
	pieces := TwoWay(data, 2)
	var seen, held [][]byte
	stop := errors.New("stop")
	err := Feed(append(pieces, []byte("gh")), func(p []byte) error {
		seen = append(seen, bytes.Clone(p))
		held = append(held, p)
		if len(seen) == 2 {
			return stop
		}
		return nil
	})
	if err != stop || len(seen) != 2 || string(seen[0]) != "ab" || string(seen[1]) != "cdef" {
		t.Fatalf("err %v, fed %q", err, seen)
	}
	if string(held[0]) != "XX" || string(held[1]) != "XXXX" || string(data) != "abcdef" {
		t.Fatalf("copies after feed %q, pieces %q", held, data)
	}
}
