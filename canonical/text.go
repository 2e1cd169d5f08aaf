package canonical

import (
	"strings"
	"unicode/utf8"
)

// TextAccumulator turns byte chunks cut anywhere into whole-UTF-8 strings.
// A rune split across chunks is held back until its last byte arrives;
// bytes that can never form a rune become U+FFFD. The hold-back is at most
// three bytes. The zero value is ready to use.
type TextAccumulator struct {
	held [utf8.UTFMax]byte
	n    int
	buf  []byte
}

// Append returns the whole runes completed by chunk (possibly "").
func (a *TextAccumulator) Append(chunk []byte) string {
	if a.n == 0 {
		return a.take(chunk)
	}
	a.buf = append(append(a.buf[:0], a.held[:a.n]...), chunk...)
	a.n = 0
	return a.take(a.buf)
}

// AppendString is Append for a string chunk.
func (a *TextAccumulator) AppendString(chunk string) string {
	if a.n == 0 && utf8.ValidString(chunk) {
		return chunk
	}
	a.buf = append(append(a.buf[:0], a.held[:a.n]...), chunk...)
	a.n = 0
	return a.take(a.buf)
}

// take holds back an incomplete rune at the end of p and returns the rest.
func (a *TextAccumulator) take(p []byte) string {
	cut := incompleteTail(p)
	a.n = copy(a.held[:], p[cut:])
	p = p[:cut]
	if utf8.Valid(p) {
		return string(p)
	}
	return replaceInvalid(p)
}

// replaceInvalid replaces each invalid byte with U+FFFD.
func replaceInvalid(p []byte) string {
	return string(AppendValidUTF8(make([]byte, 0, len(p)+8), p))
}

// AppendValidUTF8 appends p to dst with each byte that is not part of a
// valid UTF-8 sequence replaced by U+FFFD. One replacement per byte (not
// per run of bad bytes, as strings.ToValidUTF8 does) keeps the output
// independent of where chunks were cut.
func AppendValidUTF8(dst, p []byte) []byte {
	if utf8.Valid(p) {
		return append(dst, p...)
	}
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, p[:n]...)
		}
		p = p[n:]
	}
	return dst
}

// Flush returns what is held back (an incomplete rune: a U+FFFD per byte)
// and empties the accumulator. Call it at end of stream.
func (a *TextAccumulator) Flush() string {
	n := a.n
	a.n = 0
	return strings.Repeat("\uFFFD", n)
}

// Pending reports how many bytes are held back.
func (a *TextAccumulator) Pending() int { return a.n }

// incompleteTail returns the index where a trailing incomplete (but so far
// valid) rune starts, or len(p) when p ends on a rune boundary.
func incompleteTail(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		c := p[i]
		if c < utf8.RuneSelf {
			return len(p) // ASCII: boundary
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[i:]) && validPrefix(p[i:]) {
				return i
			}
			return len(p)
		}
	}
	return len(p)
}

// validPrefix reports whether p could begin a valid rune.
func validPrefix(p []byte) bool {
	var full [utf8.UTFMax]byte
	n := copy(full[:], p)
	// Pad with the smallest continuation byte and see if a rune decodes to
	// the full expected length.
	for j := n; j < utf8.UTFMax; j++ {
		full[j] = 0x80
	}
	r, size := utf8.DecodeRune(full[:])
	if r == utf8.RuneError && size <= 1 {
		// Try the largest continuation byte too (e.g. E0 needs A0..BF).
		for j := n; j < utf8.UTFMax; j++ {
			full[j] = 0xBF
		}
		r, size = utf8.DecodeRune(full[:])
	}
	return !(r == utf8.RuneError && size <= 1) && size > n
}
