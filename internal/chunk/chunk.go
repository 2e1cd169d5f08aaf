// Package chunk cuts byte streams into pieces for re-chunking tests: every
// decoder must yield the same canonical events however its input is split.
package chunk

import (
	"math/rand/v2"
	"slices"
)

// Split cuts data into up to k pieces at cut points drawn from seed. The
// pieces share data's memory; k < 1 is treated as 1.
func Split(data []byte, seed uint64, k int) [][]byte {
	if k < 1 || len(data) == 0 {
		return [][]byte{data}
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cuts := make([]int, 0, k)
	for i := 1; i < k; i++ {
		cuts = append(cuts, r.IntN(len(data)+1))
	}
	slices.Sort(cuts)
	out := make([][]byte, 0, k)
	prev := 0
	for _, c := range cuts {
		out = append(out, data[prev:c])
		prev = c
	}
	return append(out, data[prev:])
}

// Random cuts data as Split does into a number of pieces also drawn from
// seed: from one piece to as many as data has bytes and one more, so a
// run of seeds tries few long pieces and many short (and empty) ones.
func Random(data []byte, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(^seed, seed))
	return Split(data, seed, 1+r.IntN(len(data)+1))
}

// TwoWay returns data cut in two at i.
func TwoWay(data []byte, i int) [][]byte { return [][]byte{data[:i], data[i:]} }

// Bytes returns data one byte per piece.
func Bytes(data []byte) [][]byte {
	out := make([][]byte, len(data))
	for i := range data {
		out[i] = data[i : i+1]
	}
	return out
}

// Feed calls feed with a copy of each piece in turn and overwrites the
// copy once feed has returned, so that a decoder still holding bytes of
// its input shows it in the events it makes later. It stops at the first
// error feed returns, and returns it.
func Feed(pieces [][]byte, feed func(piece []byte) error) error {
	for _, p := range pieces {
		buf := slices.Clone(p)
		err := feed(buf)
		for i := range buf {
			buf[i] = 'X'
		}
		if err != nil {
			return err
		}
	}
	return nil
}
