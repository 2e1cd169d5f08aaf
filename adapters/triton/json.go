package triton

import (
	"strconv"
	"unicode/utf8"

	"github.com/interlingua-dev/interlingua/internal/jsonw"
)

// maxJSONDepth is Triton's HTTP_MAX_JSON_NESTING_DEPTH: the deepest nesting
// of objects and arrays accepted in a request or a response event.
const maxJSONDepth = 100

// The parse errors, worded as rapidjson's GetParseError_En words them:
// Triton reports "failed to parse the request JSON buffer: <msg> at
// <offset>".
const (
	errDocumentEmpty           = "The document is empty."
	errRootNotSingular         = "The document root must not be followed by other values."
	errValueInvalid            = "Invalid value."
	errObjectMissName          = "Missing a name for object member."
	errObjectMissColon         = "Missing a colon after a name of object member."
	errObjectMissCommaOrCurly  = "Missing a comma or '}' after an object member."
	errArrayMissCommaOrSquare  = "Missing a comma or ']' after an array element."
	errUnicodeEscapeInvalidHex = "Incorrect hex digit after \\u escape in string."
	errSurrogateInvalid        = "The surrogate pair in string is invalid."
	errEscapeInvalid           = "Invalid escape character in string."
	errMissQuotationMark       = "Missing a closing quotation mark in string."
	errInvalidEncoding         = "Invalid encoding in string."
	errNumberTooBig            = "Number too big to be stored in double."
	errNumberMissFraction      = "Miss fraction part in number."
	errNumberMissExponent      = "Miss exponent in number."
)

// maxJSONValues bounds the values in one request document, so a body of
// many tiny values cannot make the parsed tree many times its size.
const maxJSONValues = 1 << 16

// depthMessage is Triton's message for JSON nested too deeply.
var depthMessage = "JSON nesting depth exceeds maximum allowed limit (" + strconv.Itoa(maxJSONDepth) + ")"

// syntaxError is a JSON syntax error at a byte offset, or (tooDeep) a
// document nested deeper than maxJSONDepth, or (tooMany) one with more
// than maxJSONValues values.
type syntaxError struct {
	msg     string
	off     int
	tooDeep bool
	tooMany bool
}

func (e *syntaxError) Error() string { return e.msg + " at " + strconv.Itoa(e.off) }

// jkind is a JSON value's type.
type jkind uint8

const (
	jNull jkind = iota
	jFalse
	jTrue
	jNumber
	jString
	jArray
	jObject
)

// numKind classifies a number as rapidjson does: an integer that fits
// int64, one that fits only uint64, or a double (anything with a fraction
// or exponent, and integers too large for uint64).
type numKind uint8

const (
	numInt numKind = iota
	numUint
	numDouble
)

// jvalue is a parsed JSON value. Objects keep every member in document
// order, duplicates included, as rapidjson does.
type jvalue struct {
	kind jkind
	s    string // a string's value, or a number's text
	num  numKind
	i    int64
	u    uint64
	f    float64
	arr  []jvalue
	obj  []jmember
}

type jmember struct {
	key string
	val jvalue
}

// find returns the first member named key (rapidjson's FindMember).
func find(obj []jmember, key string) (jvalue, bool) {
	for i := range obj {
		if obj[i].key == key {
			return obj[i].val, true
		}
	}
	return jvalue{}, false
}

// lexer reads JSON from a byte slice. A NUL byte reads as the end of the
// input, as in rapidjson's in-memory streams. strict makes invalid UTF-8 in
// strings an error; otherwise string bytes pass through unchanged (Triton
// writes model output bytes raw, and a rune may be split across events).
type lexer struct {
	data   []byte
	pos    int
	strict bool
	values int // values parsed into a tree
}

func (l *lexer) peek() byte {
	if l.pos < len(l.data) {
		return l.data[l.pos]
	}
	return 0
}

