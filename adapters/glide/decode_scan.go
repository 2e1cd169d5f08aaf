package glide

import "unicode/utf8"

// This file is the minimal JSON scanner of the fast path (decode_fast.go).

// scan is a frame being scanned. Each method reads one thing at d[i:],
// after optional whitespace, and returns the index just past it, or -1 for
// anything the fast path does not handle, invalid JSON included. An index
// of -1 going in gives -1, so steps chain without a check between them.
// The index travels by value so that it stays in a register.
type scan []byte

// maxSkipDepth bounds the nesting of skipped values (echoed metadata) on
// the fast path; deeper frames go to encoding/json, which has its own.
const maxSkipDepth = 64

// span is a string value's bytes in the frame, without the quotes; same
// when they are the hint str was given.
type span struct {
	lo, hi  int
	same    bool
	escaped bool // d[lo:hi] holds escapes or invalid UTF-8: its value is jsonw.Unquote's
}

// at reports whether d[i] is c; false when i is out of range, -1 included.
func (d scan) at(i int, c byte) bool { return uint(i) < uint(len(d)) && d[i] == c }

// ws skips JSON whitespace.
func (d scan) ws(i int) int {
	for uint(i) < uint(len(d)) && byteClass[d[i]]&classSpace != 0 {
		i++
	}
	return i
}

// next consumes c, after whitespace.
func (d scan) next(i int, c byte) int {
	if uint(i) < uint(len(d)) && d[i] != c {
		i = d.ws(i)
	}
	if d.at(i, c) {
		return i + 1
	}
	return -1
}

// unknownKey is what an object's member function returns for a key its Go
// type does not have: object then skips the value.
const unknownKey = -2

// object reads an object, calling member with each key and the index of
// its value, which member consumes, or leaves to object by returning
// unknownKey.
//
// Keys must be lowercase ASCII without escapes, or the fast path gives up:
// encoding/json matches keys to tags without regard to case (and with
// Unicode foldings such as the Kelvin sign for k), and our tags are all
// lowercase ASCII, so such a key either is one of them, exactly, or cannot
// match any.
func (d scan) object(i int, member func(key []byte, i int) int) int {
	if i = d.next(i, '{'); i < 0 {
		return -1
	}
	if j := d.next(i, '}'); j >= 0 {
		return j
	}
	for {
		if i = d.ws(i); !d.at(i, '"') {
			return -1
		}
		end := d.run(i+1, classKey)
		v := d.next(end+1, ':')
		if !d.at(end, '"') || v < 0 {
			return -1
		}
		j := member(d[i+1:end], v)
		if j == unknownKey {
			j = d.skip(v, 0)
		}
		if i = d.next(j, ','); i >= 0 {
			continue
		}
		return d.next(j, '}')
	}
}

// str reads a string whose bytes are its value as encoding/json decodes
// it: no escape, no control byte (invalid JSON) and valid UTF-8 (which
// encoding/json would otherwise turn into U+FFFD). hint is a string str
// read before (so one that passed these checks): a string equal to it
// needs no byte-by-byte look.
func (d scan) str(i int, sp *span, hint string) int {
	if i = d.ws(i); !d.at(i, '"') {
		return -1
	}
	if end := i + 1 + len(hint); end < len(d) && d[end] == '"' && string(d[i+1:end]) == hint {
		*sp = span{lo: i + 1, hi: end, same: true}
		return end + 1
	}
	lo, ascii := i+1, true
	j := d.run(lo, classValue)
	for j < len(d) && d[j] >= utf8.RuneSelf { // part of a rune: checked below
		ascii = false
		j = d.run(j+1, classValue)
	}
	if !d.at(j, '"') { // a backslash, a control byte or the end
		return -1
	}
	if !ascii && !utf8.Valid(d[lo:j]) {
		return -1
	}
	*sp = span{lo: lo, hi: j}
	return j + 1
}

// text reads a string as str does, or else (escapes, invalid UTF-8) as
// its raw contents for jsonw.Unquote, once skipEscaped has checked them:
// the content of a chunk, where escapes are common (a newline, a quote).
func (d scan) text(i int, sp *span, hint string) int {
	if j := d.str(i, sp, hint); j >= 0 {
		return j
	}
	if i = d.ws(i); !d.at(i, '"') {
		return -1
	}
	j := d.skipEscaped(i)
	if j < 0 {
		return -1
	}
	*sp = span{lo: i + 1, hi: j - 1, escaped: true}
	return j
}

