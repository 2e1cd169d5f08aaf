package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// The owner of a run is paused (SIGSTOP) past nats.owner_timeout and
// resumed: its client's instance has ended the run in the replay log, and
// the owner, back, writes nothing more of the thread (its writes expect
// the log's last message to be its own). The log holds one history: the
// client's end once, and the thread's next run numbered right after it,
// no seq twice and none missing, readable to the end by a replay.
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
		if i > 0 && ev.GetSeq() != all[i-1].GetSeq()+1 {
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
