package bridge

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
)

// A run placed on another instance, on a thread of its own, whose first
// message its client never got (a NATS reconnect as it started): the
// first message that arrives is after seq 1, which on a new thread is a
// loss, so the events before it are read from the replay log and the
// client gets the run whole. (It used to take that message for the
// start, and the run failed: a delta outside any block.)
func TestRemoteStreamFillsALostStart(t *testing.T) {
	bld := canonical.NewBuilder()
	evs := bld.Lifecycle(nil, canonical.StatusRunning)
	evs = bld.StartMessage(evs, "m", "assistant")
	evs = bld.Text(evs, "lost ")
	evs = bld.Text(evs, "then found")
	evs = bld.FinishMessage(evs, canonical.FinishStop, nil)
	evs = bld.End(evs, canonical.StatusCompleted, nil)
	numberRun(evs, "own")
	collectMissingTheLogged(t, "own", func(*Bridge) []*canonical.Event { return evs[:3] }, // the start, which the client will not get
		func(*Bridge) []*canonical.Event { return evs[3:] })
}

// A client that missed a run's start (a NATS reconnect) gets, live, the
// run's end that another instance appended for the owner that died, after
// the seqs the owner may have given its own clients (Event.skipped_after):
// it reads the start from the replay log, up to the seqs skipped, and
// passes the end on, with no hole reported and no wait for the skipped.
func TestRemoteStreamReadsAcrossASkip(t *testing.T) {
	bld := canonical.NewBuilder()
	evs := bld.Lifecycle(nil, canonical.StatusRunning)
	evs = bld.StartMessage(evs, "m", "assistant")
	evs = bld.Text(evs, "stored")
	numberRun(evs, "skip")
	var g canonical.Guard
	for _, ev := range evs {
		if v := g.Observe(ev); v != nil {
			t.Fatal(v)
		}
	}
	var end []*canonical.Event
	var ahead uint64
	collectMissingTheLogged(t, "skip", func(*Bridge) []*canonical.Event { return evs }, func(b *Bridge) []*canonical.Event {
		ahead = b.fabric.ownerAhead()
		end = b.stampOrphanEnd(g.End(nil, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "owner gone")), "skip", "skip", uint64(len(evs)))
		return end
	})
	if want := uint64(len(evs)) + ahead + 1; end[0].GetSeq() != want || end[0].GetSkippedAfter() != uint64(len(evs)) {
		t.Fatalf("the end starts at seq %d, skipping after %d; want %d after %d", end[0].GetSeq(), end[0].GetSkippedAfter(), want, len(evs))
	}
}

