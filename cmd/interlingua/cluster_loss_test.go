package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// clientAndOwner starts a nats-server and two daemons on it: b hosts every
// backend and a none, so a run started on a (its client's instance) is
// placed on b (its owner).
func clientAndOwner(t *testing.T, args ...string) (bin string, n *bridgetest.NATSProcess, a, b *daemon) {
	t.Helper()
	bin = buildBinary(t)
	n = bridgetest.StartNATSProcess(t)
	b = startDaemon(t, bin, n.URL(), args...)
	a = startDaemon(t, bin, n.URL(), append([]string{"--host-backends", "none"}, args...)...)
	return bin, n, a, b
}

// replayAll reads a thread's replay from seq 0 on base up to the n-th
// terminal event.
func replayAll(t *testing.T, base, thread string, terminals int) []*canonical.Event {
	t.Helper()
	r := openStream(t, "GET", base+"/v1/threads/"+thread+"/events?since=0", "")
	var out []*canonical.Event
	for range terminals {
		out = append(out, r.untilTerminal()...)
	}
	return out
}

// observeFor30s opens base's stream of thread's events after seq since,
// cut after 30 s: a read past that fails the test.
func observeFor30s(t *testing.T, base, thread string, since uint64) *eventReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/threads/%s/events?since=%d", base, thread, since), nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &eventReader{t: t, body: resp.Body, sc: bufio.NewScanner(resp.Body)}
}

// follows fails the test unless each of evs follows the one before it
// (canonical.Follows: the next seq, or past the seqs it says it skips).
func follows(t *testing.T, what string, evs []*canonical.Event) {
	t.Helper()
	for i, ev := range evs[1:] {
		if !canonical.Follows(ev, evs[i].GetSeq()) {
			t.Fatalf("%s: seq %d after %d (skipped after: %v)", what, ev.GetSeq(), evs[i].GetSeq(), ev.SkippedAfter)
		}
	}
}

// strictlyIncreasing fails the test unless evs' seqs strictly increase.
func strictlyIncreasing(t *testing.T, what string, evs []*canonical.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].GetSeq() <= evs[i-1].GetSeq() {
			t.Fatalf("%s: event %d has seq %d after %d", what, i, evs[i].GetSeq(), evs[i-1].GetSeq())
		}
	}
}

// The owner of a run is killed; its client (on another instance) gets
// failed/unavailable, and that end is in the replay log under a fresh seq:
// the thread's next run, on the owner restarted, numbers after it, so no seq
// the client saw is reused, and the replay from 0 has no duplicate.
func TestClusterOwnerKilledSeqNotReused(t *testing.T) {
	bin, n, a, b := clientAndOwner(t)
	r := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-seq","parameters":{"deltas":1000,"delay_ms":5},"inputs":[]}`)
	var seen []*canonical.Event
	for range 20 {
		ev, ok := r.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		seen = append(seen, ev)
	}
	obs := openStream(t, "GET", a.base+"/v1/threads/t-seq/events", "")
	b.kill9()
	seen = append(seen, r.untilTerminal()...)
	strictlyIncreasing(t, "client", seen)
	end := seen[len(seen)-1]
	if lc := end.GetLifecycle(); lc.GetStatus() != canonical.StatusFailed || canonical.Code(lc.GetError().GetCode()) != canonical.CodeUnavailable {
		t.Fatalf("client's run ended %v, want failed/unavailable", end)
	}
	observed := obs.untilTerminal()
	strictlyIncreasing(t, "observer", observed)
	if oend := observed[len(observed)-1]; oend.GetSeq() != end.GetSeq() || oend.GetLifecycle().GetStatus() != canonical.StatusFailed {
		t.Fatalf("the observer's end %v differs from the client's %v: one end, one seq, for all", oend, end)
	}
	startDaemon(t, bin, n.URL()) // the owner restarted
	next := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-seq","parameters":{"deltas":3},"inputs":[]}`).untilTerminal()
	if first := next[0].GetSeq(); first <= end.GetSeq() {
		t.Fatalf("the next run starts at seq %d: reuses a seq the client saw (its run ended at %d)", first, end.GetSeq())
	}
	all := replayAll(t, a.base, "t-seq", 2)
	strictlyIncreasing(t, "replay", all)
	var logged bool
	for _, ev := range all {
		if ev.GetSeq() == end.GetSeq() {
			logged = ev.GetRunId() == end.GetRunId() && ev.GetLifecycle().GetStatus() == canonical.StatusFailed
		}
	}
	if !logged {
		t.Fatalf("the client's failed end (seq %d) is not in the replay log", end.GetSeq())
	}
}

