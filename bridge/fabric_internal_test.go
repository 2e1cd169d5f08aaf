package bridge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Elements appended one after another are one EventBatch that decodes to
// the events, every field kept: extensions, unknown fields (a field a newer
// canonical.proto added), every kind.
func TestAppendBatchElemIsEventBatch(t *testing.T) {
	withUnknown := canonical.NewTextDelta(1, "x")
	withUnknown.ProtoReflect().SetUnknown([]byte{0xa8, 0x1f, 0x01}) // field 501, varint 1
	every := canonical.NewTextDelta(300, "héllo 😀")
	every.ThreadId, every.RunId, every.Seq, every.TimeUnixNano, every.GraphNode = "t", "r", 1<<40, -5, "node"
	every.Namespace = []string{"a", "", "b:c"}
	every.SkippedAfter = proto.Uint64(1 << 39)
	every.Extensions = map[string]*structpb.Value{"glide.id": structpb.NewStringValue("7")}
	evs := []*canonical.Event{
		canonical.NewTextDelta(0, ""),
		every,
		{ThreadId: "t", Seq: 9, Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Index: 2, Data: []byte{0, 1, 2}}}},
		canonical.NewTextDelta(7, strings.Repeat("x", 300)),
		withUnknown,
		{ThreadId: "t", RunId: "r", Seq: 3, Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusCompleted}}},
	}
	b := []byte("prefix")
	for _, ev := range evs {
		elem, grown, err := appendBatchElem(b, batchEventsField, ev)
		if err != nil {
			t.Fatal(err)
		}
		if string(grown[:len(b)]) != string(b) || &grown[len(grown)-1] != &elem[len(elem)-1] {
			t.Fatal("appendBatchElem did not append the element to b")
		}
		b = grown
	}
	back, err := DecodeEvents(b[len("prefix"):])
	if err != nil || len(back) != len(evs) {
		t.Fatalf("decoded %d events, %v; want %d", len(back), err, len(evs))
	}
	for i := range evs {
		if !proto.Equal(back[i], evs[i]) {
			t.Fatalf("event %d: got %v, want %v", i, back[i], evs[i])
		}
	}
}

// A string that is not UTF-8 fails as proto.Marshal fails, and b is left
// as it was.
func TestAppendBatchElemRefusesBadUTF8(t *testing.T) {
	for _, ev := range []*canonical.Event{
		canonical.NewTextDelta(0, "\xff"),
		{ThreadId: "\xc3", Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "x"}}},
		{Namespace: []string{"ok", "\xe2\x82"}, Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "x"}}},
	} {
		if _, grown, err := appendBatchElem([]byte("p"), batchEventsField, ev); err == nil || string(grown) != "p" {
			t.Errorf("appendBatchElem = %q, %v for %v", grown, err, ev)
		}
	}
}

func BenchmarkAppendBatchElemDelta(b *testing.B) {
	ev := canonical.NewTextDelta(0, "tok ")
	ev.ThreadId, ev.RunId, ev.Seq, ev.TimeUnixNano = "run-4Jw3Pp2kYgQ1x9Zm0aBcDe", "run-4Jw3Pp2kYgQ1x9Zm0aBcDe", 1234, 1_700_000_000_123_456_789
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		_, buf, _ = appendBatchElem(buf[:0], batchEventsField, ev)
	}
}

func BenchmarkProtoMarshalDelta(b *testing.B) {
	ev := canonical.NewTextDelta(0, "tok ")
	ev.ThreadId, ev.RunId, ev.Seq, ev.TimeUnixNano = "run-4Jw3Pp2kYgQ1x9Zm0aBcDe", "run-4Jw3Pp2kYgQ1x9Zm0aBcDe", 1234, 1_700_000_000_123_456_789
	b.ReportAllocs()
	for b.Loop() {
		_, _ = proto.Marshal(ev)
	}
}

func TestAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"2.12.0", true}, {"2.15.2", true}, {"3.0.0", true}, {"2.12.0-beta.1", true},
		{"2.11.9", false}, {"2.9.0", false}, {"1.99.0", false}, {"", false}, {"x.y", false},
	} {
		if got := atLeast(tc.v, 2, 12); got != tc.want {
			t.Errorf("atLeast(%q, 2, 12) = %v", tc.v, got)
		}
	}
}

