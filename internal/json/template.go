package json

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// A Template is the JSON text of the values of a stream's delta events,
// which differ only in one integer member (a sequence number, an index)
// and one string member (the delta's text). The library marshals the
// value once with marks in those two members; each value after is the
// constant text between the marks with its own integer and string, the
// string quoted by the library (AppendQuote), in their place. It is what
// Marshal writes, checked against Marshal when made, at a tenth of its
// cost for an event of a few members (the members are not walked, the
// options not set up).
type Template struct {
	runs     [3][]byte
	intFirst bool // the integer member comes before the string
}

// The marks a template is made with: values no event of a stream takes.
const (
	markInt    = -7355608091
	markString = "\x00\x01\x02"
)

// NewTemplate returns the template of the values fill(n, s) makes, or
// false when Marshal's text of them is not one text with n and s in it
// (fill does not set both, one of them is written twice, Marshal fails)
// or does not come back from the template for values other than the
// marks.
func NewTemplate(fill func(n int64, s string) any) (*Template, bool) {
	marked, err := Marshal(fill(markInt, markString))
	if err != nil {
		return nil, false
	}
	intText := strconv.AppendInt(nil, markInt, 10)
	strText := AppendQuote(nil, markString)
	i, s := bytes.Index(marked, intText), bytes.Index(marked, strText)
	if i < 0 || s < 0 || bytes.Count(marked, intText) != 1 || bytes.Count(marked, strText) != 1 {
		return nil, false
	}
	t := &Template{intFirst: i < s}
	first, firstLen, second, secondLen := s, len(strText), i, len(intText)
	if t.intFirst {
		first, firstLen, second, secondLen = i, len(intText), s, len(strText)
	}
	t.runs = [3][]byte{marked[:first], marked[first+firstLen : second], marked[second+secondLen:]}
	const checkInt, checkString = 42, "a \"check\" <&> \u2028 é\n"
	want, err := Marshal(fill(checkInt, checkString))
	if err != nil {
		return nil, false
	}
	if got, _ := t.Append(nil, checkInt, checkString); !bytes.Equal(got, want) {
		return nil, false
	}
	return t, true
}

// Append appends to dst the JSON text of the value with integer n and
// string s, and reports true; false, dst as it was, when s is not valid
// UTF-8 (Marshal refuses it: the caller marshals, to fail as it does).
func (t *Template) Append(dst []byte, n int64, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return dst, false
	}
	dst = append(dst, t.runs[0]...)
	if t.intFirst {
		dst = strconv.AppendInt(dst, n, 10)
	} else {
		dst = AppendQuote(dst, s)
	}
	dst = append(dst, t.runs[1]...)
	if t.intFirst {
		dst = AppendQuote(dst, s)
	} else {
		dst = strconv.AppendInt(dst, n, 10)
	}
	return append(dst, t.runs[2]...), true
}
