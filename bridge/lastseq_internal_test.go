package bridge

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

// lastSeqOf reads a message's header when it has one, and otherwise (a log
// written before the header) decodes the message for its last event.
func TestLastSeqOf(t *testing.T) {
	batch, err := proto.Marshal(&canonical.EventBatch{Events: []*canonical.Event{snapshotEvent(4, 2), snapshotEvent(9, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	empty, _ := proto.Marshal(&canonical.EventBatch{})
	tests := []struct {
		name   string
		header string
		data   []byte
		want   uint64
		err    bool
	}{
		{"header", "12", []byte("not even protobuf"), 12, false},
		{"no header: decoded", "", batch, 9, false},
		{"bad header", "x", batch, 0, true},
		{"no header, no event", "", empty, 0, true},
		{"no header, not protobuf", "", []byte{0xff}, 0, true},
	}
	for _, tt := range tests {
		m := &jetstream.RawStreamMsg{Data: tt.data, Header: nats.Header{}}
		if tt.header != "" {
			m.Header.Set(lastSeqHeader, tt.header)
		}
		got, err := lastSeqOf(m)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("%s: lastSeqOf = %d, %v; want %d (error %v)", tt.name, got, err, tt.want, tt.err)
		}
	}
	if _, err := lastSeqOf(&jetstream.RawStreamMsg{Data: empty}); !errors.Is(err, errEmptyBatch) {
		t.Errorf("empty batch: %v, want errEmptyBatch", err)
	}
}

// Property: whatever the run of adds (merged into waiting messages or
// not), each message of the acknowledged log carries in its header the seq
// of the last event its data holds, and its id names its first event.
func TestAckedLogHeadersMatchData(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 200 {
		l := &ackedLog{threads: map[string]*threadLog{}, inflight: map[*nats.Msg]*threadLog{}, max: 1 << 20}
		seq := uint64(0)
		for range 1 + rng.IntN(50) {
			subject := "p.events.th.r" + strconv.Itoa(rng.IntN(2))
			var data []byte
			first := seq + 1
			n := 1 + rng.IntN(5)
			for range n {
				seq++
				ev := canonical.NewTextDelta(0, strings.Repeat("t", rng.IntN(40)))
				ev.Seq = seq
				var err error
				if _, data, err = appendBatchElem(data, batchEventsField, ev); err != nil {
					t.Fatal(err)
				}
			}
			l.add("th", subject, nil, first, seq, data, n, 64+rng.IntN(2000))
		}
		for _, m := range l.threads["th"].waiting {
			evs, err := DecodeEvents(m.msg.Data)
			if err != nil || len(evs) != m.events {
				t.Fatalf("case %d: message of %d events decodes to %d, %v", i, m.events, len(evs), err)
			}
			if h := m.msg.Header.Get(lastSeqHeader); h != strconv.FormatUint(evs[len(evs)-1].GetSeq(), 10) {
				t.Fatalf("case %d: header %s, last event %d", i, h, evs[len(evs)-1].GetSeq())
			}
			if id := m.msg.Header.Get(jetstream.MsgIDHeader); id != m.msg.Subject+"#"+strconv.FormatUint(evs[0].GetSeq(), 10) {
				t.Fatalf("case %d: id %s, first event %d", i, id, evs[0].GetSeq())
			}
		}
	}
}

// BenchmarkLastSeqOf: the seq of a thread's last batch (a run's final
// deltas and a snapshot of 50 messages of history), read from the header
// against decoding every event.
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
	for name, h := range map[string]string{"header": "121", "decode": ""} {
		m := &jetstream.RawStreamMsg{Data: data, Header: nats.Header{}}
		if h != "" {
			m.Header.Set(lastSeqHeader, h)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if seq, err := lastSeqOf(m); err != nil || seq != 121 {
					b.Fatalf("lastSeqOf = %d, %v", seq, err)
				}
			}
		})
	}
}
