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
