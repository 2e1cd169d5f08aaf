package json

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// A Template is the JSON text of the values of a stream's delta events,
// which differ only in one integer member (a sequence number, an index, a
// time) and one string member (the delta's text). The library marshals
// the value once with marks in those two members; each value after is the
// constant text between the marks with its own integer and string, the
// string quoted by the library, in their place. It is what Marshal writes
// (with the template's options), checked against Marshal when made, at a
// fraction of its cost for an event of a few members: the members are not
// walked, nor the options set up. A template with options is not safe for
// concurrent use.
type Template struct {
	runs     [3][]byte
	intFirst bool // the integer member comes before the string

	// With options the string is quoted by an Encoder with them (without,
	// by AppendQuote, which applies the defaults).
	opts   []Options
	enc    *jsontext.Encoder
	quoted bytes.Buffer
}

// The marks a template is made with: values no event of a stream takes.
const (
	markInt    = -7355608091
	markString = "\x00\x01\x02"
)

// NewTemplate returns the template of the values fill(n, s) makes,
// marshalled with opts, or false when Marshal's text of them is not one
// text with n and s in it (fill does not set both, one of them is written
// twice, Marshal fails) or does not come back from the template for
// values other than the marks.
func NewTemplate(fill func(n int64, s string) any, opts ...Options) (*Template, bool) {
	t := &Template{opts: opts}
	if len(opts) > 0 {
		t.enc = jsontext.NewEncoder(&t.quoted, opts...)
	}
	marked, err := Marshal(fill(markInt, markString), opts...)
	if err != nil {
		return nil, false
	}
	intText := strconv.AppendInt(nil, markInt, 10)
	strText, ok := t.quote(nil, markString)
	if !ok {
		return nil, false
	}
	i, s := bytes.Index(marked, intText), bytes.Index(marked, strText)
	if i < 0 || s < 0 || bytes.Count(marked, intText) != 1 || bytes.Count(marked, strText) != 1 {
		return nil, false
	}
	t.intFirst = i < s
	first, firstLen, second, secondLen := s, len(strText), i, len(intText)
	if t.intFirst {
		first, firstLen, second, secondLen = i, len(intText), s, len(strText)
	}
	t.runs = [3][]byte{marked[:first], marked[first+firstLen : second], marked[second+secondLen:]}
	// Checked with zero values too: a member omitted when zero
	// (omitzero) is not one a template can fill.
	for _, c := range []struct {
		n int64
		s string
	}{{42, "a \"check\" <&> \u2028 é\n"}, {0, ""}} {
		want, err := Marshal(fill(c.n, c.s), opts...)
		if err != nil {
			return nil, false
		}
		if got, _ := t.Append(nil, c.n, c.s); !bytes.Equal(got, want) {
			return nil, false
		}
	}
	return t, true
}

// Append appends to dst the JSON text of the value with integer n and
// string s, and reports true; false, dst as it was, when the template's
// options refuse s (by default, a string that is not valid UTF-8: the
// caller marshals, to fail as Marshal does).
func (t *Template) Append(dst []byte, n int64, s string) ([]byte, bool) {
	start := len(dst)
	dst = append(dst, t.runs[0]...)
	var ok bool
	if t.intFirst {
		dst = strconv.AppendInt(dst, n, 10)
	} else if dst, ok = t.quote(dst, s); !ok {
		return dst[:start], false
	}
	dst = append(dst, t.runs[1]...)
	if !t.intFirst {
		dst = strconv.AppendInt(dst, n, 10)
	} else if dst, ok = t.quote(dst, s); !ok {
		return dst[:start], false
	}
	return append(dst, t.runs[2]...), true
}

// quote appends s as a JSON string as the template's options write it.
func (t *Template) quote(dst []byte, s string) ([]byte, bool) {
	if t.enc == nil {
		if !utf8.ValidString(s) {
			return dst, false
		}
		return AppendQuote(dst, s), true
	}
	t.quoted.Reset()
	t.enc.Reset(&t.quoted, t.opts...)
	if err := t.enc.WriteToken(jsontext.String(s)); err != nil {
		return dst, false
	}
	return append(dst, bytes.TrimSuffix(t.quoted.Bytes(), []byte("\n"))...), true
}