func (l *lexer) ws() {
	for l.pos < len(l.data) && jsonSpace[l.data[l.pos]] {
		l.pos++
	}
}

// Byte classes, looked up rather than compared: a response is mostly
// short strings, and str's four comparisons a byte were a fifth of a
// delta's decoding (BenchmarkDecodeDeltaWire).
var (
	jsonSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}
	// strPlain[strict] holds the bytes a string's run of plain bytes goes
	// on over: jsonw.PlainByte's and, unless strict (which checks their
	// UTF-8), bytes above 0x7F.
	strPlain = func() (t [2][256]bool) {
		t[1] = jsonw.PlainByte
		for c := range 256 {
			t[0][c] = t[1][c] || c >= utf8.RuneSelf
		}
		return t
	}()
)

func (l *lexer) fail(msg string, off int) *syntaxError { return &syntaxError{msg: msg, off: off} }

// parseJSON parses a whole document strictly into a tree.
func parseJSON(data []byte) (jvalue, *syntaxError) {
	l := lexer{data: data, strict: true}
	l.ws()
	if l.peek() == 0 {
		return jvalue{}, l.fail(errDocumentEmpty, l.pos)
	}
	v, err := l.value(1)
	if err != nil {
		return jvalue{}, err
	}
	l.ws()
	if l.peek() != 0 {
		return jvalue{}, l.fail(errRootNotSingular, l.pos)
	}
	return v, nil
}

// value parses the value at l.pos; depth is its nesting level if it is an
// object or array.
func (l *lexer) value(depth int) (jvalue, *syntaxError) {
	if l.values++; l.values > maxJSONValues {
		return jvalue{}, &syntaxError{msg: "request JSON has more than " + strconv.Itoa(maxJSONValues) + " values", off: l.pos, tooMany: true}
	}
	switch c := l.peek(); {
	case c == '{':
		return l.object(depth)
	case c == '[':
		return l.array(depth)
	case c == '"':
		b, _, err := l.str(nil)
		if err != nil {
			return jvalue{}, err
		}
		return jvalue{kind: jString, s: string(b)}, nil
	case c == 't':
		return jvalue{kind: jTrue}, l.literal("true")
	case c == 'f':
		return jvalue{kind: jFalse}, l.literal("false")
	case c == 'n':
		return jvalue{kind: jNull}, l.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return l.number()
	}
	return jvalue{}, l.fail(errValueInvalid, l.pos)
}

func (l *lexer) literal(word string) *syntaxError {
	for i := 0; i < len(word); i++ {
		if l.peek() != word[i] {
			return l.fail(errValueInvalid, l.pos)
		}
		l.pos++
	}
	return nil
}

func (l *lexer) object(depth int) (jvalue, *syntaxError) {
	if depth > maxJSONDepth {
		return jvalue{}, &syntaxError{msg: depthMessage, off: l.pos, tooDeep: true}
	}
	l.pos++ // '{'
	v := jvalue{kind: jObject}
	l.ws()
	if l.peek() == '}' {
		l.pos++
		return v, nil
	}
	for {
		if l.peek() != '"' {
			return jvalue{}, l.fail(errObjectMissName, l.pos)
		}
		key, _, err := l.str(nil)
		if err != nil {
			return jvalue{}, err
		}
		l.ws()
		if l.peek() != ':' {
			return jvalue{}, l.fail(errObjectMissColon, l.pos)
		}
		l.pos++
		l.ws()
		val, err := l.value(depth + 1)
		if err != nil {
			return jvalue{}, err
		}
		v.obj = append(v.obj, jmember{key: string(key), val: val})
		l.ws()
		switch l.peek() {
		case ',':
			l.pos++
			l.ws()
		case '}':
			l.pos++
			return v, nil
		default:
			return jvalue{}, l.fail(errObjectMissCommaOrCurly, l.pos)
		}
	}
}