// NATS is killed and restarted while a run placed on another instance
// streams: the client ends with every event and completed, or with failed,
// never with completed and seqs missing.
func TestClusterNATSRestartRemoteRun(t *testing.T) {
	// A heartbeat of 1s (owner timeout 3s) on both sides: the NATS restart
	// and both reconnects fit in it, so neither side takes the other for dead.
	_, n, a, _ := clientAndOwner(t, "--set", "nats.heartbeat=1s")
	r := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-restart","parameters":{"deltas":300,"delay_ms":5},"inputs":[]}`)
	first, ok := r.next()
	if !ok {
		t.Fatal("no first event")
	}
	n.Kill()
	n.Start(t)
	evs := append([]*canonical.Event{first}, r.untilTerminal()...)
	strictlyIncreasing(t, "client", evs)
	last := evs[len(evs)-1]
	st, _ := canonical.TerminalOf(last)
	switch st {
	case canonical.StatusCompleted:
		for i, ev := range evs {
			if ev.GetSeq() != first.GetSeq()+uint64(i) {
				t.Fatalf("completed with a hole: event %d has seq %d, want %d", i, ev.GetSeq(), first.GetSeq()+uint64(i))
			}
		}
		if len(evs) != 306 {
			t.Fatalf("completed with %d events, want 306", len(evs))
		}
	case canonical.StatusFailed:
		t.Logf("run failed across the NATS restart: %v", last.GetLifecycle().GetError())
	default:
		t.Fatalf("run ended %v", last)
	}
}

// The instance whose client reads a run placed elsewhere dies: the owner
// stops hearing the client's heartbeat and cancels the run within a few
// seconds instead of running it to the end for nobody.
func TestClusterClientInstanceKilledCancelsRun(t *testing.T) {
	_, _, a, b := clientAndOwner(t)
	r := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-orphan","parameters":{"deltas":100000,"delay_ms":10},"inputs":[]}`)
	if _, ok := r.next(); !ok {
		t.Fatal("no first event")
	}
	obs := openStream(t, "GET", b.base+"/v1/threads/t-orphan/events", "")
	killed := time.Now()
	a.kill9()
	evs := obs.untilTerminal()
	took := time.Since(killed)
	end := evs[len(evs)-1]
	if st, _ := canonical.TerminalOf(end); st != canonical.StatusCancelled {
		t.Fatalf("run ended %v, want cancelled", end)
	}
	if took > 15*time.Second {
		t.Fatalf("run cancelled %s after its client's instance died, want within 15s", took)
	}
	// The log line is written before the run is cancelled, but reaches
	// b.log through the process's stderr pipe, which may lag the event.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(b.log.String(), "its client's instance is gone"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("owner did not log why it cancelled the run:\n%s", b.log.String())
		}
	}
}

