package xmlaction

// The XML action stream's JSON goes through internal/json (issue 29 §2),
// read and written as encoding/json read and wrote it before: the action
// bodies the model writes, the tool results and the requests are the same
// JSON to this package as they were, and its messages about them (a
// tool_failed event's "invalid character ... at offset 13", which models
// and clients read) are worded and placed as encoding/json's were.

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// readOptions read JSON as encoding/json (and the Cortex reference's
// Python json.loads) reads it: of duplicate members the last wins, and
// invalid UTF-8 in a string (and a lone surrogate escape) is U+FFFD.
var readOptions = []json.Options{json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true)}

// writeOptions write JSON as encoding/json wrote it: map keys sorted (the
// rendered <observation> text and a tool's arguments are stable), U+2028
// and U+2029 escaped, invalid UTF-8 as U+FFFD, nil slices and maps null.
var writeOptions = json.JoinOptions(
	json.Deterministic(true), json.EscapeForJS(true), json.AllowInvalidUTF8(true),
	json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true),
)

// htmlSafeOptions add encoding/json.Marshal's default escaping of <, >
// and &: a name written into an <action> body stays free of tags.
var htmlSafeOptions = json.JoinOptions(writeOptions, json.EscapeForHTML(true))

// number is a JSON number as written (encoding/json's Number, which its
// UseNumber gave): a tool gets the parameters' numbers as the model wrote
// them (12345678901234567890 and 1.0 stay so), and a $reference inside
// text interpolates the number's own spelling.
type number string

// MarshalJSONTo writes the number as written.
func (n number) MarshalJSONTo(enc *json.Encoder) error { return enc.WriteValue(json.Value(n)) }

// float is the number as a float64; an error when beyond float64's range
// (strconv's, as json.Number's Float64 had it).
func (n number) float() (float64, error) { return strconv.ParseFloat(string(n), 64) }

// readAny reads the next value of dec as encoding/json with UseNumber
// decoded it into an any: objects map[string]any (the last of duplicate
// names wins: internal/json's own any decoding refuses duplicates), arrays
// []any (never nil), numbers number.
func readAny(dec *json.Decoder) (any, error) {
	switch dec.PeekKind() {
	case '{':
		return readObject(dec)
	case '[':
		return readArray(dec)
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case '"':
		return tok.String(), nil
	case '0':
		return number(tok.String()), nil // the raw text (Token.String)
	}
	return nil, nil // null
}

func readObject(dec *json.Decoder) (any, error) {
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	m := map[string]any{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String()
		v, err := readAny(dec)
		if err != nil {
			return nil, err
		}
		m[name] = v
	}
	_, err := dec.ReadToken()
	return m, err
}

func readArray(dec *json.Decoder) (any, error) {
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	l := []any{}
	for dec.PeekKind() != ']' {
		v, err := readAny(dec)
		if err != nil {
			return nil, err
		}
		l = append(l, v)
	}
	_, err := dec.ReadToken()
	return l, err
}

// decodeJSON decodes the first JSON value of b as encoding/json's Decoder
// (with UseNumber) decoded it: the value, where it ends in b, or a
// *syntaxError worded and placed as that Decoder's.
func decodeJSON(b []byte) (any, int, error) {
	dec := json.NewDecoder(bytes.NewReader(b), readOptions...)
	v, err := readAny(dec)
	if err == nil {
		return v, int(dec.InputOffset()), nil
	}
	end, serr := scanValue(b)
	if serr != nil {
		return nil, 0, serr
	}
	// A top-level number is whole before a byte that cannot follow it
	// ("1x"); the library may refuse the pair, encoding/json did not.
	dec = json.NewDecoder(bytes.NewReader(b[:end]), readOptions...)
	v, err = readAny(dec)
	return v, end, err
}

// decodeWhole decodes b, one JSON value and nothing else but whitespace,
// as encoding/json's Unmarshal did; nil when it is not.
func decodeWhole(b []byte) any {
	v, end, err := decodeJSON(b)
	if err != nil || skipSpace(b, end) < len(b) {
		return nil
	}
	return v
}

// trailingOffset reports whether b holds data after the value ending at
// end, and where encoding/json's Decoder stood once its Token had read
// that data (InputOffset): past a '{' or '[', past a whole value, else at
// the byte it refused.
func trailingOffset(b []byte, end int) (int, bool) {
	p := skipSpace(b, end)
	if p == len(b) {
		return 0, false
	}
	switch b[p] {
	case '{', '[':
		return p + 1, true
	case '}', ']', ',', ':':
		return p, true
	}
	if n, err := scanValue(b[p:]); err == nil {
		return p + n, true
	}
	return p, true
}

// protoValue is canonical.Value for a decoded value: numbers as float64,
// and, as structpb.NewValue had it for a json.Number, nil for the whole
// value when one is beyond float64 (or a string or key is not UTF-8).
func protoValue(v any) *structpb.Value {
	pv, err := toProto(v, false)
	if err != nil {
		return nil
	}
	return pv
}

// toProto converts a decoded value; lenient makes a number beyond float64
// null, as encoding/json's Unmarshal into an any left it.
func toProto(v any, lenient bool) (*structpb.Value, error) {
	switch x := v.(type) {
	case number:
		f, err := x.float()
		if err != nil {
			if lenient {
				return structpb.NewNullValue(), nil
			}
			return nil, err
		}
		return structpb.NewNumberValue(f), nil
	case map[string]any:
		s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(x))}
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, errors.New("invalid UTF-8 in a key")
			}
			pv, err := toProto(e, lenient)
			if err != nil {
				return nil, err
			}
			s.Fields[k] = pv
		}
		return structpb.NewStructValue(s), nil
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(x))}
		for i, e := range x {
			pv, err := toProto(e, lenient)
			if err != nil {
				return nil, err
			}
			l.Values[i] = pv
		}
		return structpb.NewListValue(l), nil
	}
	return structpb.NewValue(v)
}

// floatsFit reports whether every number in v is within float64's range
// (encoding/json failed a decode into float64, or any, on one that is not).
func floatsFit(v any) bool {
	switch x := v.(type) {
	case number:
		_, err := x.float()
		return err == nil
	case map[string]any:
		for _, e := range x {
			if !floatsFit(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !floatsFit(e) {
				return false
			}
		}
	}
	return true
}

// eachMember calls member with the name and value of each member of obj,
// a valid JSON object, in order, while it returns true; false if it
// stopped early.
func eachMember(obj []byte, member func(name string, v json.Value) bool) bool {
	dec := json.NewDecoder(bytes.NewReader(obj), readOptions...)
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil || !member(name, v) {
			return false
		}
	}
	return true
}
