package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
)

// queued is a test queue: events of three threads (two runs each), in a
// random interleaving, each event's seq counting per thread, each a
// message as a must publisher writes it (short deltas after the run's
// ids; a delta with a graph node in full).
func queued(t *testing.T, rng *rand.Rand, n int) ([]pubMsg, map[string][]uint64) {
	t.Helper()
	f := &Fabric{cfg: NATSConfig{SubjectPrefix: "p"}}
	seq := map[string]uint64{}
	order := map[string][]uint64{} // per thread: seqs in queue order
	pubs := map[string]*publisher{}
	var msgs []pubMsg
	for range n {
		thread := fmt.Sprintf("t%d", rng.IntN(3))
		run := fmt.Sprintf("r%d", rng.IntN(2))
		seq[thread]++
		ev := canonical.NewTextDelta(0, string(make([]byte, rng.IntN(300))))
		ev.ThreadId, ev.RunId, ev.Seq = thread, run, seq[thread]
		if rng.IntN(4) == 0 {
			ev.GraphNode = "n"
		}
		p := pubs[thread+"/"+run]
		if p == nil {
			p = f.publisher(thread, run, true)
			pubs[thread+"/"+run] = p
		}
		data, _, _, err := p.appendEvent(nil, ev)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, pubMsg{subject: f.EventSubject(thread, run), thread: thread, data: data, events: 1})
		order[thread] = append(order[thread], ev.Seq)
	}
	return msgs, order
}

// Whatever the interleaving and the size bound, the messages published
// carry every queued message exactly once, as EventBatches of one run each, within the bound unless a
// lone event exceeds it, and per thread in the order they were queued.
func TestBatcherGroupProperty(t *testing.T) {
	for i := range 300 {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		msgs, order := queued(t, rng, 1+rng.IntN(200))
		maxBytes := 50 + rng.IntN(4000)
		var b batcher
		b.group(msgs, maxBytes)
		seen := make([]bool, len(msgs))
		got := map[string][]uint64{}
		for _, g := range b.groups {
			m := msgs[g.head]
			n := 0
			for j := g.head; j >= 0; j = b.next[j] {
				if seen[j] || msgs[j].events == 0 || msgs[j].subject != m.subject {
					t.Fatalf("case %d: message %d in group %+v", i, j, g)
				}
				seen[j] = true
				n++
			}
			data := b.join(msgs, g)
			if n != g.events || (n > 1 && len(data) > maxBytes) {
				t.Fatalf("case %d: group of %d events, %d bytes (bound %d)", i, n, len(data), maxBytes)
			}
			evs, err := DecodeEvents(data)
			if err != nil || len(evs) != n {
				t.Fatalf("case %d: batch decodes to %d events, %v", i, len(evs), err)
			}
			for _, ev := range evs {
				if m.subject != (&Fabric{cfg: NATSConfig{SubjectPrefix: "p"}}).EventSubject(ev.GetThreadId(), ev.GetRunId()) {
					t.Fatalf("case %d: event of %s/%s in a batch on %s", i, ev.GetThreadId(), ev.GetRunId(), m.subject)
				}
				got[ev.GetThreadId()] = append(got[ev.GetThreadId()], ev.GetSeq())
			}
		}
		for j, ok := range seen {
			if !ok {
				t.Fatalf("case %d: message %d not published", i, j)
			}
		}
		for thread, want := range order {
			if fmt.Sprint(got[thread]) != fmt.Sprint(want) {
				t.Fatalf("case %d: thread %s published in order %v, queued %v", i, thread, got[thread], want)
			}
		}
	}
}