func (l *lexer) array(depth int) (jvalue, *syntaxError) {
	if depth > maxJSONDepth {
		return jvalue{}, &syntaxError{msg: depthMessage, off: l.pos, tooDeep: true}
	}
	l.pos++ // '['
	v := jvalue{kind: jArray}
	l.ws()
	if l.peek() == ']' {
		l.pos++
		return v, nil
	}
	for {
		el, err := l.value(depth + 1)
		if err != nil {
			return jvalue{}, err
		}
		v.arr = append(v.arr, el)
		l.ws()
		switch l.peek() {
		case ',':
			l.pos++
			l.ws()
		case ']':
			l.pos++
			return v, nil
		default:
			return jvalue{}, l.fail(errArrayMissCommaOrSquare, l.pos)
		}
	}
}

// number scans a number and classifies it as rapidjson does.
func (l *lexer) number() (jvalue, *syntaxError) {
	start := l.pos
	if l.peek() == '-' {
		l.pos++
	}
	switch c := l.peek(); {
	case c == '0':
		l.pos++
	case c >= '1' && c <= '9':
		l.digits()
	default:
		return jvalue{}, l.fail(errValueInvalid, l.pos)
	}
	integer := true
	if l.peek() == '.' {
		l.pos++
		if c := l.peek(); c < '0' || c > '9' {
			return jvalue{}, l.fail(errNumberMissFraction, l.pos)
		}
		l.digits()
		integer = false
	}
	if c := l.peek(); c == 'e' || c == 'E' {
		l.pos++
		if c := l.peek(); c == '+' || c == '-' {
			l.pos++
		}
		if c := l.peek(); c < '0' || c > '9' {
			return jvalue{}, l.fail(errNumberMissExponent, l.pos)
		}
		l.digits()
		integer = false
	}
	text := string(l.data[start:l.pos])
	v := jvalue{kind: jNumber, s: text, num: numDouble}
	if integer {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			v.num, v.i, v.f = numInt, i, float64(i)
			return v, nil
		}
		if u, err := strconv.ParseUint(text, 10, 64); err == nil {
			v.num, v.u, v.f = numUint, u, float64(u)
			return v, nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && (f > 1 || f < -1) { // ±Inf: out of range
		return jvalue{}, l.fail(errNumberTooBig, start)
	}
	v.f = f
	return v, nil
}

func (l *lexer) digits() {
	for l.pos < len(l.data) && l.data[l.pos] >= '0' && l.data[l.pos] <= '9' {
		l.pos++
	}
}

// str reads the string at l.pos (its opening quote). Without escapes it
// returns a slice of the input; otherwise it decodes into dst[:0] and
// returns that, with escaped set.
func (l *lexer) str(dst []byte) (b []byte, escaped bool, err *syntaxError) {
	l.pos++ // opening quote
	start := l.pos
	data := l.data
	i := start
	plain := &strPlain[0]
	if l.strict {
		plain = &strPlain[1]
	}
	// Fast path: no escapes.
	for i < len(data) {
		if plain[data[i]] {
			i++
			continue
		}
		c := data[i]
		switch {
		case c == '"':
			l.pos = i + 1
			return data[start:i], false, nil
		case c == '\\':
			goto slow
		case c < 0x20:
			l.pos = i
			return nil, false, l.ctrl(c, i)
		case c >= utf8.RuneSelf && l.strict:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false, l.fail(errInvalidEncoding, i)
			}
			i += size
			continue
		}
		i++
	}
	return nil, false, l.fail(errMissQuotationMark, len(data))
slow:
	dst = append(dst[:0], data[start:i]...)
	for i < len(data) {
		if plain[data[i]] {
			run := i
			for i++; i < len(data) && plain[data[i]]; i++ {
			}
			dst = append(dst, data[run:i]...)
			continue
		}
		c := data[i]
		switch {
		case c == '"':
			l.pos = i + 1
			return dst, true, nil
		case c == '\\':
			esc := i
			if i+1 >= len(data) {
				return nil, false, l.fail(errEscapeInvalid, esc)
			}
			i++
			switch data[i] {
			case '"', '\\', '/':
				dst = append(dst, data[i])
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := hex4(data, i+1)
				if !ok {
					return nil, false, l.fail(errUnicodeEscapeInvalidHex, esc)
				}
				i += 4
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					if i+2 >= len(data) || data[i+1] != '\\' || data[i+2] != 'u' {
						return nil, false, l.fail(errSurrogateInvalid, esc)
					}
					lo, ok := hex4(data, i+3)
					if !ok {
						return nil, false, l.fail(errUnicodeEscapeInvalidHex, esc)
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return nil, false, l.fail(errSurrogateInvalid, esc)
					}
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				case r >= 0xDC00 && r <= 0xDFFF:
					return nil, false, l.fail(errSurrogateInvalid, esc)
				}
				dst = utf8.AppendRune(dst, r)
			default:
				return nil, false, l.fail(errEscapeInvalid, esc)
			}
			i++
		case c < 0x20:
			return nil, false, l.ctrl(c, i)
		case c >= utf8.RuneSelf && l.strict:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false, l.fail(errInvalidEncoding, i)
			}
			dst = append(dst, data[i:i+size]...)
			i += size
		default:
			dst = append(dst, c)
			i++
		}
	}
	return nil, false, l.fail(errMissQuotationMark, len(data))
}