// An agent-protocol subscriber on one instance of a run that another
// instance runs: that instance is killed, and the subscriber gets the
// run's failed lifecycle event within 6 s (heartbeat 1 s, owner timeout
// 3 s), instead of heartbeats for ever.
func TestClusterAgentOwnerKilled(t *testing.T) {
	_, _, a, b := clientAndOwner(t, "--set", "nats.heartbeat=1s")
	req, _ := http.NewRequest("POST", a.base+"/threads/t-agent-owner/stream/events", strings.NewReader(`{"channels":["lifecycle"]}`))
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("subscribe on A: %v %v", resp, err)
	}
	defer resp.Body.Close()
	frames := make(chan string, 64)
	go func() {
		defer close(frames)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				frames <- line
			}
		}
	}()
	start := `{"id":1,"method":"run.start","params":{"assistant_id":"demo-agent","input":{"messages":[{"role":"user","content":"wait"}]},"config":{"configurable":{"hang":true}}}}`
	cresp, err := client.Post(b.base+"/threads/t-agent-owner/commands", "application/json", strings.NewReader(start))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(cresp.Body)
	cresp.Body.Close()
	if !strings.Contains(string(body), `"success"`) {
		t.Fatalf("run.start on B: %s", body)
	}
	waitFrame := func(want string, within time.Duration) string {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					t.Fatalf("stream ended waiting for %s", want)
				}
				if strings.Contains(f, want) && strings.Contains(f, `"namespace":[]`) {
					return f
				}
			case <-deadline:
				t.Fatalf("no %s frame within %s", want, within)
			}
		}
	}
	waitFrame(`"event":"running"`, 10*time.Second)
	killed := time.Now()
	b.kill9()
	f := waitFrame(`"event":"failed"`, 6*time.Second)
	if !strings.Contains(f, "run owner sent neither event nor heartbeat") {
		t.Fatalf("failed frame %s does not say why", f)
	}
	t.Logf("failed lifecycle %s after the kill", time.Since(killed).Round(time.Millisecond))
}

// The owner of a run is its client's instance too and is killed: nobody is
// left to end the run. The instance that next takes the thread's lease,
// made anew after the dead owner's expired, appends the run's failed end
// (finishing the message and block it left open) before its own run: a
// replay reads the killed run to an end, then the next run after it.
func TestClusterOwnerAndClientKilledRunEnded(t *testing.T) {
	bin, n, a, b := clientAndOwner(t)
	r := openStream(t, "POST", b.base+"/v1/runs", `{"target":"stream","threadId":"t-orphan","parameters":{"deltas":1000,"delay_ms":5},"inputs":[]}`)
	for range 20 {
		if _, ok := r.next(); !ok {
			t.Fatal("stream ended early")
		}
	}
	b.kill9()
	startDaemon(t, bin, n.URL()) // another instance hosting the backend
	time.Sleep(3 * time.Second)  // the dead owner's lease expires (its TTL: 3 s)
	next := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-orphan","parameters":{"deltas":3},"inputs":[]}`).untilTerminal()
	if st, _ := canonical.TerminalOf(next[len(next)-1]); st != canonical.StatusCompleted {
		t.Fatalf("the thread's next run ended %v", next[len(next)-1])
	}
	killed := observeFor30s(t, a.base, "t-orphan", 0).untilTerminal()
	strictlyIncreasing(t, "replay", killed)
	end := killed[len(killed)-1]
	if lc := end.GetLifecycle(); end.GetRunId() == next[0].GetRunId() || lc.GetStatus() != canonical.StatusFailed || canonical.Code(lc.GetError().GetCode()) != canonical.CodeUnavailable {
		t.Fatalf("the replay's first end is %v, want the killed run's failed/unavailable", end)
	}
	if err := canonical.Validate(killed); err != nil {
		t.Fatalf("the killed run as the log ends it: %v", err)
	}
	if first := next[0].GetSeq(); first != end.GetSeq()+1 {
		t.Fatalf("the next run starts at seq %d, the killed run's end is at %d", first, end.GetSeq())
	}
}

