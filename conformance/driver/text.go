package driver

import (
	"slices"
	"strings"
	"unicode/utf8"

	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// MaxTextBytes bounds the text one Text expands to (text × repeat).
const MaxTextBytes = 64 << 20

// Full returns t's whole text: Text repeated Repeat times (at least once),
// truncated to MaxTextBytes.
func Full(t *cv1.Text) string {
	n := max(int(t.GetRepeat()), 1)
	if len(t.GetText())*n > MaxTextBytes {
		n = MaxTextBytes / max(len(t.GetText()), 1)
	}
	return strings.Repeat(t.GetText(), n)
}

// Deltas cuts t's whole text into deltas: at Cuts (byte offsets, possibly
// inside a rune), else every ChunkBytes bytes, else a word per delta (each
// word with its leading space). The deltas join to Full(t).
func Deltas(t *cv1.Text) []string {
	full := Full(t)
	if full == "" {
		return nil
	}
	switch {
	case len(t.GetCuts()) > 0:
		cuts := slices.Clone(t.GetCuts())
		slices.Sort(cuts)
		var out []string
		prev := 0
		for _, c := range cuts {
			if int(c) <= prev || int(c) >= len(full) {
				continue
			}
			out = append(out, full[prev:c])
			prev = int(c)
		}
		return append(out, full[prev:])
	case t.GetChunkBytes() > 0:
		n := int(t.GetChunkBytes())
		out := make([]string, 0, len(full)/n+1)
		for len(full) > n {
			out = append(out, full[:n])
			full = full[n:]
		}
		return append(out, full)
	}
	return Words(full)
}

// Words cuts text into words, each with its leading space, as the scripted
// echo target and the reference peers do.
func Words(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			return append(out, text)
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

// WholeRunes re-cuts deltas so that none ends inside a rune: the bytes of
// a split rune move to the next delta. Empty results are dropped.
func WholeRunes(deltas []string) []string {
	var out []string
	carry := ""
	for _, d := range deltas {
		s := carry + d
		cut := len(s)
		for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
			if utf8.RuneStart(s[i]) {
				if !utf8.FullRuneInString(s[i:]) {
					cut = i
				}
				break
			}
		}
		carry = s[cut:]
		if cut > 0 {
			out = append(out, s[:cut])
		}
	}
	if carry != "" {
		out = append(out, carry)
	}
	return out
}