// BenchmarkFabricPublish is the replay log's capacity: events published
// (waiting for room, as a run owned for another instance does) and
// stored by JetStream, per second, in each persist mode.
func BenchmarkFabricPublish(b *testing.B) {
	for _, mode := range []string{PersistAsync, PersistSync} {
		b.Run(mode, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.NATS.PersistMode = mode
			cfg.Defaults()
			f, err := StartFabric(context.Background(), cfg.NATS, b.TempDir(), slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			p := f.publisher("thread-bench", "run-bench", true)
			ev := canonical.NewTextDelta(0, "tok ")
			ev.ThreadId, ev.RunId, ev.TimeUnixNano = "thread-bench", "run-bench", 1_700_000_000_123_456_789
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				ev.Seq = uint64(i + 1)
				p.publish(ev)
			}
			// Stored, not just queued: the publish loop puts events that
			// queue up together into one message, so the log holds fewer
			// messages than events; its last event is the last published.
			for {
				seq, err := f.LastSeq(context.Background(), "thread-bench")
				if err != nil {
					b.Fatal(err)
				}
				if seq >= uint64(b.N) {
					break
				}
				runtime.Gosched()
			}
			b.StopTimer()
			if d := f.Dropped(); d > 0 {
				b.Fatalf("%d dropped", d)
			}
		})
	}
}

// publishNext publishes the thread's next event, a delta of p's run
// (whose id, in these tests, is p's subject), as a run's take does.
func publishNext(th *thread, p *publisher) {
	th.mu.Lock()
	defer th.mu.Unlock()
	th.seq++
	ev := canonical.NewTextDelta(0, "tok ")
	ev.ThreadId, ev.RunId, ev.Seq = "th", p.subject, th.seq
	th.publishLocked(p, ev)
}

// queueFabric is a fabric without NATS: what is published stays in its
// queue (of at most max messages) for the test to take.
func queueFabric(max int) *Fabric {
	return &Fabric{cfg: NATSConfig{SubjectPrefix: "p"}, pubq: pubQueue{max: max, wake: make(chan struct{}, 1), lazy: make(chan struct{}, 1)},
		stop: make(chan struct{}), log: slog.New(slog.DiscardHandler)}
}

// The publisher's encodings share arrays but never overlap: whatever
// sizes come between and wherever its held events are queued, each queued
// message is an EventBatch of the events it holds, in order, its deltas short,
// none is lost or repeated, at most heldMax events go in one message, and
// an array grown past slabMax by a large event is not kept. A publisher
// that must deliver queues each event as a message of its own.
func TestPublisherEncodings(t *testing.T) {
	for _, must := range []bool{false, true} {
		for c := range 20 {
			rng := rand.New(rand.NewPCG(uint64(c), 11))
			f := queueFabric(10_000)
			p := f.publisher("t", "r", must)
			var evs []*canonical.Event
			for i := range 300 {
				text := "tok "
				switch i % 97 {
				case 50:
					text = string(bytes.Repeat([]byte("x"), 10_000))
				case 60:
					text = string(bytes.Repeat([]byte("y"), 300))
				}
				ev := canonical.NewTextDelta(uint32(i%3), text)
				ev.ThreadId, ev.RunId, ev.Seq = "t", "r", uint64(i+1)
				if i%50 == 49 { // not a delta: proto.Marshal's path
					ev = &canonical.Event{ThreadId: "t", RunId: "r", Seq: uint64(i + 1), Kind: &canonical.KindBlockFinish{BlockFinish: &canonical.BlockFinish{Index: 1}}}
				}
				evs = append(evs, ev)
				p.publish(ev)
				if cap(p.slab) > slabMax {
					t.Fatalf("event %d: kept a %d-byte array", i, cap(p.slab))
				}
				if rng.IntN(5) == 0 { // the backend holds no more: run.take queues
					p.queueHeld()
				}
			}
			p.queueHeld()
			if len(f.pubq.wake) != 0 && !must {
				t.Fatal("queueing held events woke the publish loop at once")
			}
			next := 0
			for i, m := range f.pubq.take() {
				if m.subject != f.EventSubject("t", "r") || m.thread != "t" {
					t.Fatalf("message %d: subject %q, thread %q", i, m.subject, m.thread)
				}
				if m.events < 1 || m.events > heldMax || (must && m.events != 1) || next+m.events > len(evs) {
					t.Fatalf("message %d carries %d events (%d before it, must %v)", i, m.events, next, must)
				}
				if err := isBatchOf(m.data, evs[next:next+m.events]); err != nil {
					t.Fatalf("case %d, message %d (events %d to %d): %v", c, i, next+1, next+m.events, err)
				}
				next += m.events
			}
			if next != len(evs) {
				t.Fatalf("%d events queued, want %d", next, len(evs))
			}
		}
	}
}