// A run's client is on its owner, which holds the events it gives the
// client before the replay log stores them (nats.publish_delay), and is
// killed: the client has read seqs the log never got. Resuming elsewhere
// from its last seq, it reads the run's failed end, then the thread's next
// run from its first event: no seq it read is given to another event, and
// it misses nothing numbered after. A replay from the start reads across
// the seqs the dead owner took (the end says it skips them) with no hole.
func TestClusterOwnerKilledItsClientResumesElsewhere(t *testing.T) {
	// The owner publishes every 300 ms: the log has the run's first
	// events, not the latest the client read (unless the kill falls
	// within a delta's 5 ms of a publish).
	bin, n, a, b := clientAndOwner(t, "--set", "nats.publish_delay=300ms")
	r := openStream(t, "POST", b.base+"/v1/runs", `{"target":"stream","threadId":"t-resume","parameters":{"deltas":1000,"delay_ms":5},"inputs":[]}`)
	var read []*canonical.Event
	for range 100 {
		ev, ok := r.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		read = append(read, ev)
	}
	b.kill9()
	seen, run := read[len(read)-1].GetSeq(), read[0].GetRunId()
	startDaemon(t, bin, n.URL()) // another instance hosting the backend

	resumed := observeFor30s(t, a.base, "t-resume", seen)
	rest := resumed.untilTerminal()
	end, prev := rest[len(rest)-1], seen
	var skip *canonical.Event // the first of the events that end the run
	for _, ev := range rest {
		if !canonical.Follows(ev, prev) || ev.GetRunId() != run {
			t.Fatalf("resumed after seq %d, read %v after seq %d: want the killed run's events after it", seen, ev, prev)
		}
		if ev.SkippedAfter != nil {
			skip = ev
		}
		prev = ev.GetSeq()
	}
	if lc := end.GetLifecycle(); lc.GetStatus() != canonical.StatusFailed || skip == nil {
		t.Fatalf("the killed run ends %v (the skip: %v): want failed, numbered after the seqs its owner took", end, skip)
	}
	if skip.GetSkippedAfter() >= seen {
		t.Logf("the log had every event the client read (to seq %d): the kill fell right after a publish", seen)
	}
	next := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-resume","parameters":{"deltas":3},"inputs":[]}`).untilTerminal()
	// (The next holder, finding the dead owner's lease mark, may skip
	// once more: TestClusterOwnerKilledBeforeTheLogHadItsRun.)
	if got := resumed.untilTerminal(); len(got) != len(next) || !canonical.Follows(got[0], end.GetSeq()) || got[0].GetSeq() != next[0].GetSeq() {
		t.Fatalf("after the end, the resumed stream read %d events from seq %d; the next run has %d from seq %d", len(got), got[0].GetSeq(), len(next), next[0].GetSeq())
	}

	follows(t, "replay", replayAll(t, a.base, "t-resume", 2))
}

// The owner of a run is killed before the replay log stored any of the
// run's events (nats.publish_delay holds them): no instance knows of the
// run, but the owner's mark of the thread's lease, never deleted, tells
// the next holder that it died holding it. The thread's next run is
// numbered after the seqs the owner may have given (its first event says
// so), so the client that read the lost run resumes elsewhere from its
// last seq and reads the next run whole.
func TestClusterOwnerKilledBeforeTheLogHadItsRun(t *testing.T) {
	bin, n, a, b := clientAndOwner(t, "--set", "nats.publish_delay=10s")
	first := openStream(t, "POST", b.base+"/v1/runs", `{"target":"stream","threadId":"t-unseen","parameters":{"deltas":2},"inputs":[]}`).untilTerminal()
	r := openStream(t, "POST", b.base+"/v1/runs", `{"target":"stream","threadId":"t-unseen","parameters":{"deltas":1000,"delay_ms":5},"inputs":[]}`)
	var seen uint64
	for range 50 {
		ev, ok := r.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		seen = ev.GetSeq()
	}
	b.kill9()
	startDaemon(t, bin, n.URL()) // another instance hosting the backend
	time.Sleep(3 * time.Second)  // the dead owner's lease expires (its TTL: 3 s)

	resumed := observeFor30s(t, a.base, "t-unseen", seen)
	next := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-unseen","parameters":{"deltas":3},"inputs":[]}`).untilTerminal()
	logged := first[len(first)-1].GetSeq()
	if start := next[0]; start.GetSeq() <= seen || start.SkippedAfter == nil || start.GetSkippedAfter() != logged {
		t.Fatalf("the next run starts %v: want a seq after %d (read from the dead owner), skipping after %d (the log's last)", start, seen, logged)
	}
	got := resumed.untilTerminal()
	if len(got) != len(next) || !canonical.Follows(got[0], seen) || got[0].GetSeq() != next[0].GetSeq() {
		t.Fatalf("resumed after seq %d: %d events from seq %d; the next run has %d from seq %d", seen, len(got), got[0].GetSeq(), len(next), next[0].GetSeq())
	}
	follows(t, "replay", replayAll(t, a.base, "t-unseen", 2))
}