// ctrl is the error for a raw control character in a string: rapidjson
// reads NUL as the end of the input.
func (l *lexer) ctrl(c byte, off int) *syntaxError {
	if c == 0 {
		return l.fail(errMissQuotationMark, off)
	}
	return l.fail(errInvalidEncoding, off)
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// skip scans past the value at l.pos without keeping it.
func (l *lexer) skip(depth int) *syntaxError {
	switch c := l.peek(); {
	case c == '{':
		if depth > maxJSONDepth {
			return &syntaxError{msg: depthMessage, off: l.pos, tooDeep: true}
		}
		l.pos++
		l.ws()
		if l.peek() == '}' {
			l.pos++
			return nil
		}
		for {
			if l.peek() != '"' {
				return l.fail(errObjectMissName, l.pos)
			}
			if _, _, err := l.str(nil); err != nil {
				return err
			}
			l.ws()
			if l.peek() != ':' {
				return l.fail(errObjectMissColon, l.pos)
			}
			l.pos++
			l.ws()
			if err := l.skip(depth + 1); err != nil {
				return err
			}
			l.ws()
			switch l.peek() {
			case ',':
				l.pos++
				l.ws()
			case '}':
				l.pos++
				return nil
			default:
				return l.fail(errObjectMissCommaOrCurly, l.pos)
			}
		}
	case c == '[':
		if depth > maxJSONDepth {
			return &syntaxError{msg: depthMessage, off: l.pos, tooDeep: true}
		}
		l.pos++
		l.ws()
		if l.peek() == ']' {
			l.pos++
			return nil
		}
		for {
			if err := l.skip(depth + 1); err != nil {
				return err
			}
			l.ws()
			switch l.peek() {
			case ',':
				l.pos++
				l.ws()
			case ']':
				l.pos++
				return nil
			default:
				return l.fail(errArrayMissCommaOrSquare, l.pos)
			}
		}
	case c == '"':
		_, _, err := l.str(nil)
		return err
	case c == 't':
		return l.literal("true")
	case c == 'f':
		return l.literal("false")
	case c == 'n':
		return l.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := l.number()
		return err
	}
	return l.fail(errValueInvalid, l.pos)
}

// appendString appends s as a JSON string the way rapidjson's Writer does:
// '"' and '\\' escaped, control characters as \b \t \n \f \r or \u00XX
// (upper-case hex), everything else, '/' and non-ASCII bytes included,
// written as is.
func appendString[S string | []byte](dst []byte, s S) []byte {
	return jsonw.AppendString(dst, s, jsonw.RapidJSON)
}