// skipString skips a string; its value is not needed, so any byte but a
// control byte may appear, as encoding/json allows.
func (d scan) skipString(i int) int {
	if i = d.ws(i); !d.at(i, '"') {
		return -1
	}
	if j := d.run(i+1, classSkipped); d.at(j, '"') {
		return j + 1
	}
	return d.skipEscaped(i)
}

// run returns the index of the first byte at or after d[j] not in class
// cl, or len(d). (A byte at a time with a table: a frame's strings are too
// short for anything wider to pay.)
func (d scan) run(j int, cl uint8) int {
	for j < len(d) && byteClass[d[j]]&cl != 0 {
		j++
	}
	return j
}

// skipEscaped skips the string at d[i] a byte at a time, escapes included.
func (d scan) skipEscaped(i int) int {
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			e := j + 1 // the escaped byte
			switch {
			case e >= len(d):
				return -1
			case d[e] == 'u':
				if e+4 >= len(d) || !isHex(d[e+1]) || !isHex(d[e+2]) || !isHex(d[e+3]) || !isHex(d[e+4]) {
					return -1
				}
				j = e + 4
			case d[e] == '"' || d[e] == '\\' || d[e] == '/' || d[e] == 'b' || d[e] == 'f' ||
				d[e] == 'n' || d[e] == 'r' || d[e] == 't':
				j = e
			default:
				return -1
			}
		}
	}
	return -1
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// Byte classes: the bytes that may appear in a string of each kind without
// a closer look.
const (
	classValue   = 1 << iota // printable ASCII but the quote and the backslash
	classKey                 // the same without capitals
	classSkipped             // any byte but the quote, the backslash and controls
	classSpace               // JSON whitespace
)

var byteClass = func() (t [256]uint8) {
	t[' '], t['\t'], t['\n'], t['\r'] = classSpace, classSpace, classSpace, classSpace
	for c := range t {
		if c >= 0x20 && c != '"' && c != '\\' {
			t[c] |= classSkipped
			if c < utf8.RuneSelf {
				t[c] |= classValue
				if c < 'A' || c > 'Z' {
					t[c] |= classKey
				}
			}
		}
	}
	return t
}()

// boolean reads true or false.
func (d scan) boolean(i int, b *bool) int {
	i = d.ws(i)
	if j := d.literal(i, "true"); j >= 0 {
		*b = true
		return j
	}
	*b = false
	return d.literal(i, "false")
}

// skip validates and skips any JSON value.
func (d scan) skip(i, depth int) int {
	if i = d.ws(i); uint(i) >= uint(len(d)) {
		return -1
	}
	switch d[i] {
	case '"':
		return d.skipString(i)
	case '{', '[':
		return d.skipContainer(i, depth)
	case 't':
		return d.literal(i, "true")
	case 'f':
		return d.literal(i, "false")
	case 'n':
		return d.literal(i, "null")
	}
	return d.number(i)
}

// skipContainer skips the object or array at d[i].
func (d scan) skipContainer(i, depth int) int {
	if depth >= maxSkipDepth {
		return -1
	}
	end := byte('}')
	if d[i] == '[' {
		end = ']'
	}
	i++
	if j := d.next(i, end); j >= 0 {
		return j
	}
	for {
		if end == '}' {
			i = d.next(d.skipString(i), ':')
		}
		if i = d.skip(i, depth+1); i < 0 {
			return -1
		}
		if j := d.next(i, ','); j >= 0 {
			i = j
			continue
		}
		return d.next(i, end)
	}
}

// literal consumes lit (true, false, null).
func (d scan) literal(i int, lit string) int {
	if i >= 0 && len(d)-i >= len(lit) && string(d[i:i+len(lit)]) == lit {
		return i + len(lit)
	}
	return -1
}

// number skips -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? at d[i]. A
// digit right after it (as in 01) fails where the caller wants a
// delimiter.
func (d scan) number(i int) int {
	if d.at(i, '-') {
		i++
	}
	if d.at(i, '0') {
		i++
	} else if i = d.digits(i); i < 0 {
		return -1
	}
	if d.at(i, '.') {
		if i = d.digits(i + 1); i < 0 {
			return -1
		}
	}
	if d.at(i, 'e') || d.at(i, 'E') {
		i++
		if d.at(i, '+') || d.at(i, '-') {
			i++
		}
		i = d.digits(i)
	}
	return i
}

// digits skips one digit or more.
func (d scan) digits(i int) int {
	j := i
	for uint(j) < uint(len(d)) && '0' <= d[j] && d[j] <= '9' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
