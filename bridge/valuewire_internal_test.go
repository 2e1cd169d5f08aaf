package bridge

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

func snapshot(v *structpb.Value) *canonical.Event {
	return &canonical.Event{ThreadId: "thread-1", RunId: "run-1", Seq: 7, Namespace: []string{"a"}, TimeUnixNano: 1_700_000_000_000_000_001, GraphNode: "n",
		Kind: &canonical.KindStateSnapshot{StateSnapshot: &canonical.StateSnapshot{Values: v}}}
}

func mustValue(t testing.TB, x any) *structpb.Value {
	t.Helper()
	v, err := structpb.NewValue(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A state snapshot whose every struct has at most one field (so that
// proto.Marshal's map order is the only one) gets proto.Marshal's bytes,
// whatever its values and however long their encodings' lengths: a map
// entry's key and value are written even when empty, a oneof's member even
// when zero.
func TestAppendSnapshotMatchesProtoMarshal(t *testing.T) {
	long := strings.Repeat("y", 20_000) // lengths of one, two and three bytes nested
	withUnknown := mustValue(t, map[string]any{"k": "v"})
	withUnknown.GetStructValue().GetFields()["k"].ProtoReflect().SetUnknown([]byte{0xa8, 0x1f, 0x01})
	for name, v := range map[string]*structpb.Value{
		"no values":      nil,
		"empty value":    {},
		"null":           structpb.NewNullValue(),
		"number":         structpb.NewNumberValue(-1.5),
		"zero":           structpb.NewNumberValue(0),
		"infinity":       structpb.NewNumberValue(math.Inf(1)),
		"false":          structpb.NewBoolValue(false),
		"true":           structpb.NewBoolValue(true),
		"empty string":   structpb.NewStringValue(""),
		"string":         structpb.NewStringValue("héllo 😀"),
		"empty struct":   mustValue(t, map[string]any{}),
		"empty list":     mustValue(t, []any{}),
		"empty key":      mustValue(t, map[string]any{"": nil}),
		"empty in a map": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"k": {}}}),
		"messages":       mustValue(t, map[string]any{"messages": []any{map[string]any{"content": "hi"}, map[string]any{"content": long}, []any{1.0, true, nil, "x"}}}),
		"long":           mustValue(t, map[string]any{"k": long + long}),
		"deep":           mustValue(t, []any{[]any{[]any{map[string]any{"a": []any{map[string]any{"b": long}}}}}}),
		"unknown field":  withUnknown, // left to proto.Marshal
		"nil in a list":  structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNullValue(), nil}}),
		"nil struct":     {Kind: &structpb.Value_StructValue{}},
	} {
		t.Run(name, func(t *testing.T) {
			ev := snapshot(v)
			want, err := proto.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendEvent([]byte("prefix"), ev, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
				t.Fatalf("appendEvent\n got %x\nwant %x", got, want)
			}
		})
	}
}

// Any state snapshot decodes to itself; multi-key structs come out in Go's
// map order, which proto.Marshal's bytes do not fix either.
func TestAppendSnapshotRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 2000 {
		ev := snapshot(randomValue(rng, 4))
		got, err := appendEvent(nil, ev, nil)
		if err != nil {
			t.Fatal(err)
		}
		back := &canonical.Event{}
		if err := proto.Unmarshal(got, back); err != nil || !proto.Equal(back, ev) {
			t.Fatalf("case %d: round trip: %v\n got %v\nwant %v", i, err, back, ev)
		}
		if n := proto.Size(ev); n != len(got) {
			t.Fatalf("case %d: %d bytes, proto.Size says %d", i, len(got), n)
		}
	}
}

// randomValue is a JSON-like value up to depth levels deep.
func randomValue(rng *rand.Rand, depth int) *structpb.Value {
	texts := []string{"", "a", "héllo", "😀", strings.Repeat("z", 150), strings.Repeat("w", 17_000)}
	k := rng.IntN(7)
	if depth == 0 {
		k = rng.IntN(5)
	}
	switch k {
	case 0:
		return structpb.NewNullValue()
	case 1:
		return structpb.NewNumberValue(rng.NormFloat64() * 1e6)
	case 2:
		return structpb.NewBoolValue(rng.IntN(2) == 0)
	case 3:
		return structpb.NewStringValue(texts[rng.IntN(len(texts))])
	case 4:
		return &structpb.Value{}
	case 5:
		s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for range rng.IntN(6) {
			s.Fields[fmt.Sprint("k", rng.IntN(10))] = randomValue(rng, depth-1)
		}
		return structpb.NewStructValue(s)
	default:
		l := &structpb.ListValue{}
		for range rng.IntN(6) {
			l.Values = append(l.Values, randomValue(rng, depth-1))
		}
		return structpb.NewListValue(l)
	}
}

// A string or key that is not UTF-8 fails as proto.Marshal fails, and
// leaves b as it was.
func TestAppendSnapshotRefusesBadUTF8(t *testing.T) {
	for _, v := range []*structpb.Value{
		structpb.NewStringValue("\xff"),
		structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"\xc3": structpb.NewNullValue()}}),
		structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("ok"), structpb.NewStringValue("\xe2\x82")}}),
	} {
		ev := snapshot(v)
		if _, err := proto.Marshal(ev); err == nil {
			t.Fatalf("proto.Marshal accepted %v", v)
		}
		if got, err := appendEvent([]byte("prefix"), ev, nil); err == nil || string(got) != "prefix" {
			t.Errorf("appendEvent(%v) = %q, %v", v, got, err)
		}
	}
}

// BenchmarkAppendEventSnapshot is a state of 22 messages, as an agent
// sends at each step of a conversation's eleventh turn: by hand, and
// through proto.Marshal.
func BenchmarkAppendEventSnapshot(b *testing.B) {
	var msgs []any
	for i := range 22 {
		msgs = append(msgs, map[string]any{"id": fmt.Sprint("m", i), "type": "ai", "content": "some reply text here", "tool_calls": []any{}})
	}
	v := mustValue(b, map[string]any{"messages": msgs})
	ev := snapshot(v)
	var buf []byte
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = appendEvent(buf[:0], ev, nil)
		}
	})
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = proto.MarshalOptions{}.MarshalAppend(buf[:0], ev)
		}
	})
}
