package main

import (
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
)

// The owner of a run is paused (SIGSTOP) past nats.owner_timeout and
// resumed: its client's instance has ended the run in the replay log, and
// the owner, back, writes nothing more of the thread (its writes expect
// the log's last message to be its own). The log holds one history: the
// client's end once (after the seqs the owner took, which it says it
// skips), and the thread's next run numbered right after it, no seq twice
// and none missing, readable to the end by a replay.
func TestClusterPausedOwnerWritesNoSecondHistory(t *testing.T) {
	_, _, a, b := clientAndOwner(t, "--set", "nats.heartbeat=500ms")
	r := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-pause","parameters":{"deltas":400,"delay_ms":20},"inputs":[]}`)
	if _, ok := r.next(); !ok {
		t.Fatal("no first event")
	}
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	end := r.untilTerminal()
	last := end[len(end)-1]
	if lc := last.GetLifecycle(); lc.GetStatus() != canonical.StatusFailed || canonical.Code(lc.GetError().GetCode()) != canonical.CodeUnavailable {
		t.Fatalf("the client's run ended %v, want failed/unavailable", last)
	}
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the owner, back, goes on with what it held
	next := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-pause","parameters":{"deltas":3},"inputs":[]}`).untilTerminal()
	if st, _ := canonical.TerminalOf(next[len(next)-1]); st != canonical.StatusCompleted {
		t.Fatalf("the thread's next run ended %v", next[len(next)-1])
	}
	all := replayAll(t, a.base, "t-pause", 2)
	ends := 0
	for i, ev := range all {
		if i > 0 && !canonical.Follows(ev, all[i-1].GetSeq()) {
			t.Fatalf("replay: seq %d after %d", ev.GetSeq(), all[i-1].GetSeq())
		}
		if _, ok := canonical.TerminalOf(ev); ok {
			ends++
		}
		if ev.GetSeq() == last.GetSeq() && (ev.GetRunId() != last.GetRunId() || ev.GetLifecycle().GetStatus() != canonical.StatusFailed) {
			t.Fatalf("the log's seq %d is %v, the client's end %v", ev.GetSeq(), ev, last)
		}
	}
	if ends != 2 || all[len(all)-1].GetRunId() != next[0].GetRunId() {
		t.Fatalf("replay has %d ends, last of run %s: want the two runs' one end each", ends, all[len(all)-1].GetRunId())
	}
}

// The owner of a run is its client's instance too, and is paused past the
// timeout while another instance observes the thread: the observers' end
// of the run is appended to the replay log, so the owner, back, is fenced
// (its run ends failed, never completed) and the log holds the end the
// observer saw, under the seq it saw it, followed by the thread's next
// runs, one placed from another instance and one started on the owner.
// No seq the owner's own client read, before the fence or after, is
// another event's in the log.
func TestClusterPausedOwnerObserverEndIsTheLogs(t *testing.T) {
	_, _, a, b := clientAndOwner(t, "--set", "nats.heartbeat=500ms")
	r := openStream(t, "POST", b.base+"/v1/runs", `{"target":"stream","threadId":"t-quiet","parameters":{"deltas":400,"delay_ms":20},"inputs":[]}`)
	var read []*canonical.Event
	for range 30 { // the observer comes after the run's message and block started
		ev, ok := r.next()
		if !ok {
			t.Fatal("the run's stream ended early")
		}
		read = append(read, ev)
	}
	obs := openStream(t, "GET", a.base+"/v1/threads/t-quiet/events", "")
	if _, ok := obs.next(); !ok {
		t.Fatal("the observer saw nothing")
	}
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	seen := obs.untilTerminal()
	end := seen[len(seen)-1]
	if lc := end.GetLifecycle(); lc.GetStatus() != canonical.StatusFailed || canonical.Code(lc.GetError().GetCode()) != canonical.CodeUnavailable {
		t.Fatalf("the observer's run ended %v, want failed/unavailable", end)
	}
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	own := r.untilTerminal()
	if lc := own[len(own)-1].GetLifecycle(); lc.GetStatus() != canonical.StatusFailed {
		t.Fatalf("the owner's client's run ended %v after the log ended it, want failed", own[len(own)-1])
	}
	read = append(read, own...)
	next := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-quiet","parameters":{"deltas":3},"inputs":[]}`).untilTerminal()
	if st, _ := canonical.TerminalOf(next[len(next)-1]); st != canonical.StatusCompleted {
		t.Fatalf("the thread's next run ended %v", next[len(next)-1])
	}
	onOwner := openStream(t, "POST", b.base+"/v1/runs", `{"target":"stream","threadId":"t-quiet","parameters":{"deltas":3},"inputs":[]}`).untilTerminal()
	all := replayAll(t, a.base, "t-quiet", 3)
	logged := map[uint64]*canonical.Event{}
	for _, ev := range all {
		logged[ev.GetSeq()] = ev
	}
	for _, ev := range read {
		if l, ok := logged[ev.GetSeq()]; ok && !proto.Equal(l, ev) {
			t.Fatalf("the owner's client read seq %d as %v; the log has %v", ev.GetSeq(), ev, l)
		}
	}
	if first := onOwner[0].GetSeq(); first <= own[len(own)-1].GetSeq() {
		t.Fatalf("the run started on the owner after the fence numbers from %d, not past the %d its client read", first, own[len(own)-1].GetSeq())
	}
	var paused []*canonical.Event
	for i, ev := range all {
		if ev.GetRunId() == end.GetRunId() {
			paused = append(paused, ev)
		}
		if i > 0 && !canonical.Follows(ev, all[i-1].GetSeq()) {
			t.Fatalf("replay: seq %d after %d", ev.GetSeq(), all[i-1].GetSeq())
		}
		if ev.GetSeq() == end.GetSeq() && (ev.GetRunId() != end.GetRunId() || ev.GetLifecycle().GetStatus() != canonical.StatusFailed) {
			t.Fatalf("the log's seq %d is %v, the observer's end %v", ev.GetSeq(), ev, end)
		}
	}
	if err := canonical.Validate(paused); err != nil {
		t.Fatalf("the paused run as the log ends it: %v", err)
	}
	if got := all[len(all)-1].GetRunId(); got != onOwner[0].GetRunId() {
		t.Fatalf("the replay's third end is run %s's, want the run started on the owner %s", got, onOwner[0].GetRunId())
	}
}
