// Package textarena makes the strings of streamed text deltas without an
// allocation each: decoders copy a delta's bytes into a shared chunk and
// hand out the string over it.
package textarena

import "strings"

// Sizes: a chunk holds the texts of many deltas; a text longer than
// MaxText gets an allocation of its own rather than most of a chunk. A text
// kept alive keeps its chunk alive, so the memory a retained text pins is
// at most Chunk bytes.
const (
	Chunk   = 4096
	MaxText = 1024
)

// Arena copies texts into shared chunks: a short delta then costs no
// allocation of its own (one per chunk, amortized), where string(b) costs
// one per delta. A chunk is only appended to, never rewritten, so the
// strings it hands out stay valid and immutable; it is garbage once none
// of them is referenced. The zero value is ready to use; an Arena is not
// safe for concurrent use.
type Arena struct {
	sb *strings.Builder // current chunk; nil before the first text
}

// String returns b as a string.
func (a *Arena) String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > MaxText {
		return string(b)
	}
	if a.sb == nil || a.sb.Cap()-a.sb.Len() < len(b) {
		a.sb = new(strings.Builder)
		a.sb.Grow(Chunk)
	}
	start := a.sb.Len()
	a.sb.Write(b)
	return a.sb.String()[start:]
}
