package triton

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// This file reads JSON as Triton's rapidjson does, through the token-level
// API of internal/json: a request body becomes a tree that keeps every
// member in document order, duplicates included, numbers classified as
// rapidjson classifies them; a syntax error is worded, and placed, as
// rapidjson's GetParseError_En words it (reference section 2).

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

// treeOptions: rapidjson keeps duplicate members (Triton reads the first,
// ExactMappingInput then refuses a repeated input); invalid UTF-8 in the
// request is an error, as the library's default has it.
var treeOptions = []json.Options{json.AllowDuplicateNames(true)}

// parseTree parses a whole request document into a tree. A NUL byte ends
// the input, as in rapidjson's in-memory streams.
func parseTree(data []byte) (jvalue, *syntaxError) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		data = data[:i]
	}
	t := treeReader{data: data, dec: json.NewDecoder(bytes.NewReader(data), treeOptions...)}
	v, err := t.value()
	if err != nil {
		return jvalue{}, err
	}
	if end := int(t.dec.InputOffset()); skipSpace(data, end) < len(data) {
		return jvalue{}, &syntaxError{msg: errRootNotSingular, off: skipSpace(data, end)}
	}
	return v, nil
}

// treeReader builds a tree from a Decoder's tokens.
type treeReader struct {
	data   []byte
	dec    *json.Decoder
	values int // values read into the tree
}

// value reads the next value.
func (t *treeReader) value() (jvalue, *syntaxError) {
	if t.values++; t.values > maxJSONValues {
		return jvalue{}, &syntaxError{msg: "request JSON has more than " + strconv.Itoa(maxJSONValues) + " values", tooMany: true}
	}
	tok, err := t.dec.ReadToken()
	if err != nil {
		return jvalue{}, rapidError(t.data, t.dec, err, true)
	}
	switch tok.Kind() {
	case '{', '[':
		if t.dec.StackDepth() > maxJSONDepth {
			return jvalue{}, &syntaxError{msg: depthMessage, off: int(t.dec.InputOffset()) - 1, tooDeep: true}
		}
		return t.container(tok.Kind())
	case '"':
		return jvalue{kind: jString, s: tok.String()}, nil
	case '0':
		text := tok.String()
		v, ok := classifyNumber(text)
		if !ok {
			return jvalue{}, &syntaxError{msg: errNumberTooBig, off: int(t.dec.InputOffset()) - len(text)}
		}
		return v, nil
	case 't':
		return jvalue{kind: jTrue}, nil
	case 'f':
		return jvalue{kind: jFalse}, nil
	}
	return jvalue{kind: jNull}, nil
}

// container reads the members or elements of the object or array just
// begun, and its end.
func (t *treeReader) container(kind json.Kind) (jvalue, *syntaxError) {
	v := jvalue{kind: jArray}
	end := json.Kind(']')
	if kind == '{' {
		v.kind, end = jObject, '}'
	}
	for t.dec.PeekKind() != end {
		var key string
		if kind == '{' {
			tok, err := t.dec.ReadToken()
			if err != nil {
				return jvalue{}, rapidError(t.data, t.dec, err, true)
			}
			key = tok.String()
		}
		el, err := t.value()
		if err != nil {
			return jvalue{}, err
		}
		if kind == '{' {
			v.obj = append(v.obj, jmember{key: key, val: el})
		} else {
			v.arr = append(v.arr, el)
		}
	}
	if _, err := t.dec.ReadToken(); err != nil {
		return jvalue{}, rapidError(t.data, t.dec, err, true)
	}
	return v, nil
}

// classifyNumber classifies a number's text as rapidjson does: an integer
// that fits int64, one that fits only uint64, or a double (a fraction or
// exponent, or an integer too large for uint64). ok is false for a number
// too big for a double.
func classifyNumber(text string) (v jvalue, ok bool) {
	v = jvalue{kind: jNumber, s: text, num: numDouble}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		v.num, v.i, v.f = numInt, i, float64(i)
		return v, true
	}
	if u, err := strconv.ParseUint(text, 10, 64); err == nil {
		v.num, v.u, v.f = numUint, u, float64(u)
		return v, true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && (f > 1 || f < -1) { // ±Inf: out of range
		return v, false
	}
	v.f = f
	return v, true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// rapidError words err, the Decoder's error reading the next token of
// data, as rapidjson words the same syntax error, at the offset rapidjson
// gives. The library says where it stopped; what rapidjson calls the
// error follows from where the token began (after the delimiter the
// enclosing object or array expects there), the enclosing container, and
// the bytes at the stop. strict says whether strings must be UTF-8.
func rapidError(data []byte, dec *json.Decoder, err error, strict bool) *syntaxError {

	kind, n := dec.StackIndex(dec.StackDepth())
	start := skipSpace(data, int(dec.InputOffset()))
	delim := byte(0)
	if start < len(data) && n > 0 && (kind == '[' && data[start] == ',' || kind == '{' && data[start] == ",:"[n%2]) {
		delim, start = data[start], skipSpace(data, start+1)
	}
	var se *json.SyntacticError
	eof := err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF)
	off := len(data)
	if errors.As(err, &se) && !eof {
		off = int(se.ByteOffset)
	}
	// Where a token may begin: a value after ':', ',' or '[' or at the
	// root; an object member's name (a string) after '{' or ','.
	tokenHere := kind == '{' && n%2 == 1 && delim != 0 ||
		kind == '{' && n%2 == 0 && (n == 0 || delim != 0) && start < len(data) && data[start] == '"' ||
		kind == '[' && (n == 0 || delim != 0) || kind != '{' && kind != '[' && n == 0
	if start < len(data) && tokenHere && (off > start || eof) {
		if e := tokenError(data, start, off, strict); e != nil {
			return e
		}
		// A whole value the input ends after: what follows it is missing.
		switch kind {
		case '{':
			return &syntaxError{msg: errObjectMissCommaOrCurly, off: len(data)}
		case '[':
			return &syntaxError{msg: errArrayMissCommaOrSquare, off: len(data)}
		}
	}
	off = min(start, len(data))
	switch {
	case kind == '{' && n%2 == 1 && delim == 0:
		return &syntaxError{msg: errObjectMissColon, off: off}
	case kind == '{' && n%2 == 0 && (n == 0 || delim != 0):
		return &syntaxError{msg: errObjectMissName, off: off}
	case kind == '{' && n%2 == 0:
		return &syntaxError{msg: errObjectMissCommaOrCurly, off: off}
	case kind == '[' && n > 0 && delim == 0:
		return &syntaxError{msg: errArrayMissCommaOrSquare, off: off}
	case kind != '{' && kind != '[' && off == len(data):
		return &syntaxError{msg: errDocumentEmpty, off: off}
	}
	return &syntaxError{msg: errValueInvalid, off: off}
}

