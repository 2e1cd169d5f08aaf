package canonicaltest_test

import (
	"errors"
	"io"
	"testing"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/canonical/canonicaltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Buffered counts the events up to the next one Recv waits for, and Recv
// calls BeforeWait before that one.
func TestScriptBuffered(t *testing.T) {
	evs := canonicaltest.TextRun(3)
	if n := len(evs); n != 9 { // running, message and block starts, 3 deltas, block and message ends, completed
		t.Fatalf("TextRun(3): %d events, want 9", n)
	}
	s := &canonicaltest.Script{Events: evs, Wait: map[int]bool{2: true}}
	var waited []int
	s.BeforeWait = func() error { waited = append(waited, s.Waits); return nil }
	st := canonicaltest.Buffered(s)
	var counts []int
	for {
		counts = append(counts, st.(canonical.Buffered).Buffered())
		if _, err := st.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	want := []int{2, 1, 0, 6, 5, 4, 3, 2, 1, 0}
	if len(counts) != len(want) {
		t.Fatalf("Buffered before each Recv: %v, want %v", counts, want)
	}
	for i := range want {
		if counts[i] != want[i] {
			t.Fatalf("Buffered before each Recv: %v, want %v", counts, want)
		}
	}
	if s.Waits != 1 || len(waited) != 1 {
		t.Fatalf("%d waits, BeforeWait called %d times; want 1 and 1", s.Waits, len(waited))
	}
	if s.Taken() != len(evs) || s.Closed {
		t.Fatalf("taken %d of %d, closed %v before Close", s.Taken(), len(evs), s.Closed)
	}
	if _ = st.Close(); !s.Closed {
		t.Fatal("Close did not record that it was called")
	}
}

// A flush records what it sent; one with nothing new records nothing, and
// HeldBack fails while something written is not flushed.
func TestFlushRecorder(t *testing.T) {
	r := &canonicaltest.FlushRecorder{}
	if r.HeldBack() == nil {
		t.Fatal("HeldBack with nothing written: nil, want an error")
	}
	_, _ = r.Write([]byte("a"))
	if r.HeldBack() == nil || r.Unflushed() != "a" {
		t.Fatalf("HeldBack with %q unflushed: nil, want an error", r.Unflushed())
	}
	r.Flush()
	r.Flush()
	_, _ = r.Write([]byte("b"))
	r.Flush()
	if r.Status != 200 || len(r.Flushed) != 2 || r.Flushed[0] != "a" || r.Flushed[1] != "ab" {
		t.Fatalf("status %d, flushed %q; want 200 and [a ab]", r.Status, r.Flushed)
	}
	if err := r.HeldBack(); err != nil {
		t.Fatal(err)
	}
}
