package agent

import (
	"bytes"
	"math"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// peerJSON reads JSON a peer sent. The reference server (langgraph-api)
// and the SDK are JavaScript: JSON.parse keeps the last of repeated member
// names, and a stream's invalid UTF-8 decodes to U+FFFD (TextDecoder), so
// both are accepted the same way here rather than failing the frame.
var peerJSON = json.JoinOptions(json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

// wireJSON writes JSON: invalid UTF-8 in a string becomes U+FFFD (a frame
// is never refused for a string an upstream sent), two map keys that
// become equal so are both written (as JSON.stringify would), and map keys
// are sorted, so a frame's bytes depend only on its content.
var wireJSON = json.JoinOptions(json.AllowInvalidUTF8(true), json.AllowDuplicateNames(true), json.Deterministic(true))

// appendJSON appends the JSON form of v (wireJSON) to b. The values this
// package writes always marshal; should one not, null stands for it.
func appendJSON(b []byte, v any) []byte {
	n := len(b)
	buf := bytes.NewBuffer(b)
	if json.MarshalWrite(buf, v, wireJSON) != nil {
		return append(buf.Bytes()[:n], "null"...)
	}
	return buf.Bytes()
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte { return appendJSON(b, s) }

// appendValue appends a structpb value as JSON; nil is null.
func appendValue(b []byte, v *structpb.Value) []byte { return appendJSON(b, plainValue(v)) }

// plainValue is v as the Go value the JSON library writes: maps, slices,
// strings, float64s, bools and nil. A NaN or infinity, which JSON cannot
// hold, is nil (null).
func plainValue(v *structpb.Value) any {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return k.StringValue
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return nil
		}
		return k.NumberValue
	case *structpb.Value_BoolValue:
		return k.BoolValue
	case *structpb.Value_StructValue:
		return plainFields(k.StructValue.GetFields(), false)
	case *structpb.Value_ListValue:
		l := make([]any, len(k.ListValue.GetValues()))
		for i, e := range k.ListValue.GetValues() {
			l[i] = plainValue(e)
		}
		return l
	}
	return nil
}

// plainFields is a map of values as plainValue makes them; scalarsOnly
// drops lists and structs (MessageMetadata holds scalars only).
func plainFields(fields map[string]*structpb.Value, scalarsOnly bool) map[string]any {
	m := make(map[string]any, len(fields))
	for k, f := range fields {
		if !scalarsOnly || isScalar(f) {
			m[k] = plainValue(f)
		}
	}
	return m
}

func isScalar(v *structpb.Value) bool {
	switch v.GetKind().(type) {
	case *structpb.Value_ListValue, *structpb.Value_StructValue:
		return false
	}
	return true
}

// rawValue converts JSON a peer sent to a structpb value; nil for invalid
// JSON (or a number out of float64's range).
func rawValue(raw json.Value) *structpb.Value {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v, peerJSON) != nil {
		return nil
	}
	return canonical.Value(v)
}
