package xmlaction

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// readOptions read action bodies and tool results as the reference's
// json.loads: the last duplicate member wins, invalid UTF-8 is U+FFFD.
var readOptions = []json.Options{json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true)}

// writeOptions: map keys sorted (a tool's arguments are stable), U+2028
// and U+2029 escaped, invalid UTF-8 as U+FFFD, nil slices and maps null.
var writeOptions = json.JoinOptions(json.Deterministic(true), json.EscapeForJS(true),
	json.AllowInvalidUTF8(true), json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true))

// htmlSafeOptions also escape <, > and &, as a client's request and a
// name written into an <action> body always had them.
var htmlSafeOptions = json.JoinOptions(writeOptions, json.EscapeForHTML(true))

// number is a JSON number as written, and MarshalJSONTo writes it so: a
// tool gets 1.0 and 12345678901234567890 as the model wrote them.
type number string

func (n number) MarshalJSONTo(enc *json.Encoder) error { return enc.WriteValue(json.Value(n)) }

// float is the number as a float64; an error beyond float64's range.
func (n number) float() (float64, error) { return strconv.ParseFloat(string(n), 64) }

// decodeJSON decodes b, one JSON value with nothing after it but
// whitespace: objects map[string]any, arrays []any, numbers number.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b), readOptions...)
	v, err := readAny(dec)
	if err != nil {
		return nil, jsonError(err)
	}
	if rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("data after the JSON value at offset %d", len(b)-len(rest))
	}
	return v, nil
}

// readAny reads the next value of dec, token by token.
func readAny(dec *json.Decoder) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		m := map[string]any{}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			if m[name.String()], err = readAny(dec); err != nil {
				return nil, err
			}
		}
		_, err = dec.ReadToken()
		return m, err
	case '[':
		l := []any{}
		for dec.PeekKind() != ']' {
			v, err := readAny(dec)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err = dec.ReadToken()
		return l, err
	case '"':
		return tok.String(), nil
	case '0':
		return number(tok.String()), nil // the number's text
	case 't', 'f':
		return tok.Bool(), nil
	}
	return nil, nil
}

// jsonError is a syntax error as the library words it, at its offset
// (the protocol fixes the error code, invalid_json, not the detail).
func jsonError(err error) error {
	var se *json.SyntacticError
	if errors.As(err, &se) && se.Err != nil {
		return fmt.Errorf("%w at offset %d", se.Err, se.ByteOffset)
	}
	return err
}

// toProto is a decoded value for a canonical field: numbers as float64,
// one beyond float64's range (and a string not UTF-8) as null.
func toProto(v any) *structpb.Value {
	switch x := v.(type) {
	case number:
		if f, err := x.float(); err == nil {
			return structpb.NewNumberValue(f)
		}
	case map[string]any:
		s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(x))}
		for k, e := range x {
			s.Fields[k] = toProto(e)
		}
		return structpb.NewStructValue(s)
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(x))}
		for i, e := range x {
			l.Values[i] = toProto(e)
		}
		return structpb.NewListValue(l)
	default:
		if pv, err := structpb.NewValue(v); err == nil {
			return pv
		}
	}
	return structpb.NewNullValue()
}
