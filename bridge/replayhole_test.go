package bridge_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// TestReplayReportsHoles: a replay never passes over events the replay log
// no longer holds as if the events around them followed each other. A
// resume (since > 0) from before the oldest event the log holds fails
// out_of_range, naming the events gone; a hole inside what is replayed (a
// run's events lost) fails data_loss after the events before it; a replay
// from the start begins with the oldest event held. The log's messages are
// purged here as aging (replay_max_age) or discarding (replay_max_bytes,
// oldest first) would.
func TestReplayReportsHoles(t *testing.T) {
	ns := natsServer(t)
	inst := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	const thread = "holey"
	body := `{"target":"stream","threadId":"` + thread + `","parameters":{"deltas":2},"inputs":[]}`
	var runs [3]struct {
		id          string
		first, last uint64
	}
	for i := range runs {
		evs, code := bridgetest.PostRun(t, inst.URL, body)
		if code != 200 || len(evs) == 0 {
			t.Fatalf("run %d: status %d, %d events", i, code, len(evs))
		}
		runs[i].id, runs[i].first, runs[i].last = evs[0].GetRunId(), evs[0].GetSeq(), evs[len(evs)-1].GetSeq()
	}
	last := runs[2].last

	_, stream := replayStream(t, ns.ClientURL())
	ctx := t.Context()
	threadSubjects := "interlingua.events." + subject.Token(thread) + ".>"
	waitFor(t, func() bool {
		m, err := stream.GetLastMsgForSubject(ctx, threadSubjects)
		return err == nil && m.Header.Get("Interlingua-Last-Seq") == strconv.FormatUint(last, 10)
	})
	purgeRun := func(i int) {
		t.Helper()
		err := stream.Purge(ctx, jetstream.WithPurgeSubject("interlingua.events."+subject.Token(thread)+"."+subject.Token(runs[i].id)))
		if err != nil {
			t.Fatal(err)
		}
	}

	// The middle run's events are gone.
	purgeRun(1)
	seqs, err := observe(t, inst, thread, 0, last)
	wantHole := fmt.Sprintf("events %d to %d", runs[1].first, runs[1].last)
	if codeOf(err) != canonical.CodeDataLoss || !strings.Contains(err.Error(), wantHole) || !consecutive(seqs, 1, runs[0].last) {
		t.Fatalf("replay from the start over a lost run: seqs %v, then %v; want 1 to %d, then data_loss naming %s", seqs, err, runs[0].last, wantHole)
	}
	if seqs, err = observe(t, inst, thread, runs[1].last, last); err != nil || !consecutive(seqs, runs[2].first, last) {
		t.Fatalf("resume after the hole: seqs %v, %v; want %d to %d", seqs, err, runs[2].first, last)
	}

	// Now the first run's too: the log starts at the third.
	purgeRun(0)
	seqs, err = observe(t, inst, thread, 2, last)
	wantGone := fmt.Sprintf("events 3 to %d", runs[1].last)
	if codeOf(err) != canonical.CodeOutOfRange || !strings.Contains(err.Error(), wantGone) || len(seqs) != 0 {
		t.Fatalf("resume from seq 2: seqs %v, then %v; want none, then out_of_range naming %s", seqs, err, wantGone)
	}
	if seqs, err = observe(t, inst, thread, 0, last); err != nil || !consecutive(seqs, runs[2].first, last) {
		t.Fatalf("replay from the start of what is held: seqs %v, %v; want %d to %d", seqs, err, runs[2].first, last)
	}
}

// observe reads the thread's events after since until one with seq upTo
// (then it stops, nil) or an error, within 5 s.
func observe(t *testing.T, inst *bridgetest.Instance, thread string, since, upTo uint64) ([]uint64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, err := inst.Bridge().Observe(ctx, thread, since)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var seqs []uint64
	for {
		ev, err := s.Recv()
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, ev.GetSeq())
		if ev.GetSeq() == upTo {
			return seqs, nil
		}
	}
}

// codeOf is err's canonical code; OK for nil.
func codeOf(err error) canonical.Code {
	if err == nil {
		return canonical.CodeOK
	}
	return canonical.AsError(err).Code
}

// consecutive reports whether seqs are from to to, one by one.
func consecutive(seqs []uint64, from, to uint64) bool {
	if uint64(len(seqs)) != to-from+1 {
		return false
	}
	for i, s := range seqs {
		if s != from+uint64(i) {
			return false
		}
	}
	return true
}

