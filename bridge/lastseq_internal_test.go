package bridge

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// snapshotEvent is a state snapshot holding n messages of history, as the
// agent protocol's values events carry at the end of every run.
func snapshotEvent(seq uint64, n int) *canonical.Event {
	msgs := make([]any, n)
	for i := range msgs {
		msgs[i] = map[string]any{"type": "ai", "id": "msg-" + strings.Repeat("x", i%7), "content": strings.Repeat("token ", 40)}
	}
	v, err := structpb.NewStruct(map[string]any{"messages": msgs})
	if err != nil {
		panic(err)
	}
	return &canonical.Event{ThreadId: "th", RunId: "run-1", Seq: seq, Kind: &canonical.KindStateSnapshot{
		StateSnapshot: &canonical.StateSnapshot{Values: structpb.NewStructValue(v)}}}
}

// randomBatch is an EventBatch of 0 to 20 events of every shape the
// publisher sends, with seqs in any order (lastSeqOf reads the last one,
// not the largest), some zero.
func randomBatch(rng *rand.Rand) *canonical.EventBatch {
	b := &canonical.EventBatch{}
	for range rng.IntN(21) {
		seq := rng.Uint64() >> rng.IntN(64)
		if rng.IntN(8) == 0 {
			seq = 0
		}
		var ev *canonical.Event
		switch rng.IntN(4) {
		case 0:
			ev = canonical.NewTextDelta(uint32(rng.IntN(3)), strings.Repeat("é", rng.IntN(30)))
			ev.ThreadId, ev.RunId, ev.Seq = "th", "run", seq
		case 1:
			ev = snapshotEvent(seq, rng.IntN(5))
		case 2:
			ev = canonical.Terminal(canonical.StatusCompleted, nil)
			ev.Seq = seq
		default:
			ev = &canonical.Event{Seq: seq} // no kind
		}
		if rng.IntN(5) == 0 { // a field this version does not know
			ev.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 900, protowire.VarintType), 7))
		}
		b.Events = append(b.Events, ev)
	}
	return b
}

// Property: for any batch the publisher can send, lastSeqOf reads the seq
// that decoding the whole batch gives for its last event.
func TestLastSeqOfMatchesDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 2000 {
		data, err := proto.Marshal(randomBatch(rng))
		if err != nil {
			t.Fatal(err)
		}
		evs, derr := DecodeEvents(data)
		if derr != nil {
			t.Fatal(derr)
		}
		got, err := lastSeqOf(data)
		if len(evs) == 0 {
			if !errors.Is(err, errEmptyBatch) {
				t.Fatalf("batch %d: lastSeqOf of an empty batch = %d, %v; want errEmptyBatch", i, got, err)
			}
			continue
		}
		if want := evs[len(evs)-1].GetSeq(); err != nil || got != want {
			t.Fatalf("batch %d: lastSeqOf = %d, %v; want %d", i, got, err, want)
		}
	}
}

// The wire cases proto.Unmarshal settles by rule rather than by the
// publisher's encoding: a repeated seq (the last wins), a known field with
// another wire type (kept as an unknown field, so not the seq), fields
// around the events, and truncations.
func TestLastSeqOfWireRules(t *testing.T) {
	elem := func(ev []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, batchEventsField, protowire.BytesType), ev)
	}
	seqField := func(v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, eventSeqField, protowire.VarintType), v)
	}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	seqAsBytes := protowire.AppendBytes(protowire.AppendTag(nil, eventSeqField, protowire.BytesType), []byte{9})
	batchTrailer := protowire.AppendString(protowire.AppendTag(nil, 77, protowire.BytesType), "later field")
	eventsAsVarint := protowire.AppendVarint(protowire.AppendTag(nil, batchEventsField, protowire.VarintType), 5)
	full := cat(elem(seqField(4)), elem(seqField(9)))

	tests := []struct {
		name string
		data []byte
		want uint64
		err  bool
	}{
		{"repeated seq: the last wins", elem(cat(seqField(5), seqField(3))), 3, false},
		{"seq with another wire type is not the seq", elem(cat(seqField(5), seqAsBytes)), 5, false},
		{"an event without seq", cat(elem(seqField(8)), elem(nil)), 0, false},
		{"fields after the last event", cat(full, batchTrailer), 9, false},
		{"events field as a varint is not an event", cat(full, eventsAsVarint), 9, false},
		{"no event", batchTrailer, 0, true},
		{"empty message", nil, 0, true},
		{"cut inside the last event", full[:len(full)-1], 0, true},
		{"cut inside a seq varint", elem(append(protowire.AppendTag(nil, eventSeqField, protowire.VarintType), 0x80)), 0, true},
		{"field number 0", []byte{0x02, 0x00}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lastSeqOf(tt.data)
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("lastSeqOf = %d, %v; want %d (error %v)", got, err, tt.want, tt.err)
			}
			// The same verdict as decoding the whole batch.
			var b canonical.EventBatch
			uerr := proto.Unmarshal(tt.data, &b)
			switch {
			case tt.err && uerr == nil && len(b.GetEvents()) > 0:
				t.Fatalf("proto.Unmarshal reads %d events where lastSeqOf fails", len(b.GetEvents()))
			case !tt.err && (uerr != nil || b.GetEvents()[len(b.GetEvents())-1].GetSeq() != tt.want):
				t.Fatalf("proto.Unmarshal: %v; lastSeqOf says %d", uerr, tt.want)
			}
		})
	}
}

// FuzzLastSeqOf: on any bytes lastSeqOf returns without panicking, and
// wherever proto.Unmarshal reads at least one event, lastSeqOf reads the
// last one's seq; where lastSeqOf finds the wire broken, so does proto.
func FuzzLastSeqOf(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		data, err := proto.Marshal(randomBatch(rng))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{0x0a, 0x02, 0x18, 0x05})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := lastSeqOf(data)
		var b canonical.EventBatch
		uerr := proto.Unmarshal(data, &b)
		evs := b.GetEvents()
		switch {
		case uerr == nil && len(evs) > 0:
			if want := evs[len(evs)-1].GetSeq(); err != nil || got != want {
				t.Fatalf("lastSeqOf = %d, %v; proto reads %d", got, err, want)
			}
		case uerr == nil:
			if !errors.Is(err, errEmptyBatch) {
				t.Fatalf("lastSeqOf = %d, %v; proto reads no event", got, err)
			}
		}
		// uerr != nil: the events may be broken only where lastSeqOf does
		// not look (strings, nested messages), so either verdict is right.
	})
}

// BenchmarkLastSeqOf: the seq of a thread's last batch (a run's final
// deltas and a snapshot of 50 messages of history), read by walking the
// wire against decoding every event.
func BenchmarkLastSeqOf(b *testing.B) {
	batch := &canonical.EventBatch{}
	for i := range 20 {
		ev := canonical.NewTextDelta(0, "token ")
		ev.ThreadId, ev.RunId, ev.Seq = "th", "run-1", uint64(100+i)
		batch.Events = append(batch.Events, ev)
	}
	batch.Events = append(batch.Events, snapshotEvent(120, 50), canonical.Terminal(canonical.StatusCompleted, nil))
	batch.Events[len(batch.Events)-1].Seq = 121
	data, err := proto.Marshal(batch)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if seq, err := lastSeqOf(data); err != nil || seq != 121 {
				b.Fatalf("lastSeqOf = %d, %v", seq, err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if evs, err := DecodeEvents(data); err != nil || evs[len(evs)-1].GetSeq() != 121 {
				b.Fatal(err)
			}
		}
	})
}
