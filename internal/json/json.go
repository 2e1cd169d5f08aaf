// Package json is the project's one door to JSON: every wire codec marshals
// and unmarshals typed structs through it, and only it imports the library
// (github.com/go-json-experiment/json, the encoding/json/v2 code usable
// without GOEXPERIMENT). The same choice, for the same reason, as Envoy AI
// Gateway's internal/json: one library, one set of options, one place to
// change either (docs: https://pkg.go.dev/github.com/go-json-experiment/json).
//
// The library's defaults hold unless a call passes options: names match
// struct fields case-sensitively, a duplicate object member is an error,
// invalid UTF-8 is an error, nil slices and maps marshal as [] and {} unless
// the field says omitempty or omitzero. A codec whose protocol behaves
// otherwise (a peer that takes the last of duplicate members, say) passes
// the option that says so at its call, with a comment naming the peer.
package json

import (
	"errors"
	"io"
	"reflect"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Value is raw JSON text held as it came (encoding/json's RawMessage).
type Value = jsontext.Value

// Options configure one call; see the With and Allow functions below.
type Options = jsonv2.Options

// Decoder reads a stream of JSON tokens and values (the token-level API for
// codecs whose behaviour depends on member order or number spelling).
type Decoder = jsontext.Decoder

// Encoder writes a stream of JSON tokens and values.
type Encoder = jsontext.Encoder

// Token is one JSON token read by a Decoder or written by an Encoder.
type Token = jsontext.Token

// The delimiter tokens, for writing an object or array token by token.
var (
	BeginObject = jsontext.BeginObject
	EndObject   = jsontext.EndObject
	BeginArray  = jsontext.BeginArray
	EndArray    = jsontext.EndArray
)

// String is the token of the JSON string s (escaped when written).
func String(s string) Token { return jsontext.String(s) }

// Kind is the kind of a token or value: '{', '[', '"', '0', 't', 'f', 'n'.
type Kind = jsontext.Kind

// SyntacticError is a JSON syntax error with the byte offset it was found
// at (for codecs that report errors in their peer's own words).
type SyntacticError = jsontext.SyntacticError

// SemanticError is a value that does not fit the Go type it decodes into,
// with the JSON pointer to it and the type. Its message is worded at random
// by the library ("cannot"/"unable to"): read the fields, never the text.
type SemanticError = jsonv2.SemanticError

// TypeMismatch reports a value that did not fit the Go type it decoded
// into: the JSON pointer to it and the type's kind (pointers followed), for
// a protocol's "invalid type for <field>" message.
func TypeMismatch(err error) (pointer string, kind reflect.Kind, ok bool) {
	var se *SemanticError
	if !errors.As(err, &se) || se.JSONPointer == "" || se.GoType == nil {
		return "", reflect.Invalid, false
	}
	t := se.GoType
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return string(se.JSONPointer), t.Kind(), true
}

// Marshaler and Unmarshaler are the interfaces a type implements to own its
// JSON form, writing to / reading from the stream without a copy.
type (
	Marshaler   = jsonv2.MarshalerTo
	Unmarshaler = jsonv2.UnmarshalerFrom
)

// Marshal returns the JSON form of v.
func Marshal(v any, opts ...Options) ([]byte, error) { return jsonv2.Marshal(v, opts...) }

// MarshalWrite writes the JSON form of v to w.
func MarshalWrite(w io.Writer, v any, opts ...Options) error {
	return jsonv2.MarshalWrite(w, v, opts...)
}

// MarshalEncode writes the JSON form of v to an Encoder.
func MarshalEncode(e *Encoder, v any, opts ...Options) error {
	return jsonv2.MarshalEncode(e, v, opts...)
}

// Unmarshal decodes the one JSON value in b into v.
func Unmarshal(b []byte, v any, opts ...Options) error { return jsonv2.Unmarshal(b, v, opts...) }

// UnmarshalRead decodes the one JSON value read from r into v.
func UnmarshalRead(r io.Reader, v any, opts ...Options) error {
	return jsonv2.UnmarshalRead(r, v, opts...)
}

// UnmarshalDecode decodes the next JSON value of a Decoder into v.
func UnmarshalDecode(d *Decoder, v any, opts ...Options) error {
	return jsonv2.UnmarshalDecode(d, v, opts...)
}

// NewDecoder reads JSON from r; NewEncoder writes it to w.
func NewDecoder(r io.Reader, opts ...Options) *Decoder { return jsontext.NewDecoder(r, opts...) }

// NewEncoder writes JSON to w.
func NewEncoder(w io.Writer, opts ...Options) *Encoder { return jsontext.NewEncoder(w, opts...) }

// UnknownScalars decodes the members of the JSON object body that known
// does not name and whose values are strings, numbers or booleans: a
// frontend's extra sampling parameters (vLLM's top_k, min_p), passed on
// as they are. Members holding objects, arrays or null are left out.
func UnknownScalars(body []byte, known map[string]bool) (map[string]any, error) {
	var all map[string]Value
	if err := Unmarshal(body, &all); err != nil {
		return nil, err
	}
	var out map[string]any
	for k, v := range all {
		if known[k] {
			continue
		}
		switch v.Kind() {
		case '"', '0', 't', 'f':
			var x any
			if Unmarshal(v, &x) == nil {
				if out == nil {
					out = map[string]any{}
				}
				out[k] = x
			}
		}
	}
	return out, nil
}

// Valid reports whether b is one valid JSON value (duplicate names refused).
func Valid(b []byte) bool { return jsontext.Value(b).IsValid() }

// Options a call may pass.
var (
	// AllowDuplicateNames accepts an object with a repeated member name
	// (the last one wins when unmarshalling into a struct or map).
	AllowDuplicateNames = jsontext.AllowDuplicateNames
	// AllowInvalidUTF8 accepts invalid UTF-8 in strings, replacing it with
	// U+FFFD when marshalling.
	AllowInvalidUTF8 = jsontext.AllowInvalidUTF8
	// EscapeForHTML escapes <, > and & as encoding/json does by default.
	EscapeForHTML = jsontext.EscapeForHTML
	// EscapeForJS escapes U+2028 and U+2029 as encoding/json does by default.
	EscapeForJS = jsontext.EscapeForJS
	// Deterministic sorts map keys when marshalling.
	Deterministic = jsonv2.Deterministic
	// MatchCaseInsensitiveNames matches member names to struct fields
	// ignoring case (encoding/json's rule).
	MatchCaseInsensitiveNames = jsonv2.MatchCaseInsensitiveNames
	// RejectUnknownMembers refuses a member no struct field takes.
	RejectUnknownMembers = jsonv2.RejectUnknownMembers
	// FormatNilSliceAsNull and FormatNilMapAsNull marshal nil as null.
	FormatNilSliceAsNull = jsonv2.FormatNilSliceAsNull
	FormatNilMapAsNull   = jsonv2.FormatNilMapAsNull
	// WithUnmarshalers and WithMarshalers install per-type codecs for one call.
	WithUnmarshalers = jsonv2.WithUnmarshalers
	WithMarshalers   = jsonv2.WithMarshalers
	// JoinOptions merges options into one.
	JoinOptions = jsonv2.JoinOptions
	// PreserveRawStrings writes a Value's strings as they are spelled (as
	// encoding/json writes a RawMessage), escaping only what EscapeForHTML
	// and EscapeForJS ask.
	PreserveRawStrings = jsontext.PreserveRawStrings
	// ReportErrorsWithLegacySemantics unmarshals as encoding/json did after
	// a value that does not fit its field (the rest is still decoded, the
	// first such error returned) and words errors as it did.
	ReportErrorsWithLegacySemantics = jsonv1.ReportErrorsWithLegacySemantics
	// WithIndent writes multiline output indented by the given string per
	// level (encoding/json's Encoder.SetIndent("", indent)).
	WithIndent = jsontext.WithIndent
	// OmitEmptyWithLegacySemantics makes omitempty leave out Go's zero
	// values (0, false, nil pointer) as encoding/json did, for structs whose
	// tags were written for it.
	OmitEmptyWithLegacySemantics = jsonv1.OmitEmptyWithLegacySemantics
	// MatchCaseSensitiveDelimiter keeps _ and - significant when names
	// match ignoring case, as in encoding/json (strings.EqualFold).
	MatchCaseSensitiveDelimiter = jsonv1.MatchCaseSensitiveDelimiter
)
