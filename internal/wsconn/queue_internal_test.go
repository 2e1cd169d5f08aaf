package wsconn

import (
	"fmt"
	"testing"
)

// The queue keeps frames in order, refuses the one past max, and holds no
// array once drained of a burst larger than keptFrames (an idle connection
// costs no queue memory; a channel of SendQueue frames cost 8 KiB at the
// default).
func TestSendQueue(t *testing.T) {
	q := newSendQueue(100)
	if cap(q.frames) != 0 {
		t.Fatalf("a new queue holds an array of %d frames", cap(q.frames))
	}
	for round := range 3 {
		for i := range 100 {
			if !q.push(frame{typ: 1, data: fmt.Appendf(nil, "%d-%d", round, i)}) {
				t.Fatalf("round %d: push %d refused below max", round, i)
			}
		}
		if q.push(frame{}) {
			t.Fatalf("round %d: push past max accepted", round)
		}
		for i := range 100 {
			f, ok := q.pop()
			if want := fmt.Sprintf("%d-%d", round, i); !ok || string(f.data) != want {
				t.Fatalf("round %d: pop %d = %q, %v; want %q", round, i, f.data, ok, want)
			}
			if i == 49 { // half drained: the freed front takes new frames
				for j := range 50 {
					q.push(frame{data: fmt.Appendf(nil, "late-%d", j)})
				}
			}
		}
		for j := range 50 {
			if f, ok := q.pop(); !ok || string(f.data) != fmt.Sprintf("late-%d", j) {
				t.Fatalf("round %d: late pop %d = %q, %v", round, j, f.data, ok)
			}
		}
		if _, ok := q.pop(); ok {
			t.Fatalf("round %d: pop from an empty queue", round)
		}
		if cap(q.frames) > keptFrames {
			t.Fatalf("round %d: a drained queue keeps an array of %d frames", round, cap(q.frames))
		}
	}
}
