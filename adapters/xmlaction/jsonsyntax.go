package xmlaction

import "strconv"

// This file finds where the first JSON value of some bytes ends, or the
// syntax error in it, as encoding/json's Decoder found them: the state it
// was in names the error ("invalid character '<' looking for beginning of
// object key string") and the offset is one past the byte at fault. An
// invalid action body's tool_failed message quotes them (a golden holds
// one), so they stay as they were when the JSON moved to internal/json;
// TestJSONSyntaxAsEncodingJSON holds the two to each other.

// maxJSONDepth is encoding/json's (and internal/json's) nesting limit.
const maxJSONDepth = 10000

// syntaxError is a JSON syntax error as encoding/json worded it; msg ""
// is input that ends inside the value (io.ErrUnexpectedEOF).
type syntaxError struct {
	msg string
	off int // 1-based: the byte at fault is b[off-1]
}

func (e *syntaxError) Error() string {
	if e.msg == "" {
		return "unexpected EOF"
	}
	return e.msg
}

// errJSONEnds is input that ends inside the value.
var errJSONEnds = &syntaxError{}

// scanValue scans the first JSON value of b (leading whitespace skipped)
// and returns where it ends.
func scanValue(b []byte) (int, *syntaxError) {
	s := jsonScanner{b: b}
	if err := s.value(); err != nil {
		return 0, err
	}
	return s.i, nil
}

type jsonScanner struct {
	b     []byte
	i     int
	depth int
}

// fail is encoding/json's error at b[i] in the state context names.
func (s *jsonScanner) fail(context string) *syntaxError {
	return &syntaxError{msg: "invalid character " + quoteChar(s.b[s.i]) + " " + context, off: s.i + 1}
}

// more skips whitespace and reports whether a byte follows.
func (s *jsonScanner) more() bool {
	s.i = skipSpace(s.b, s.i)
	return s.i < len(s.b)
}

func (s *jsonScanner) value() *syntaxError {
	if !s.more() {
		return errJSONEnds
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		return s.str()
	case c == '-' || isDigit(c):
		return s.num()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.fail("looking for beginning of value")
}

// open enters the object or array whose delimiter is at b[i].
func (s *jsonScanner) open() *syntaxError {
	if s.depth++; s.depth > maxJSONDepth {
		return s.fail("exceeded max depth")
	}
	s.i++
	return nil
}

func (s *jsonScanner) object() *syntaxError {
	if err := s.open(); err != nil {
		return err
	}
	if !s.more() {
		return errJSONEnds
	}
	if s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if !s.more() {
			return errJSONEnds
		}
		if s.b[s.i] != '"' {
			return s.fail("looking for beginning of object key string")
		}
		if err := s.str(); err != nil {
			return err
		}
		if !s.more() {
			return errJSONEnds
		}
		if s.b[s.i] != ':' {
			return s.fail("after object key")
		}
		s.i++
		if err := s.value(); err != nil {
			return err
		}
		if !s.more() {
			return errJSONEnds
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("after object key:value pair")
		}
	}
}

func (s *jsonScanner) array() *syntaxError {
	if err := s.open(); err != nil {
		return err
	}
	if !s.more() {
		return errJSONEnds
	}
	if s.b[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := s.value(); err != nil {
			return err
		}
		if !s.more() {
			return errJSONEnds
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("after array element")
		}
	}
}

// str scans a string; bytes from 0x20 up, invalid UTF-8 included, pass.
func (s *jsonScanner) str() *syntaxError {
	for s.i++; s.i < len(s.b); {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return nil
		case c == '\\':
			if err := s.escape(); err != nil {
				return err
			}
		case c < 0x20:
			return s.fail("in string literal")
		default:
			s.i++
		}
	}
	return errJSONEnds
}

// escape scans the escape sequence whose backslash is at b[i].
func (s *jsonScanner) escape() *syntaxError {
	if s.i++; s.i == len(s.b) {
		return errJSONEnds
	}
	switch s.b[s.i] {
	case 'b', 'f', 'n', 'r', 't', '\\', '/', '"':
		s.i++
		return nil
	case 'u':
		for range 4 {
			if s.i++; s.i == len(s.b) {
				return errJSONEnds
			}
			if !isHex(s.b[s.i]) {
				return s.fail(`in \u hexadecimal character escape`)
			}
		}
		s.i++
		return nil
	}
	return s.fail("in string escape code")
}

func (s *jsonScanner) num() *syntaxError {
	if s.b[s.i] == '-' {
		if s.i++; s.i == len(s.b) {
			return errJSONEnds
		}
		if !isDigit(s.b[s.i]) {
			return s.fail("in numeric literal")
		}
	}
	if s.b[s.i] == '0' {
		s.i++
	} else {
		s.digits()
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		if s.i++; s.i == len(s.b) {
			return errJSONEnds
		}
		if !isDigit(s.b[s.i]) {
			return s.fail("after decimal point in numeric literal")
		}
		s.digits()
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.i == len(s.b) {
			return errJSONEnds
		}
		if !isDigit(s.b[s.i]) {
			return s.fail("in exponent of numeric literal")
		}
		s.digits()
	}
	return nil
}

func (s *jsonScanner) digits() {
	for s.i < len(s.b) && isDigit(s.b[s.i]) {
		s.i++
	}
}

// literal scans true, false or null, whose first byte is at b[i].
func (s *jsonScanner) literal(word string) *syntaxError {
	for k := 1; k < len(word); k++ {
		if s.i++; s.i == len(s.b) {
			return errJSONEnds
		}
		if s.b[s.i] != word[k] {
			return s.fail("in literal " + word + " (expecting " + quoteChar(word[k]) + ")")
		}
	}
	s.i++
	return nil
}

// skipSpace is the index of the first byte from i on that is not JSON
// whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// quoteChar quotes a byte as encoding/json's errors did: a byte from 0x80
// up as the rune of that number ('Ã' for 0xC3).
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	q := strconv.Quote(string(rune(c)))
	return "'" + q[1:len(q)-1] + "'"
}
