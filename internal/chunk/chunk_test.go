package chunk

import (
	"bytes"
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
