package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// A read of the replay log whose last messages go while it reads (the log
// discards its oldest for replay_max_bytes while a slow reader catches up)
// ends with what the log still gave, at the message after the last it
// expected, rather than wait for ever for messages that will not come
// (seen: agent bench readers behind a 1 GiB log hung in fetchSpan).
func TestLogReadEndsWhenTheLogLetsGo(t *testing.T) {
	f := testFabric(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const thread = "th"
	subj := "interlingua.events." + subject.Token(thread) + ".run"
	var last uint64
	for seq := uint64(1); seq <= 10; seq++ {
		ack, err := f.js.Publish(ctx, subj, seqData(t, seq))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	for m := last - 4; m <= last; m++ { // the last five go
		if err := f.events.DeleteMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := f.js.CreateConsumer(ctx, EventsStream, jetstream.ConsumerConfig{
		FilterSubject: f.ThreadSubjects(thread), AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	evs, next, err := fetchSpan(ctx, cons, logSpan{before: 1 << 62}, last)
	if err != nil || next != last+1 || len(evs) != 5 {
		t.Fatalf("fetchSpan = %d events, next %d, %v; want 5 events, next %d, no error", len(evs), next, err, last+1)
	}
	for i, ev := range evs {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.GetSeq(), i+1)
		}
	}
	if waited := time.Since(start); waited > 3*logFetchWait {
		t.Fatalf("fetchSpan took %v, more than three fetches' wait", waited)
	}
}

// seqData is an EventBatch of one text delta with seq.
func seqData(t *testing.T, seq uint64) []byte {
	t.Helper()
	ev := canonical.NewTextDelta(0, "x")
	ev.ThreadId, ev.Seq = "th", seq
	data, err := proto.Marshal(&canonical.EventBatch{Events: []*canonical.Event{ev}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}