// isBatchOf says how data is not an EventBatch of evs: one that decodes
// to them, every field kept, with each text delta short.
func isBatchOf(data []byte, evs []*canonical.Event) error {
	back, err := DecodeEvents(data)
	if err != nil || len(back) != len(evs) {
		return fmt.Errorf("decodes to %d events, %v", len(back), err)
	}
	deltas := 0
	for i := range evs {
		if !proto.Equal(back[i], evs[i]) {
			return fmt.Errorf("event %d is %v, want %v", i, back[i], evs[i])
		}
		if evs[i].GetBlockDelta() != nil {
			deltas++
		}
	}
	var raw canonical.EventBatch
	if err := proto.Unmarshal(data, &raw); err != nil || len(raw.GetDeltas()) != deltas {
		return fmt.Errorf("%d deltas short, want %d (%v)", len(raw.GetDeltas()), deltas, err)
	}
	return nil
}

// A full queue drops (counted) unless the publisher must deliver; then it
// waits until the loop takes a batch.
func TestPubQueueBound(t *testing.T) {
	f := &Fabric{pubq: pubQueue{max: 2, wake: make(chan struct{}, 1)}, stop: make(chan struct{}), log: slog.New(slog.DiscardHandler)}
	ev := canonical.NewTextDelta(0, "x")
	for range 3 {
		f.PublishEvent(ev, false)
	}
	if f.Dropped() != 1 || len(f.pubq.msgs) != 2 {
		t.Fatalf("dropped %d, queued %d", f.Dropped(), len(f.pubq.msgs))
	}
	done := make(chan struct{})
	go func() { f.PublishEvent(ev, true); close(done) }()
	for { // the waiting publisher has registered for room
		f.pubq.mu.Lock()
		waiting := f.pubq.room != nil
		f.pubq.mu.Unlock()
		if waiting {
			break
		}
		runtime.Gosched()
	}
	if n := len(f.pubq.take()); n != 2 {
		t.Fatalf("took %d", n)
	}
	<-done
	if n := len(f.pubq.take()); n != 1 || f.Dropped() != 1 {
		t.Fatalf("after room: %d queued, %d dropped", n, f.Dropped())
	}
}

// TestPubQueueKeepsArraysThroughSwings: batches whose sizes swing between
// tens of thousands and hundreds, as an unpaced run's do, reuse the
// queue's two arrays instead of growing new ones; once spareQuiet batches
// in a row are small, the arrays sized for the bursts are let go.
func TestPubQueueKeepsArraysThroughSwings(t *testing.T) {
	q := &pubQueue{max: 65_536, wake: make(chan struct{}, 1), lazy: make(chan struct{}, 1)}
	cycle := func(n int) {
		for range n {
			if q.push(pubMsg{subject: "s"}, false, false) != nil {
				t.Fatal("queue full")
			}
		}
		q.recycle(q.take())
	}
	// The queue's two arrays, in either order.
	arrays := func() [2]*pubMsg {
		a, b := unsafe.SliceData(q.msgs), unsafe.SliceData(q.spare)
		if uintptr(unsafe.Pointer(a)) > uintptr(unsafe.Pointer(b)) {
			a, b = b, a
		}
		return [2]*pubMsg{a, b}
	}
	for _, n := range []int{20_000, 20_000, 300, 300} { // both arrays sized for the bursts
		cycle(n)
	}
	warm := arrays()
	for range 5 {
		for _, n := range []int{300, 20_000, 900, 12_000, 300} {
			cycle(n)
			if arrays() != warm {
				t.Fatalf("a batch of %d messages left the queue with a new array: the arrays are not reused", n)
			}
		}
	}
	for range spareQuiet + 1 {
		cycle(300)
	}
	if c1, c2 := cap(q.msgs), cap(q.spare); c1 > spareKeep || c2 > spareKeep {
		t.Fatalf("after %d small batches the queue keeps arrays of %d and %d messages", spareQuiet+1, c1, c2)
	}
}