// A reader catching up from the log (behind the tail's window) whose next
// events the log lets go of meanwhile (its oldest, as replay_max_bytes
// discards them) is told out_of_range, naming the events gone and the
// oldest held, not data_loss: the log lost nothing it still claims to
// hold, and a frontend resumes such a reader from the oldest (the agent
// protocol's gap report).
func TestReplayReaderOvertakenByTheLogsBound(t *testing.T) {
	ns := natsServer(t)
	inst := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	const thread = "overtaken"
	var runs []string
	var firsts, lasts []uint64
	for _, deltas := range []int{1500, 2} {
		evs, code := bridgetest.PostRun(t, inst.URL, `{"target":"stream","threadId":"`+thread+`","parameters":{"deltas":`+strconv.Itoa(deltas)+`},"inputs":[]}`)
		if code != 200 || len(evs) == 0 {
			t.Fatalf("run of %d deltas: status %d, %d events", deltas, code, len(evs))
		}
		runs = append(runs, evs[0].GetRunId())
		firsts, lasts = append(firsts, evs[0].GetSeq()), append(lasts, evs[len(evs)-1].GetSeq())
	}
	_, stream := replayStream(t, ns.ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	waitFor(t, func() bool {
		m, err := stream.GetLastMsgForSubject(ctx, "interlingua.events."+subject.Token(thread)+".>")
		return err == nil && m.Header.Get("Interlingua-Last-Seq") == strconv.FormatUint(lasts[1], 10)
	})
	s, err := inst.Bridge().Observe(ctx, thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const read = 1024 // one catch-up step's events (bridge.catchUpEvents)
	for i := range read {
		ev, err := s.Recv()
		if err != nil || ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d: %v, %v", i+1, ev.GetSeq(), err)
		}
	}
	// The log lets go of the first run, the rest of which the reader has
	// not read.
	err = stream.Purge(ctx, jetstream.WithPurgeSubject("interlingua.events."+subject.Token(thread)+"."+subject.Token(runs[0])))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	want := fmt.Sprintf("events %d to %d", read+1, firsts[1]-1)
	if codeOf(err) != canonical.CodeOutOfRange || !strings.Contains(err.Error(), want) {
		t.Fatalf("after the log let go of what the reader had not read: %v; want out_of_range naming %s", err, want)
	}
}

// A run's end appended for an owner that died is numbered after the seqs
// the owner may have given its own clients, and says it skips them
// (canonical.Follows): a replay reads across them with no hole, live or
// from the log; a reader resuming from a seq inside them (a client that
// read from the dead owner what the log never got) reads that end next.
// (TestClusterOwnerKilledItsClientResumesElsewhere: the thread's next run
// numbers after it.)
func TestReplayReadsAcrossAnOwnersSkip(t *testing.T) {
	ns := natsServer(t)
	inst := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	const thread, skip = "skipped", 1000
	evs, code := bridgetest.PostRun(t, inst.URL, `{"target":"stream","threadId":"`+thread+`","parameters":{"deltas":2},"inputs":[]}`)
	if code != 200 || len(evs) == 0 {
		t.Fatalf("status %d, %d events", code, len(evs))
	}
	last := evs[len(evs)-1].GetSeq()
	js, stream := replayStream(t, ns.ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	threadSubjects := "interlingua.events." + subject.Token(thread) + ".>"
	waitFor(t, func() bool {
		m, err := stream.GetLastMsgForSubject(ctx, threadSubjects)
		return err == nil && m.Header.Get("Interlingua-Last-Seq") == strconv.FormatUint(last, 10)
	})

	live, err := inst.Bridge().Observe(ctx, thread, last)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	inside, err := inst.Bridge().Observe(ctx, thread, last+3)
	if err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	end := &canonical.Event{ThreadId: thread, RunId: "dead", Seq: last + skip, SkippedAfter: proto.Uint64(last),
		Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusFailed, Error: &canonical.ErrorProto{Code: uint32(canonical.CodeUnavailable), Message: "owner gone"}}}}
	data, err := proto.Marshal(&canonical.EventBatch{Events: []*canonical.Event{end}})
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: "interlingua.events." + subject.Token(thread) + ".dead", Data: data, Header: nats.Header{}}
	msg.Header.Set("Interlingua-Last-Seq", strconv.FormatUint(end.Seq, 10))
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]canonical.Stream{"live after the log's last": live, "live from inside the skip": inside} {
		if ev, err := s.Recv(); err != nil || ev.GetSeq() != end.Seq {
			t.Fatalf("%s: %v, %v; want the end, seq %d", name, ev.GetSeq(), err, end.Seq)
		}
	}
	live.Close()
	inside.Close()

	// A tail opened anew: readers catch up from the log.
	if seqs, err := observe(t, inst, thread, 0, end.Seq); err != nil || !consecutive(seqs[:len(seqs)-1], 1, last) || seqs[len(seqs)-1] != end.Seq {
		t.Fatalf("replay from the start: seqs %v, %v; want 1 to %d, then %d", seqs, err, last, end.Seq)
	}
	if seqs, err := observe(t, inst, thread, last+5, end.Seq); err != nil || len(seqs) != 1 {
		t.Fatalf("resume from inside the skip: seqs %v, %v; want %d", seqs, err, end.Seq)
	}
}
