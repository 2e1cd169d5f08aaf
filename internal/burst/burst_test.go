package burst

import (
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/canonical"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// held is a stream of n events that says all of them are at hand, then
// blocks (or ends with io.EOF when ends) until closed.
type held struct {
	n, given int
	ends     bool
	closed   chan struct{}
}

func (h *held) Recv() (*canonical.Event, error) {
	if h.given < h.n {
		h.given++
		return &canonical.Event{Seq: uint64(h.given)}, nil
	}
	if h.ends {
		return nil, io.EOF
	}
	<-h.closed
	return nil, errors.New("closed")
}
func (h *held) Buffered() int { return h.n - h.given }
func (h *held) Close() error {
	select {
	case <-h.closed:
	default:
		close(h.closed)
	}
	return nil
}

// Events at hand come in one batch of at most MaxEvents, in order; a
// batch stops where nothing more is at hand, so the end (which Recv waits
// for) comes as a batch of its own.
func TestBatches(t *testing.T) {
	r := New(&held{n: MaxEvents + 3, ends: true, closed: make(chan struct{})})
	defer r.Close()
	var sizes []int
	var seq uint64
	for b := range r.C() {
		for _, ev := range b.Events {
			if seq++; ev.GetSeq() != seq {
				t.Fatalf("event %d has seq %d", seq, ev.GetSeq())
			}
		}
		sizes = append(sizes, len(b.Events))
		if b.Err != nil {
			if !errors.Is(b.Err, io.EOF) {
				t.Fatalf("end: %v", b.Err)
			}
			break
		}
	}
	if len(sizes) != 3 || sizes[0] != MaxEvents || sizes[1] != 3 || sizes[2] != 0 {
		t.Fatalf("batch sizes %v, want [%d 3 0] (the last carrying the end)", sizes, MaxEvents)
	}
}

// Close unblocks a Recv that waits and returns once the goroutine is gone
// (goleak checks), whether or not the writer took the batches.
func TestCloseWhileWaiting(t *testing.T) {
	r := New(&held{n: 1, closed: make(chan struct{})})
	select {
	case b := <-r.C():
		if len(b.Events) != 1 || b.Err != nil {
			t.Fatalf("first batch %+v", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no first batch")
	}
	r.Close() // Recv blocks now: Close must unblock it
	r = New(&held{n: 5, ends: true, closed: make(chan struct{})})
	r.Close() // a batch nobody takes
}