// Runs of one thread that hold their events and queue them at their own
// times still queue the thread's events in seq order, whatever the
// interleaving: a run taking the next seq first queues what another run
// of the thread holds. (The replay log is read for a thread's last seq.)
func TestThreadEventsQueueInSeqOrder(t *testing.T) {
	for c := range 200 {
		rng := rand.New(rand.NewPCG(uint64(c), 13))
		f := queueFabric(100_000)
		th := &thread{}
		runs := make([]*publisher, 1+rng.IntN(3))
		for i := range runs {
			runs[i] = f.publisher("th", fmt.Sprint("r", i), rng.IntN(4) == 0)
		}
		for range 1 + rng.IntN(400) {
			p := runs[rng.IntN(len(runs))]
			if rng.IntN(4) == 0 { // that run's backend holds no more
				th.queueHeld(p)
				continue
			}
			publishNext(th, p)
		}
		for _, p := range runs { // the runs end
			th.queueHeld(p)
		}
		var last uint64
		for _, m := range f.pubq.take() {
			evs, err := DecodeEvents(m.data)
			if err != nil || len(evs) != m.events {
				t.Fatalf("case %d: message of %d events decodes to %d, %v", c, m.events, len(evs), err)
			}
			for _, ev := range evs {
				if ev.GetSeq() != last+1 || ev.GetRunId() != m.subject {
					t.Fatalf("case %d: seq %d (run %s) queued after seq %d, in a message of %s", c, ev.GetSeq(), ev.GetRunId(), last, m.subject)
				}
				last = ev.GetSeq()
			}
		}
		if last != th.seq {
			t.Fatalf("case %d: %d of %d events queued", c, last, th.seq)
		}
	}
}

// An acknowledgement sends what waited for it and leaves the queue to
// nats.publish_delay, so that lazily queued events join their thread's
// next message; while the log is full, the acknowledgement that makes
// room takes the queue (nothing else would: runs waiting for room must
// not wait for the delay).
func TestAckLeavesTheQueueItsDelay(t *testing.T) {
	f := queueFabric(100)
	f.cfg.PublishDelay = time.Hour
	f.acks = make(chan struct{}, 1)
	f.acked = &ackedLog{wake: f.signalAck, drop: func(int, error) {}, max: 2, events: 1,
		threads: map[string]*threadLog{}, inflight: map[*nats.Msg]*threadLog{}}
	// The thread has a message in flight, so what the loop adds waits
	// behind it, unsent.
	f.acked.threads["th"] = &threadLog{thread: "th", cur: &logMsg{msg: &nats.Msg{Subject: "p.events.th.r"}, events: 1}}
	f.loopDone = make(chan struct{})
	go f.publishLoop()
	defer f.Close()

	// ack sends an acknowledgement's wake-up and returns once the loop has
	// handled it.
	ack := func() {
		for range 3 { // the channel holds one: the third send waits for the first's handling
			f.acks <- struct{}{}
		}
	}
	th := &thread{}
	p := f.publisher("th", "r", false)
	publishNext(th, p)
	p.queueHeld()
	ack()
	if n := f.pubq.len(); n != 1 {
		t.Fatalf("an acknowledgement took the queue (%d messages left, want 1) before the delay", n)
	}
	f.acked.mu.Lock()
	f.acked.events = 2 // full
	f.acked.mu.Unlock()
	f.pubq.signal() // publish at once: the log is full, so the queue stays
	ack()
	if n := f.pubq.len(); n != 1 {
		t.Fatalf("a full log took the queue: %d messages left, want 1", n)
	}
	f.acked.mu.Lock()
	f.acked.events = 0 // the message in flight was acknowledged: room
	f.acked.mu.Unlock()
	ack()
	if n := f.pubq.len(); n != 0 {
		t.Fatalf("the acknowledgement that made room left %d messages queued", n)
	}
	f.acked.mu.Lock()
	waiting := len(f.acked.threads["th"].waiting)
	clear(f.acked.threads) // nothing for Close to wait for
	f.acked.events = 0
	f.acked.mu.Unlock()
	if waiting != 1 {
		t.Fatalf("the thread has %d messages waiting, want the queued one", waiting)
	}
}

