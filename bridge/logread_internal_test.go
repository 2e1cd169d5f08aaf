package bridge

import (
	"context"
	"sync"
	"sync/atomic"
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
	last := publishSeqs(ctx, t, f, thread, 10)[9]
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
	rd := logRead{span: logSpan{before: 1 << 62}, last: last, wait: logFetchWait, cons: cons}
	lost, err := rd.fetchSpan(ctx)
	evs, next := rd.out, rd.next
	if err != nil || lost || next != last+1 || len(evs) != 5 {
		t.Fatalf("fetchSpan = %d events, next %d, lost %v, %v; want 5 events, next %d, nothing lost, no error", len(evs), next, lost, err, last+1)
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

// publishSeqs stores in f's replay log n messages of thread's run "run",
// one text delta each, seqs 1 to n, and returns their stream sequences.
func publishSeqs(ctx context.Context, t *testing.T, f *Fabric, thread string, n int) []uint64 {
	t.Helper()
	subj := "interlingua.events." + subject.Token(thread) + ".run"
	streamSeqs := make([]uint64, 0, n)
	for seq := uint64(1); seq <= uint64(n); seq++ {
		ack, err := f.js.Publish(ctx, subj, seqData(t, seq))
		if err != nil {
			t.Fatal(err)
		}
		streamSeqs = append(streamSeqs, ack.Sequence)
	}
	return streamSeqs
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

// A read whose consumer's deliveries go missing (a fetch drops what
// arrives after its wait ends) says so, with the events before the first
// missing one and the stream message it is, whether the missing ones are
// followed by others or end the consumer's deliveries; it never gives the
// events around them as if they followed each other.
func TestLogReadReportsALostDelivery(t *testing.T) {
	f := testFabric(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const thread = "th"
	streamSeqs := publishSeqs(ctx, t, f, thread, 10)
	for _, tc := range []struct {
		name string
		drop map[uint64]bool // deliveries lost, 1 the first
	}{
		{"in the middle", map[uint64]bool{4: true}},
		{"at the end", map[uint64]bool{9: true, 10: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cons, err := f.js.CreateConsumer(ctx, EventsStream, jetstream.ConsumerConfig{
				FilterSubject: f.ThreadSubjects(thread), AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			dc := &droppingConsumer{Consumer: cons, drop: tc.drop}
			defer dc.wait()
			rd := logRead{span: logSpan{before: 1 << 62}, last: streamSeqs[9], wait: 500 * time.Millisecond, cons: dc}
			lost, err := rd.fetchSpan(ctx)
			if err != nil || !lost {
				t.Fatalf("fetchSpan: lost %v, %v; want a lost delivery reported", lost, err)
			}
			// What came before the first missing delivery (a fetch cut
			// short by a slow machine may have lost an earlier one too).
			first := 0
			for n := uint64(1); !tc.drop[n]; n++ {
				first++
			}
			k := len(rd.out)
			if k > first {
				t.Fatalf("fetchSpan gave %d events, past the first lost delivery (%d)", k, first+1)
			}
			for i, ev := range rd.out {
				if ev.GetSeq() != uint64(i+1) {
					t.Fatalf("event %d has seq %d, want %d", i, ev.GetSeq(), i+1)
				}
			}
			if rd.next != streamSeqs[k] {
				t.Fatalf("the read goes on at stream message %d, want %d (the first not read)", rd.next, streamSeqs[k])
			}
		})
	}
}

// A read of the replay log whose fetches keep losing deliveries (each
// fetch's wait so short that messages arrive after it) gives every event
// in order, or fails: never events with a gap the log does not have
// (before: 2744 to 2855 of 3000 at a 1 ms wait, 2 to 229 at 200 µs, no
// error).
func TestLogReadLosesNoDelivery(t *testing.T) {
	f := testFabric(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const thread, n = "th", 3000
	subj := "interlingua.events." + subject.Token(thread) + ".run"
	for seq := uint64(1); seq <= n; seq++ {
		if _, err := f.js.PublishAsync(subj, seqData(t, seq)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-f.js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("the log did not acknowledge the events")
	}
	for _, wait := range []time.Duration{5 * time.Millisecond, time.Millisecond, 500 * time.Microsecond, 200 * time.Microsecond} {
		f.logFetchWait = wait
		evs, next, err := f.readThreadLog(ctx, thread, logSpan{before: 1 << 62})
		if err != nil {
			t.Logf("wait %v: the read failed, as it may: %v", wait, err)
			continue
		}
		if len(evs) != n || next != n+1 {
			t.Fatalf("wait %v: read %d events, next message %d; want %d, %d", wait, len(evs), next, n, n+1)
		}
		for i, ev := range evs {
			if ev.GetSeq() != uint64(i+1) {
				t.Fatalf("wait %v: event %d has seq %d, want %d", wait, i, ev.GetSeq(), i+1)
			}
		}
	}
}

// droppingConsumer loses the deliveries numbered in drop (1 the first), as
// a fetch does whose wait ends while they are on their way.
type droppingConsumer struct {
	jetstream.Consumer
	drop  map[uint64]bool
	n     atomic.Uint64
	pumps sync.WaitGroup
}

func (c *droppingConsumer) Fetch(batch int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	b, err := c.Consumer.Fetch(batch, opts...)
	if err != nil {
		return nil, err
	}
	out := make(chan jetstream.Msg, batch)
	c.pumps.Add(1)
	go func() {
		defer c.pumps.Done()
		defer close(out)
		for m := range b.Messages() {
			if !c.drop[c.n.Add(1)] {
				out <- m
			}
		}
	}()
	return droppedBatch{MessageBatch: b, msgs: out}, nil
}

// wait waits for the fetches' pumps to end (their fetches expire).
func (c *droppingConsumer) wait() { c.pumps.Wait() }

type droppedBatch struct {
	jetstream.MessageBatch
	msgs chan jetstream.Msg
}

func (b droppedBatch) Messages() <-chan jetstream.Msg { return b.msgs }
