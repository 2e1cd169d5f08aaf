package agent

import (
	"testing"
	"unsafe"
)

// A ring allocates each of its records once, as it fills, and never moves
// them: the arrays it holds hold max records in all, and an array, once
// added, stays. It keeps the newest max records in order and hands back
// the evicted ones oldest first. One array grown by append failed both
// (10,000 records: 51,670 allocated over the growth, room for 12,424).
func TestRingAllocatesOnce(t *testing.T) {
	for _, max := range []int{1, 5, ringChunk - 1, ringChunk, ringChunk + 1, 1000, 10_000} {
		r := ring{max: max}
		var arrays []*record // first element of each array seen, in order
		var next uint64      // seq of the next record evicted
		total := 2*max + 3
		for seq := uint64(1); seq <= uint64(total); seq++ {
			old, evicted := r.push(record{seq: seq})
			for i, c := range r.chunks {
				p := unsafe.SliceData(c)
				switch {
				case i == len(arrays):
					arrays = append(arrays, p)
				case arrays[i] != p:
					t.Fatalf("max %d: push of seq %d replaced array %d", max, seq, i)
				}
			}
			if evicted != (seq > uint64(max)) {
				t.Fatalf("max %d: push of seq %d evicted %v", max, seq, evicted)
			}
			if evicted {
				if next++; old.seq != next {
					t.Fatalf("max %d: push of seq %d evicted seq %d, want %d", max, seq, old.seq, next)
				}
			}
			if n := min(int(seq), max); r.n != n {
				t.Fatalf("max %d: after seq %d the ring holds %d records, want %d", max, seq, r.n, n)
			}
		}
		room := 0
		for _, c := range r.chunks {
			room += cap(c)
		}
		if room != max {
			t.Fatalf("max %d: the ring's arrays hold %d records", max, room)
		}
		for i := range r.n {
			if want := uint64(total - max + 1 + i); r.at(i).seq != want {
				t.Fatalf("max %d: record %d has seq %d, want %d", max, i, r.at(i).seq, want)
			}
		}
	}
}