// shortMix is a run's events as a publisher meets them: text deltas of
// the run, which go short, and events an EventBatch delta cannot carry
// whole, which go full.
func shortMix() (events []*canonical.Event, short []bool) {
	delta := func(index uint32, text string) *canonical.Event {
		ev := canonical.NewTextDelta(index, text)
		ev.ThreadId, ev.RunId, ev.TimeUnixNano = "t", "r", 1_700_000_000_123_456_789
		return ev
	}
	withGraph, withNamespace, withExt := delta(0, "g"), delta(0, "n"), delta(0, "e")
	withGraph.GraphNode = "node"
	withSkip := delta(0, "s")
	withSkip.SkippedAfter = proto.Uint64(0)
	withNamespace.Namespace = []string{"sub"}
	withExt.Extensions = map[string]*structpb.Value{"agent.wire": structpb.NewStringValue("1:1:...")}
	numberExt, twoExts, unnamedExt := delta(0, "1"), delta(0, "2"), delta(0, "3")
	numberExt.Extensions = map[string]*structpb.Value{"agent.id": structpb.NewNumberValue(7)}
	twoExts.Extensions = map[string]*structpb.Value{"a.x": structpb.NewStringValue("x"), "a.y": structpb.NewStringValue("y")}
	unnamedExt.Extensions = map[string]*structpb.Value{"": structpb.NewStringValue("x")}
	withData := delta(2, "")
	withData.GetBlockDelta().Data = []byte{0, 1}
	otherRun := delta(0, "o")
	otherRun.RunId = "r2"
	unknown, unknownInDelta := delta(0, "u"), delta(0, "v")
	unknown.ProtoReflect().SetUnknown([]byte{0xa8, 0x1f, 0x01}) // field 501, varint 1
	unknownInDelta.GetBlockDelta().ProtoReflect().SetUnknown([]byte{0xa8, 0x1f, 0x01})
	end := &canonical.Event{ThreadId: "t", RunId: "r", Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusCompleted}}}
	for _, e := range []struct {
		ev    *canonical.Event
		short bool
	}{
		{delta(0, "héllo "), true}, {delta(0, "😀"), true}, {withGraph, false}, {delta(3, ""), true},
		{withNamespace, false}, {withExt, true}, {numberExt, false}, {twoExts, false}, {unnamedExt, false},
		{withData, false}, {otherRun, false}, {withSkip, false},
		{unknown, false}, {unknownInDelta, false}, {delta(1, strings.Repeat("x", 300)), true}, {end, false},
	} {
		e.ev.Seq = uint64(len(events) + 1)
		events, short = append(events, e.ev), append(short, e.short)
	}
	return events, short
}

