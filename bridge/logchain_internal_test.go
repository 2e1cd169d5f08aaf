package bridge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/canonical"
)

// chainWriter writes events of run r1 of thread th through f's
// acknowledged log on chain c, as a run's publisher does.
func chainWriter(t *testing.T, f *Fabric, c *logChain) func(seq uint64) {
	return func(seq uint64) {
		ev := &canonical.Event{ThreadId: "th", RunId: "r1", Seq: seq,
			Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "x"}}}
		data, _, err := appendBatchElem(nil, batchEventsField, ev)
		if err != nil {
			t.Fatal(err)
		}
		f.acked.add("th", f.EventSubject("th", "r1"), c, seq, seq, data, 1, 1<<16)
		f.pubq.signal()
	}
}

// waitStored waits until f's acknowledged log holds nothing.
func waitStored(t *testing.T, f *Fabric) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !f.acked.empty(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replay log did not acknowledge within 10 s")
		}
	}
}

// logSeqs lists the thread's events in the log as seq and kind.
func logSeqs(t *testing.T, f *Fabric) []string {
	t.Helper()
	evs, err := f.threadEventsBetween(context.Background(), "th", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		kind := "delta"
		if _, ok := canonical.TerminalOf(ev); ok {
			kind = "end"
		}
		out = append(out, string(rune('0'+ev.GetSeq()))+kind)
	}
	return out
}

// An instance whose run another ended in the log (taken for gone while
// paused or cut off) writes nothing more of the thread: its next message
// is refused, the thread is fenced, its runs here end, and the log holds
// one history.
func TestLogChainFencesAnotherWriter(t *testing.T) {
	f := testFabric(t)
	fenced := make(chan struct{}, 1)
	c := &logChain{onFence: func() { fenced <- struct{}{} }}
	write := chainWriter(t, f, c)
	write(1)
	waitStored(t, f)
	if c.last.Load() == 0 {
		t.Fatal("the chain did not learn its message's log sequence")
	}
	_, err := f.AppendEnd(context.Background(), "th", "r1", func(last uint64) []*canonical.Event {
		end := canonical.Terminal(canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "owner gone"))
		end.ThreadId, end.RunId, end.Seq = "th", "r1", last+1
		return []*canonical.Event{end}
	})
	if err != nil {
		t.Fatal(err)
	}
	write(2) // the owner, back, goes on
	select {
	case <-fenced:
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's write after another's end was not fenced")
	}
	waitStored(t, f)
	write(3) // nothing more of the fenced thread is sent
	waitStored(t, f)
	if got := logSeqs(t, f); len(got) != 2 || got[0] != "1delta" || got[1] != "2end" {
		t.Fatalf("log %v, want [1delta 2end]", got)
	}
}

// A message whose earlier send was stored but not acknowledged (the
// server checks the expectation before it finds the duplicate) is taken
// for stored, not for another's write.
func TestLogChainOwnResendIsNotFenced(t *testing.T) {
	f := testFabric(t)
	c := &logChain{onFence: func() { t.Error("fenced by its own earlier send") }}
	write := chainWriter(t, f, c)
	write(1)
	waitStored(t, f)
	// The send of 2 that the log stored and whose acknowledgement was lost.
	ev := &canonical.Event{ThreadId: "th", RunId: "r1", Seq: 2,
		Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "x"}}}
	data, _, _ := appendBatchElem(nil, batchEventsField, ev)
	subj := f.EventSubject("th", "r1")
	m := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
	m.Header.Set(jetstream.MsgIDHeader, subj+"#2")
	if _, err := f.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	write(2) // the resend, expecting the log to end at 1
	waitStored(t, f)
	write(3)
	waitStored(t, f)
	if got := logSeqs(t, f); len(got) != 3 || got[0] != "1delta" || got[1] != "2delta" || got[2] != "3delta" {
		t.Fatalf("log %v, want [1delta 2delta 3delta]", got)
	}
}

// An end appended for a run the thread's next run has followed in the log
// (an ender that came late: its run's lease had expired and another
// instance took the thread) is refused, so no run ends twice and none ends
// after a later run's events. A run with no event in the log yet is ended
// after the last run's events, as before.
func TestAppendEndRefusesARunAnotherFollowed(t *testing.T) {
	f := testFabric(t)
	put := func(run string, seq uint64, end bool) {
		ev := &canonical.Event{ThreadId: "th", RunId: run, Seq: seq,
			Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "x"}}}
		if end {
			ev = canonical.Terminal(canonical.StatusCompleted, nil)
			ev.ThreadId, ev.RunId, ev.Seq = "th", run, seq
		}
		data, _, _ := appendBatchElem(nil, batchEventsField, ev)
		if _, err := f.js.Publish(context.Background(), f.EventSubject("th", run), data); err != nil {
			t.Fatal(err)
		}
	}
	failed := func(run string) func(uint64) []*canonical.Event {
		return func(last uint64) []*canonical.Event {
			end := canonical.Terminal(canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "owner gone"))
			end.ThreadId, end.RunId, end.Seq = "th", run, last+1
			return []*canonical.Event{end}
		}
	}
	put("r1", 1, false) // r1's owner stored one event and went quiet
	put("r1", 2, true)  // an ender appended r1's end
	put("r2", 3, false) // the thread's next run began
	if _, err := f.AppendEnd(context.Background(), "th", "r1", failed("r1")); !errors.Is(err, errRunEnded) {
		t.Fatalf("a second end of r1 after r2's event: err %v, want errRunEnded", err)
	}
	if _, err := f.AppendEnd(context.Background(), "th", "r3", failed("r3")); err != nil {
		t.Fatalf("r3, with no event in the log: %v", err)
	}
	if got := logSeqs(t, f); len(got) != 4 || got[1] != "2end" || got[2] != "3delta" || got[3] != "4end" {
		t.Fatalf("log %v, want [1delta 2end 3delta 4end]", got)
	}
}