// Events that queue up while the publish loop is busy go out as one
// message per run: a subscriber on a real NATS connection gets one
// EventBatch holding all of them, in order; an event queued alone is a
// batch of one.
func TestBurstIsOneMessage(t *testing.T) {
	f, nc, sub := subscribedFabric(t, "interlingua.events.>")
	p := f.publisher("th", "run", false)
	ev := func(seq uint64) *canonical.Event {
		e := canonical.NewTextDelta(0, "tok ")
		e.ThreadId, e.RunId, e.Seq = "th", "run", seq
		return e
	}
	// Hold the queue's lock while publishing the burst, as a busy loop
	// would be, and wake the loop only after: it takes all 100 at once.
	f.pubq.mu.Lock()
	var burst []*canonical.Event
	for seq := range uint64(100) {
		e := ev(seq + 1)
		burst = append(burst, e)
		data, b, ids, err := p.appendEvent(p.slab, e)
		if err != nil {
			t.Fatal(err)
		}
		p.slab, p.heldIDs = b, p.heldIDs || ids
		f.pubq.msgs = append(f.pubq.msgs, pubMsg{subject: p.subject, thread: "th", data: data, events: 1})
	}
	f.pubq.mu.Unlock()
	p.held, p.heldIDs = len(p.slab), false // those are queued, not held
	f.pubq.wake <- struct{}{}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(shortBatch("th", "run", burst...))
	if string(m.Data) != string(want) {
		t.Fatalf("burst: got %d bytes, want one EventBatch of 100 short deltas (%d bytes)", len(m.Data), len(want))
	}
	// A run's publisher holds its events until queueHeld (the backend
	// holds no more), which has the loop publish them within the delay.
	p.publish(ev(101))
	if n := f.pubq.len(); n != 0 {
		t.Fatalf("publish queued %d messages: the publisher holds its events until queueHeld", n)
	}
	p.queueHeld()
	m, err = sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want, _ = proto.Marshal(shortBatch("th", "run", ev(101)))
	if string(m.Data) != string(want) {
		t.Fatalf("lone event: got %x, want %x", m.Data, want)
	}
	// The subscriber can have both messages before the replay stream has
	// stored the second: LastSeq reads the stream.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := f.events.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replay stream stored %d of the 2 messages", info.State.Msgs)
		}
	}
	// LastSeq is two JetStream requests, direct gets of the thread's last
	// message and of its seq floor (seqfloor.go), not a STREAM.INFO before
	// them, nor the API's message get: it runs at the start of every run
	// of a known thread.
	api, err := nc.SubscribeSync("$JS.API.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if seq, err := f.LastSeq(context.Background(), "th"); err != nil || seq != 101 {
		t.Fatalf("LastSeq = %d, %v; want 101 (the last event of the last batch)", seq, err)
	}
	var reqs []string
	for {
		m, err := api.NextMsg(100 * time.Millisecond)
		if err != nil {
			break
		}
		reqs = append(reqs, m.Subject)
	}
	wantReqs := []string{"$JS.API.DIRECT.GET." + EventsStream + ".interlingua.events.th.*",
		"$JS.API.DIRECT.GET.KV_" + ThreadsBucket + ".$KV." + ThreadsBucket + ".seq.th"}
	if !slices.Equal(reqs, wantReqs) {
		t.Fatalf("LastSeq's JetStream API requests: %q, want %q", reqs, wantReqs)
	}
}

// BenchmarkLastSeq: the replay-log read at the start of every run of a
// known thread, against the embedded server.
func BenchmarkLastSeq(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Defaults()
	f, err := StartFabric(context.Background(), cfg.NATS, b.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p := f.publisher("th", "run", true)
	for seq := range uint64(50) {
		e := canonical.NewTextDelta(0, "tok ")
		e.ThreadId, e.RunId, e.Seq = "th", "run", seq+1
		p.publish(e)
	}
	p.publishNow()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if seq, _ := f.LastSeq(context.Background(), "th"); seq == 50 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the replay log did not store the events")
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if seq, err := f.LastSeq(context.Background(), "th"); err != nil || seq != 50 {
			b.Fatalf("LastSeq = %d, %v", seq, err)
		}
	}
}

// A thread's events reach a NATS subscriber in seq order, none lost or
// repeated, while two of its runs publish concurrently: one owned for a
// remote client (each event queued at once) and one with a local client
// (events held, then queued in bursts, with batching by the loop).
func TestThreadOrderThroughNATS(t *testing.T) {
	f, _, sub := subscribedFabric(t, "interlingua.events.th.*")
	_ = sub.SetPendingLimits(-1, -1)
	th := &thread{}
	remote, local := f.publisher("th", "remote", true), f.publisher("th", "local", false)
	const each = 3000
	var wg sync.WaitGroup
	for i, p := range []*publisher{remote, local} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 5))
			for range each {
				publishNext(th, p)
				if rng.IntN(8) == 0 {
					th.queueHeld(p) // that run's backend holds no more
				}
				if rng.IntN(16) == 0 {
					runtime.Gosched()
				}
			}
			th.queueHeld(p)
		}()
	}
	wg.Wait()
	f.pubq.signal()
	var next uint64 = 1
	for next <= 2*each {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("after seq %d of %d: %v", next-1, 2*each, err)
		}
		evs, err := DecodeEvents(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.GetSeq() != next || ev.GetRunId() != m.Subject {
				t.Fatalf("got seq %d of run %s on %s, want seq %d", ev.GetSeq(), ev.GetRunId(), m.Subject, next)
			}
			next++
		}
	}
	if f.Dropped() != 0 {
		t.Fatalf("%d events dropped", f.Dropped())
	}
}

// subscribedFabric starts a fabric on an embedded NATS server and
// subscribes to subj on a connection of its own; both end with the test.
func subscribedFabric(t *testing.T, subj string) (*Fabric, *nats.Conn, *nats.Subscription) {
	t.Helper()
	f := testFabric(t)
	nc, err := nats.Connect(f.EmbeddedURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f, nc, sub
}

// testFabric starts a fabric on an embedded server of its own, listening
// on loopback so a test can connect to it too; cleanup closes it.
func testFabric(t *testing.T) *Fabric {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NATS.EmbeddedListen = "127.0.0.1:0"
	cfg.Defaults()
	f, err := StartFabric(context.Background(), cfg.NATS, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// shortBatch is the EventBatch of the text deltas evs of one run, each
// written short.
func shortBatch(thread, run string, evs ...*canonical.Event) *canonical.EventBatch {
	b := &canonical.EventBatch{ThreadId: thread, RunId: run}
	for _, ev := range evs {
		d := ev.GetBlockDelta()
		b.Deltas = append(b.Deltas, &canonical.BatchDelta{Seq: ev.GetSeq(), TimeUnixNano: ev.GetTimeUnixNano(), Index: d.GetIndex(), Text: d.GetText()})
	}
	return b
}