// A publisher writes a text delta of its run short and every other event
// full; a held group of them, or the must publisher's messages joined,
// decode to the events in order, every field kept; each message of short
// deltas carries the run's ids.
func TestPublisherShortDeltas(t *testing.T) {
	events, short := shortMix()
	wantShort := 0
	for _, s := range short {
		if s {
			wantShort++
		}
	}
	f := &Fabric{cfg: NATSConfig{SubjectPrefix: "p"}}
	for _, must := range []bool{false, true} {
		p := f.publisher("t", "r", must)
		var joined []byte
		for i, ev := range events {
			elem, grown, ids, err := p.appendEvent(p.slab, ev)
			if err != nil {
				t.Fatal(err)
			}
			p.slab, p.heldIDs = grown, p.heldIDs || ids
			if must {
				if one, err := DecodeEvents(elem); err != nil || len(one) != 1 || !proto.Equal(one[0], ev) {
					t.Fatalf("must, event %d: its message decodes to %v, %v", i, one, err)
				}
			}
			joined = append(joined, elem...)
		}
		if !must && !bytes.Equal(joined, p.slab) {
			t.Fatal("the elements are not the held bytes")
		}
		var raw canonical.EventBatch
		if err := proto.Unmarshal(joined, &raw); err != nil || len(raw.GetDeltas()) != wantShort || raw.GetThreadId() != "t" || raw.GetRunId() != "r" {
			t.Fatalf("must %v: %d short deltas of %q/%q, %v; want %d of t/r", must, len(raw.GetDeltas()), raw.GetThreadId(), raw.GetRunId(), err, wantShort)
		}
		back, err := DecodeEvents(joined)
		if err != nil || len(back) != len(events) {
			t.Fatalf("must %v: decoded %d events, %v; want %d", must, len(back), err, len(events))
		}
		for i := range events {
			if !proto.Equal(back[i], events[i]) {
				t.Fatalf("must %v, event %d: got %v, want %v", must, i, back[i], events[i])
			}
		}
	}
}

// shortDelta looks at every field of an Event and of a BlockDelta: one
// added to canonical.proto is carried by neither BatchDelta nor its
// batch's ids, so shortDelta must refuse an event that sets it (or
// BatchDelta must carry it) before this list grows.
func TestShortDeltaFields(t *testing.T) {
	names := func(m proto.Message) string {
		var out []string
		fields := m.ProtoReflect().Descriptor().Fields()
		for i := range fields.Len() {
			out = append(out, string(fields.Get(i).Name()))
		}
		return strings.Join(out, " ")
	}
	const event = "thread_id run_id seq namespace time_unix_nano graph_node skipped_after lifecycle message_start message_finish block_start block_delta block_finish tool_started tool_output tool_finished tool_failed input_requested input_answered state_snapshot state_update checkpoint task custom error extensions"
	if got := names(&canonical.Event{}); got != event {
		t.Errorf("Event's fields are %q, shortDelta knows %q", got, event)
	}
	if got := names(&canonical.BlockDelta{}); got != "index text data" {
		t.Errorf("BlockDelta's fields are %q, shortDelta knows index, text and data", got)
	}
}

// Whatever bytes DecodeEvents is given it returns an error or events in
// seq order, one for each of the batch's events and short deltas.
func FuzzDecodeEvents(f *testing.F) {
	events, _ := shortMix()
	p := (&Fabric{cfg: NATSConfig{SubjectPrefix: "p"}}).publisher("t", "r", false)
	for _, ev := range events {
		_, grown, ids, _ := p.appendEvent(p.slab, ev)
		p.slab, p.heldIDs = grown, p.heldIDs || ids
	}
	f.Add(p.slab)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := DecodeEvents(data)
		if err != nil {
			return
		}
		var raw canonical.EventBatch
		if proto.Unmarshal(data, &raw) != nil || len(evs) != len(raw.GetEvents())+len(raw.GetDeltas()) {
			t.Fatalf("%d events from a batch of %d events and %d deltas", len(evs), len(raw.GetEvents()), len(raw.GetDeltas()))
		}
		for i := 1; i < len(evs) && len(raw.GetDeltas()) > 0; i++ {
			if evs[i-1].GetSeq() > evs[i].GetSeq() {
				t.Fatalf("event %d: seq %d after %d", i, evs[i].GetSeq(), evs[i-1].GetSeq())
			}
		}
	})
}

func BenchmarkPublisherShortDelta(b *testing.B) {
	ev := canonical.NewTextDelta(0, "tok ")
	ev.ThreadId, ev.RunId, ev.Seq, ev.TimeUnixNano = "run-4Jw3Pp2kYgQ1x9Zm0aBcDe", "run-4Jw3Pp2kYgQ1x9Zm0aBcDe", 1234, 1_700_000_000_123_456_789
	p := (&Fabric{cfg: NATSConfig{SubjectPrefix: "p"}}).publisher(ev.ThreadId, ev.RunId, false)
	p.heldIDs = true
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		_, buf, _, _ = p.appendEvent(buf[:0], ev)
	}
}
