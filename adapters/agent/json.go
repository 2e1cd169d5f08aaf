package agent

import (
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/internal/jsonw"
)

// The JSON writers below build frames by appending to a caller's buffer, so
// the per-delta path allocates nothing but the frame it keeps. Output is
// deterministic (object keys of structpb values sorted), so golden files
// compare byte for byte; encoding/json would do the same work with
// reflection and protojson deliberately randomises whitespace.

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; <, > and & are not escaped (the frames are not HTML).
func appendString(b []byte, s string) []byte { return jsonw.AppendString(b, s, jsonw.Plain) }

// appendMarshalString appends s as encoding/json writes a string (<, > and
// & escaped): for what must be json.Marshal's bytes, the thread record
// and the run.start command.
func appendMarshalString[S ~string | ~[]byte](b []byte, s S) []byte {
	return jsonw.AppendString(b, s, jsonw.EncodingJSON)
}

// appendMarshalObject appends m as json.Marshal writes a map: keys sorted
// and escaped as appendMarshalString escapes them, each value by value.
func appendMarshalObject[V any](b []byte, m map[string]V, value func([]byte, V) []byte) []byte {
	return appendSortedObject(b, m, jsonw.EncodingJSON, nil, value)
}

// appendSortedObject appends m as a JSON object: keys sorted and escaped per
// mode, each value by value; keep, when not nil, says which members to
// write.
func appendSortedObject[V any](b []byte, m map[string]V, mode jsonw.Mode, keep func(V) bool, value func([]byte, V) []byte) []byte {
	keys := make([]string, 0, len(m)) // one allocation, where slices.Sorted grows its own
	for k, v := range m {
		if keep == nil || keep(v) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = value(append(jsonw.AppendString(b, k, mode), ':'), m[k])
	}
	return append(b, '}')
}

// appendNamespace appends ns as a JSON array of strings.
func appendNamespace(b []byte, ns []string) []byte {
	b = append(b, '[')
	for i, s := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendFloat appends f as encoding/json formats a float64; NaN and
// infinities, which JSON cannot hold, become null.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendValue appends a structpb value as JSON; nil is null.
func appendValue(b []byte, v *structpb.Value) []byte {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return appendString(b, k.StringValue)
	case *structpb.Value_NumberValue:
		return appendFloat(b, k.NumberValue)
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue)
	case *structpb.Value_StructValue:
		return appendStruct(b, k.StructValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e)
		}
		return append(b, ']')
	}
	return append(b, "null"...)
}

// appendStruct appends a structpb struct as a JSON object, keys sorted.
func appendStruct(b []byte, s *structpb.Struct) []byte {
	return appendFields(b, s.GetFields(), false)
}

// appendFields appends a map of values as a JSON object with sorted keys;
// scalarsOnly drops lists and structs (MessageMetadata holds scalars only).
func appendFields(b []byte, m map[string]*structpb.Value, scalarsOnly bool) []byte {
	var keep func(*structpb.Value) bool
	if scalarsOnly {
		keep = isScalar
	}
	return appendSortedObject(b, m, jsonw.Plain, keep, appendValue)
}

func isScalar(v *structpb.Value) bool {
	switch v.GetKind().(type) {
	case *structpb.Value_ListValue, *structpb.Value_StructValue:
		return false
	}
	return true
}

// appendKey appends ,"key": (or "key": when first is set).
func appendKey(b []byte, key string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}