// tokenError is the error inside the token that begins at data[start]:
// the library stopped at off (len(data) when the input ended first). It
// is nil for a whole number or literal that the input ends after.
func tokenError(data []byte, start, off int, strict bool) *syntaxError {
	switch c := data[start]; {
	case c == '"':
		return stringError(data, start, off, strict)
	case c == '-' || '0' <= c && c <= '9':
		if off == len(data) && '0' <= data[off-1] && data[off-1] <= '9' {
			return nil // a whole number
		}
		switch p := data[off-1]; {
		case p == '.':
			return &syntaxError{msg: errNumberMissFraction, off: off}
		case p == 'e' || p == 'E' || (p == '+' || p == '-') && off-start >= 2 && (data[off-2] == 'e' || data[off-2] == 'E'):
			return &syntaxError{msg: errNumberMissExponent, off: off}
		}
	case off == len(data) && isLiteral(data[start:]):
		return nil
	}
	return &syntaxError{msg: errValueInvalid, off: off}
}

// isLiteral reports whether b is true, false or null.
func isLiteral(b []byte) bool {
	return string(b) == "true" || string(b) == "false" || string(b) == "null"
}

// stringError is the error in the string that begins at data[start]: a
// bad escape (the library stops at its backslash), a control character or
// invalid UTF-8 (at the byte), or the end of the input inside it, where
// rapidjson may first meet an escape or a rune cut short.
func stringError(data []byte, start, off int, strict bool) *syntaxError {
	if off < len(data) {
		if data[off] == '\\' {
			msg, _ := escapeError(data, off)
			return &syntaxError{msg: msg, off: off}
		}
		return &syntaxError{msg: errInvalidEncoding, off: off}
	}
	for i := start + 1; i < len(data); i++ {
		if data[i] == '\\' {
			msg, size := escapeError(data, i)
			if msg != "" {
				return &syntaxError{msg: msg, off: i}
			}
			i += size - 1
		}
	}
	for i := max(start+1, len(data)-3); strict && i < len(data); i++ {
		if data[i] >= 0xC0 && !utf8.FullRune(data[i:]) {
			return &syntaxError{msg: errInvalidEncoding, off: i}
		}
	}
	return &syntaxError{msg: errMissQuotationMark, off: len(data)}
}

// escapeError words what is wrong with the escape at data[esc] as
// rapidjson does, or returns "" and the escape's length for a whole, valid
// one.
func escapeError(data []byte, esc int) (msg string, size int) {
	if esc+1 >= len(data) {
		return errEscapeInvalid, 0
	}
	switch data[esc+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return "", 2
	case 'u':
	default:
		return errEscapeInvalid, 0
	}
	r, ok := hex4(data, esc+2)
	switch {
	case !ok:
		return errUnicodeEscapeInvalidHex, 0
	case r >= 0xDC00 && r <= 0xDFFF:
		return errSurrogateInvalid, 0
	case r < 0xD800 || r > 0xDBFF:
		return "", 6
	}
	if esc+7 >= len(data) || data[esc+6] != '\\' || data[esc+7] != 'u' {
		return errSurrogateInvalid, 0
	}
	lo, ok := hex4(data, esc+8)
	if !ok {
		return errUnicodeEscapeInvalidHex, 0
	}
	if lo < 0xDC00 || lo > 0xDFFF {
		return errSurrogateInvalid, 0
	}
	return "", 12
}

// hex4 reads the four hex digits at data[at:].
func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	r, err := strconv.ParseUint(string(data[at:at+4]), 16, 32)
	return rune(r), err == nil
}
