package bridge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// Two instances' floor writers noting the seqs of the same threads in any
// order leave each thread's floor at the highest seq noted, never lower;
// what is still noted when a writer closes is written before it returns.
func TestSeqFloorsKeepTheHighest(t *testing.T) {
	f := testFabric(t)
	a, b := startSeqFloors(f.kv, f.log), startSeqFloors(f.kv, f.log)
	const threads, notes = 8, 200
	highest := make([]uint64, threads)
	var wg sync.WaitGroup
	for _, w := range []*seqFloors{a, b} {
		seqs := make([][]uint64, threads)
		for th := range seqs {
			for range notes {
				seqs[th] = append(seqs[th], rand.Uint64N(10_000)+1)
			}
			for _, s := range seqs[th] {
				highest[th] = max(highest[th], s)
			}
		}
		wg.Go(func() {
			for i := range notes {
				for th := range threads {
					w.note(fmt.Sprintf("thread %d", th), seqs[th][i])
				}
			}
		})
	}
	wg.Wait()
	a.close()
	b.close()
	for th := range threads {
		got, err := f.floors.read(context.Background(), fmt.Sprintf("thread %d", th))
		if err != nil || got != highest[th] {
			t.Errorf("thread %d: floor %d, %v; want %d, the highest noted", th, got, err, highest[th])
		}
	}
	f.floors.note("thread 0", 1) // lower: not written over the highest
	f.floors.close()
	f.floors = startSeqFloors(f.kv, f.log) // for Close
	if got, _ := f.floors.read(context.Background(), "thread 0"); got != highest[0] {
		t.Errorf("thread 0: a lower note took the floor from %d to %d", highest[0], got)
	}
}

// resume numbers a thread's next run past every seq given that readers
// may not have, and says so (skipped_after) only when it passes seqs no
// log holds: a dead holder's run-ahead, this instance's own seqs after
// its writes were fenced, or another instance's seqs up to a floor the
// log never got. The log's own last, a floor it let go of the events
// under, and this instance's own count ahead of the log are no skip.
func TestThreadResume(t *testing.T) {
	const ahead = 1000
	for _, c := range []struct {
		name          string
		seq, fencedAt uint64 // the thread's counter and fence before
		logged, floor uint64
		holderDied    bool
		wantSeq       uint64
		wantSkipped   bool
		wantAfter     uint64
	}{
		{name: "from the log", logged: 40, floor: 30, wantSeq: 40},
		{name: "the floor of events the log let go of", logged: 0, floor: 70, wantSeq: 70},
		{name: "the counter ahead of the log (its events on their way)", seq: 55, logged: 40, floor: 50, wantSeq: 55},
		{name: "a dead holder's run-ahead", logged: 40, floor: 30, holderDied: true, wantSeq: 1040, wantSkipped: true, wantAfter: 40},
		{name: "a dead holder after the log let go", logged: 0, floor: 70, holderDied: true, wantSeq: 1070, wantSkipped: true, wantAfter: 70},
		{name: "this instance's seqs after the fence", fencedAt: 48, logged: 40, wantSeq: 48, wantSkipped: true, wantAfter: 40},
		{name: "a fence behind another's end", fencedAt: 48, logged: 1041, wantSeq: 1041},
		{name: "another's seqs to a floor the log never got", logged: 40, floor: 45, wantSeq: 45, wantSkipped: true, wantAfter: 40},
		{name: "a dead holder past a floor the log never got", logged: 40, floor: 45, holderDied: true, wantSeq: 1045, wantSkipped: true, wantAfter: 40},
	} {
		th := &thread{seq: c.seq, fencedAt: c.fencedAt}
		skipped := th.resume(c.logged, c.floor, ahead, c.holderDied)
		if th.seq != c.wantSeq || skipped != c.wantSkipped || (th.skipped != nil) != c.wantSkipped || (c.wantSkipped && *th.skipped != c.wantAfter) || th.fencedAt != 0 {
			t.Errorf("%s: counter %d, skipped %v after %v, fencedAt %d; want %d, %v after %d, 0", c.name, th.seq, skipped, th.skipped, th.fencedAt, c.wantSeq, c.wantSkipped, c.wantAfter)
		}
	}
}
