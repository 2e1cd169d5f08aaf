package xmlaction

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/interlingua-dev/interlingua/canonical"
)

// The scanner's lexical helpers: special-byte search, tags, character
// references and $references. Each matcher looks at the bytes available
// and says whether they match, cannot match, or need more bytes.

// indexAny3 returns the index of the first a, b or c in p, or len(p). It
// tests eight bytes at a time (SWAR), since text is mostly plain.
func indexAny3(p []byte, a, b, c byte) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	ma, mb, mc := lo*uint64(a), lo*uint64(b), lo*uint64(c)
	i := 0
	for ; i+8 <= len(p); i += 8 {
		x := binary.LittleEndian.Uint64(p[i:])
		ya, yb, yc := x^ma, x^mb, x^mc
		if ((ya-lo)&^ya|(yb-lo)&^yb|(yc-lo)&^yc)&hi != 0 {
			break
		}
	}
	for ; i < len(p); i++ {
		if x := p[i]; x == a || x == b || x == c {
			return i
		}
	}
	return len(p)
}

type tagKind uint8

const (
	tNone tagKind = iota
	tThoughtOpen
	tThoughtSelf
	tThoughtClose
	tResponseOpen
	tResponseSelf
	tResponseClose
	tActionOpen
	tActionSelf
	tActionClose
)

// tagSet is a set of tag kinds: the structural tags of a state.
type tagSet uint16

func (s tagSet) has(k tagKind) bool { return s&(1<<k) != 0 }

type matchStatus uint8

const (
	matchNo   matchStatus = iota // not structural: the first byte is literal
	matchNeed                    // a prefix: more bytes decide
	matchOK
)

var tagNames = [...]struct {
	name              string
	open, self, close tagKind
	attrs             bool
}{
	{"thought", tThoughtOpen, tThoughtSelf, tThoughtClose, false},
	{"response", tResponseOpen, tResponseSelf, tResponseClose, true},
	{"action", tActionOpen, tActionSelf, tActionClose, true},
}

// maxSimpleTag bounds a tag without attributes (name plus whitespace).
const maxSimpleTag = 64

// matchTag matches a structural tag allowed by set at p[0] == '<'. It
// returns the tag, its length and its attribute bytes. Names match ASCII
// case-insensitively, whitespace may precede '>', and an opening tag with
// attributes runs to the first '>' outside a quoted value, within maxTag
// bytes.
func matchTag(p []byte, set tagSet, final bool, maxTag int) (tagKind, int, []byte, matchStatus) {
	need := func() (tagKind, int, []byte, matchStatus) {
		if final {
			return tNone, 0, nil, matchNo
		}
		return tNone, 0, nil, matchNeed
	}
	i := 1
	if i == len(p) {
		return need()
	}
	closing := p[i] == '/'
	if closing {
		i++
	}
	start := i
	for i < len(p) && i-start < 9 && isLetter(p[i]) {
		i++
	}
	name := p[start:i]
	if i == len(p) {
		// Is name still a prefix of an allowed tag's name?
		for _, t := range tagNames {
			if allowedName(set, t.open, t.self, t.close, closing) && len(name) <= len(t.name) && equalFold(name, t.name[:len(name)]) {
				return need()
			}
		}
		return tNone, 0, nil, matchNo
	}
	for _, t := range tagNames {
		if len(name) != len(t.name) || !equalFold(name, t.name) || !allowedName(set, t.open, t.self, t.close, closing) {
			continue
		}
		if closing {
			for i < len(p) && isSpace(p[i]) && i < maxSimpleTag {
				i++
			}
			switch {
			case i == len(p) && i < maxSimpleTag:
				return need()
			case i < len(p) && p[i] == '>' && set.has(t.close):
				return t.close, i + 1, nil, matchOK
			}
			return tNone, 0, nil, matchNo
		}
		if !t.attrs {
			for i < len(p) && isSpace(p[i]) && i < maxSimpleTag {
				i++
			}
			switch {
			case i == len(p) && i < maxSimpleTag, i == len(p)-1 && p[i] == '/':
				return need()
			case i < len(p) && p[i] == '>' && set.has(t.open):
				return t.open, i + 1, nil, matchOK
			case i+1 < len(p) && p[i] == '/' && p[i+1] == '>' && set.has(t.self):
				return t.self, i + 2, nil, matchOK
			}
			return tNone, 0, nil, matchNo
		}
		// <response ...> and <action ...>: to the first '>' outside a
		// quoted attribute value.
		if c := p[i]; c != '>' && c != '/' && !isSpace(c) {
			return tNone, 0, nil, matchNo
		}
		attrStart := i
		var quote, last byte
		for ; i < len(p) && i < maxTag; i++ {
			c := p[i]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
					last = c
				}
			case (c == '"' || c == '\'') && last == '=':
				quote = c
			case c == '>':
				if p[i-1] == '/' && i-1 >= attrStart {
					if set.has(t.self) {
						return t.self, i + 1, p[attrStart : i-1], matchOK
					}
					return tNone, 0, nil, matchNo
				}
				if set.has(t.open) {
					return t.open, i + 1, p[attrStart:i], matchOK
				}
				return tNone, 0, nil, matchNo
			case !isSpace(c):
				last = c
			}
		}
		if i == len(p) && i < maxTag {
			return need()
		}
		return tNone, 0, nil, matchNo
	}
	return tNone, 0, nil, matchNo
}