// collectMissingTheLogged publishes first(b), one run's (thread and run
// id both id) first events, to the replay log and waits for it to store
// them; then subscribes a remote stream of the run from the thread's
// start, which so misses them live, and publishes live(b). The stream
// must give the run whole: the first events, then the run's live ones.
func collectMissingTheLogged(t *testing.T, id string, first, live func(*Bridge) []*canonical.Event) {
	t.Helper()
	f, nc, _ := subscribedFabric(t, "unused")
	b := fabricBridge(f)
	logged := first(b)
	p := f.publisher(id, id, true)
	for _, ev := range logged {
		p.publish(ev)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if last, _ := f.LastSeq(context.Background(), id); last == logged[len(logged)-1].GetSeq() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run's first events did not reach the replay log")
		}
	}
	sub, err := nc.SubscribeSync(f.Prefix() + ".*." + id + ".*")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	rest := live(b)
	for _, ev := range rest {
		f.publisher(id, ev.GetRunId(), true).publish(ev)
	}
	rs := &remoteStream{b: b, ctx: context.Background(), sub: sub, thread: id, run: id, runToken: id,
		timeout: 2 * time.Second, stopWatch: func() bool { return true }, fromStart: true}
	b.remotes[rs] = struct{}{}
	got, err := canonical.Collect(rs)
	if err != nil {
		t.Fatal(err)
	}
	want := logged[:len(logged):len(logged)]
	for _, ev := range rest {
		if ev.GetRunId() == id { // another run's events are not this run's client's
			want = append(want, ev)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("event %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// A client whose run's owner went quiet after events the replay log never
// got (the owner died before storing them) ends the run itself, after
// them; those seqs, and its end's, are the thread's from then on: the next
// run of the thread, numbered from LastSeq, starts after them, not at the
// log's last (which would give the client's seqs again).
func TestClientEndBeyondTheLogIsTheFloor(t *testing.T) {
	f, nc, _ := subscribedFabric(t, "unused")
	b := fabricBridge(f)
	bld := canonical.NewBuilder()
	evs := bld.Lifecycle(nil, canonical.StatusRunning)
	evs = bld.StartMessage(evs, "m", "assistant")
	evs = bld.Text(evs, "never stored")
	numberRun(evs, "gone")
	sub, err := nc.SubscribeSync("test.live.gone.gone")
	if err != nil {
		t.Fatal(err)
	}
	data, err := proto.Marshal(&canonical.EventBatch{Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("test.live.gone.gone", data); err != nil { // live only, never in the log
		t.Fatal(err)
	}
	rs := &remoteStream{b: b, ctx: context.Background(), sub: sub, thread: "gone", run: "gone", runToken: "gone",
		timeout: 200 * time.Millisecond, stopWatch: func() bool { return true }, fromStart: true}
	b.remotes[rs] = struct{}{}
	got, err := canonical.Collect(rs)
	if err != nil {
		t.Fatal(err)
	}
	end := got[len(got)-1]
	if st, _ := canonical.TerminalOf(end); st != canonical.StatusFailed || len(got) <= len(evs) {
		t.Fatalf("the client's run ended %v after %d events", end, len(got))
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		last, err := f.LastSeq(context.Background(), "gone")
		if err == nil && last == end.GetSeq() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LastSeq = %d, %v; the client's end took seq %d", last, err, end.GetSeq())
		}
	}
}

// An observer of a run whose owner went quiet with no end anywhere (no
// client left to append one) makes the end itself, after the thread's last
// seq; that seq is the thread's from then on, so the next run of the
// thread does not give it again to an observer that saw it.
func TestObserverEndIsTheFloor(t *testing.T) {
	f, _, _ := subscribedFabric(t, "unused")
	b := fabricBridge(f)
	b.cluster.cfg = NATSConfig{OwnerTimeout: 100 * time.Millisecond, RemoteBuffer: 64}
	b.cluster.started = true
	bld := canonical.NewBuilder()
	evs := bld.Lifecycle(nil, canonical.StatusRunning)
	evs = bld.StartMessage(evs, "m", "assistant")
	numberRun(evs, "quiet")
	p := f.publisher("quiet", "quiet", true)
	for _, ev := range evs {
		p.publish(ev)
	}
	p.queueHeld()
	o, err := b.observe(context.Background(), "quiet", 0, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	var end *canonical.Event
	for end == nil {
		ev, err := o.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := canonical.TerminalOf(ev); ok {
			end = ev
		}
	}
	if end.GetSeq() <= uint64(len(evs)) {
		t.Fatalf("the observer's end has seq %d, within the run's %d events", end.GetSeq(), len(evs))
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		last, err := f.LastSeq(context.Background(), "quiet")
		if err == nil && last == end.GetSeq() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LastSeq = %d, %v; the observer's end took seq %d", last, err, end.GetSeq())
		}
	}
}

// fabricBridge is a bridge over f with nothing else: enough for a remote
// run's client and an observer.
func fabricBridge(f *Fabric) *Bridge {
	return &Bridge{fabric: f, log: slog.New(slog.DiscardHandler), now: time.Now, remotes: map[*remoteStream]struct{}{}, tails: map[string]*threadTail{}}
}

// numberRun makes evs run id's, on a thread of its own (also id), with
// seqs from 1.
func numberRun(evs []*canonical.Event, id string) {
	for i, ev := range evs {
		ev.ThreadId, ev.RunId, ev.Seq, ev.TimeUnixNano = id, id, uint64(i+1), 1
	}
}

// A client whose run's owner died, and that missed the end another
// instance appended (its skip included), reads it from the replay log when
// the thread's next run's first event arrives live: the missed events
// follow one another across the skip (canonical.Follows), not one seq
// each, and the run ends as the log ends it. (It failed data_loss, the
// events between counted as if consecutive, in the fault harness.)
func TestRemoteStreamFillsAcrossASkip(t *testing.T) {
	bld := canonical.NewBuilder()
	evs := bld.Lifecycle(nil, canonical.StatusRunning)
	evs = bld.StartMessage(evs, "m", "assistant")
	evs = bld.Text(evs, "stored")
	numberRun(evs, "gap")
	var g canonical.Guard
	for _, ev := range evs {
		if v := g.Observe(ev); v != nil {
			t.Fatal(v)
		}
	}
	var last uint64
	collectMissingTheLogged(t, "gap", func(b *Bridge) []*canonical.Event {
		end := b.stampOrphanEnd(g.End(nil, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "owner gone")), "gap", "gap", uint64(len(evs)))
		last = end[len(end)-1].GetSeq()
		return append(evs[:len(evs):len(evs)], end...)
	}, func(*Bridge) []*canonical.Event {
		return []*canonical.Event{{ThreadId: "gap", RunId: "after", Seq: last + 1, TimeUnixNano: 1,
			Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusRunning}}}}
	})
}
