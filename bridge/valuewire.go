package bridge

import (
	"errors"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"
)

// The protobuf encoding of google.protobuf.Value, Struct and ListValue, by
// hand for the replay log (see appendSnapshotEvent). Each function returns
// ok false when v holds something it leaves to proto.Marshal (unknown
// fields, a nil message inside a map, list or oneof), and an error where
// proto.Marshal fails (a string or key that is not valid UTF-8).

// errValueUTF8 is proto.Marshal's refusal of a string that is not UTF-8.
var errValueUTF8 = errors.New("event: a value's string is not valid UTF-8")

// openLength appends a one-byte length for a nested message and returns
// its place; closeLength writes it once the message is appended, moving
// the message up when its length takes more bytes.
func openLength(b *[]byte) int {
	*b = append(*b, 0)
	return len(*b) - 1
}

func closeLength(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	extra := protowire.SizeVarint(uint64(n)) - 1
	b = append(b, make([]byte, extra)...)
	copy(b[at+1+extra:], b[at+1:at+1+n])
	appendVarint(b[at:at], uint64(n))
	return b
}

// appendMessageField appends m as message field num, its fields appended
// by body.
func appendMessageField[M any](b []byte, num protowire.Number, m M, body func([]byte, M) ([]byte, bool, error)) ([]byte, bool, error) {
	b = appendTag(b, num, protowire.BytesType)
	at := openLength(&b)
	b, ok, err := body(b, m)
	if !ok || err != nil {
		return b, ok, err
	}
	return closeLength(b, at), true, nil
}

// appendValueField appends v as message field num.
func appendValueField(b []byte, num protowire.Number, v *structpb.Value) ([]byte, bool, error) {
	return appendMessageField(b, num, v, appendValue)
}

// appendValue appends the fields of v, a google.protobuf.Value.
func appendValue(b []byte, v *structpb.Value) ([]byte, bool, error) {
	if v == nil || len(v.ProtoReflect().GetUnknown()) > 0 {
		return b, false, nil
	}
	switch k := v.GetKind().(type) {
	case nil: // no kind: an empty message
	case *structpb.Value_NullValue: // a oneof member is written even when zero
		b = appendTag(b, 1, protowire.VarintType)
		b = appendVarint(b, uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		b = appendTag(b, 2, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(k.NumberValue))
	case *structpb.Value_StringValue:
		if !utf8.ValidString(k.StringValue) {
			return b, false, errValueUTF8
		}
		b = appendTag(b, 3, protowire.BytesType)
		b = appendString(b, k.StringValue)
	case *structpb.Value_BoolValue:
		b = appendTag(b, 4, protowire.VarintType)
		b = appendVarint(b, protowire.EncodeBool(k.BoolValue))
	case *structpb.Value_StructValue:
		return appendMessageField(b, 5, k.StructValue, appendStruct)
	case *structpb.Value_ListValue:
		return appendMessageField(b, 6, k.ListValue, appendList)
	default:
		return b, false, nil
	}
	return b, true, nil
}

// appendStruct appends the fields of s, a google.protobuf.Struct: one map
// entry (key 1, value 2) per field, in Go's map order as proto.Marshal's.
func appendStruct(b []byte, s *structpb.Struct) ([]byte, bool, error) {
	if s == nil || len(s.ProtoReflect().GetUnknown()) > 0 {
		return b, false, nil
	}
	for key, v := range s.GetFields() {
		if !utf8.ValidString(key) {
			return b, false, errValueUTF8
		}
		b = appendTag(b, 1, protowire.BytesType)
		at := openLength(&b)
		b = appendTag(b, 1, protowire.BytesType)
		b = appendString(b, key)
		var ok bool
		var err error
		if b, ok, err = appendValueField(b, 2, v); !ok || err != nil {
			return b, ok, err
		}
		b = closeLength(b, at)
	}
	return b, true, nil
}

// appendList appends the fields of l, a google.protobuf.ListValue.
func appendList(b []byte, l *structpb.ListValue) ([]byte, bool, error) {
	if l == nil || len(l.ProtoReflect().GetUnknown()) > 0 {
		return b, false, nil
	}
	for _, v := range l.GetValues() {
		var ok bool
		var err error
		if b, ok, err = appendValueField(b, 1, v); !ok || err != nil {
			return b, ok, err
		}
	}
	return b, true, nil
}