func allowedName(set tagSet, open, self, close tagKind, closing bool) bool {
	if closing {
		return set.has(close)
	}
	return set.has(open) || set.has(self)
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// equalFold compares ASCII letters case-insensitively with a lower-case s.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != s[i] {
			return false
		}
	}
	return true
}

// matchEntity matches a character reference at p[0] == '&': the five XML
// entities and decimal or hexadecimal numeric references.
func matchEntity(p []byte, final bool) (rune, int, matchStatus) {
	const maxEntity = 10 // "&#x10FFFF;"
	i := 1
	for i < len(p) && i < maxEntity && p[i] != ';' {
		c := p[i]
		if !(isLetter(c) || c >= '0' && c <= '9' || c == '#') {
			return 0, 0, matchNo
		}
		i++
	}
	if i == len(p) && i < maxEntity {
		if final {
			return 0, 0, matchNo
		}
		return 0, 0, matchNeed
	}
	if i == len(p) || p[i] != ';' {
		return 0, 0, matchNo
	}
	name := string(p[1:i])
	n := i + 1
	switch name {
	case "lt":
		return '<', n, matchOK
	case "gt":
		return '>', n, matchOK
	case "amp":
		return '&', n, matchOK
	case "quot":
		return '"', n, matchOK
	case "apos":
		return '\'', n, matchOK
	}
	if len(name) < 2 || name[0] != '#' {
		return 0, 0, matchNo
	}
	var r rune
	digits, base := name[1:], rune(10)
	if digits[0] == 'x' || digits[0] == 'X' {
		digits, base = digits[1:], 16
	}
	if digits == "" {
		return 0, 0, matchNo
	}
	for j := 0; j < len(digits); j++ {
		c := rune(digits[j])
		var v rune
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case base == 16 && c|0x20 >= 'a' && c|0x20 <= 'f':
			v = (c | 0x20) - 'a' + 10
		default:
			return 0, 0, matchNo
		}
		r = r*base + v
		if r > utf8.MaxRune {
			return 0, 0, matchNo
		}
	}
	if r == 0 || !utf8.ValidRune(r) {
		return 0, 0, matchNo
	}
	return r, n, matchOK
}

// matchRef matches a $reference at p[0] == '$': an ASCII identifier
// [A-Za-z_][A-Za-z0-9_]*, longest match.
func matchRef(p []byte, final bool) (int, matchStatus) {
	if len(p) == 1 {
		if final {
			return 0, matchNo
		}
		return 0, matchNeed
	}
	if !isIdentStart(p[1]) {
		return 0, matchNo
	}
	i := 2
	for i < len(p) && isIdentChar(p[i]) {
		i++
		if i-1 > maxIdent {
			return 0, matchNo
		}
	}
	if i == len(p) && !final {
		return 0, matchNeed
	}
	return i, matchOK
}

func isIdentStart(c byte) bool { return isLetter(c) || c == '_' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// isSpace reports ASCII whitespace.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// completeLen returns len(p) minus a trailing incomplete (but so far valid)
// UTF-8 sequence, which must wait for more bytes.
func completeLen(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		c := p[i]
		if c < utf8.RuneSelf {
			return len(p)
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(p[i:]) {
				return len(p)
			}
			return i
		}
	}
	return len(p)
}

// validString returns p as a string of whole UTF-8, each invalid byte
// replaced by U+FFFD.
func validString(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	return string(canonical.AppendValidUTF8(make([]byte, 0, len(p)+8), p))
}
