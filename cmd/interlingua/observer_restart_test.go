package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// nats-server restarts while an observer follows a run live from the
// replay log: the observer gets the thread's events with consecutive
// seqs, each once, to the run's end, or its stream ends early; a resume
// from the last seq it got then gives the rest, each once, to the end. No
// event is passed over in silence.
func TestObserverThroughNATSRestart(t *testing.T) {
	bin := buildBinary(t)
	n := bridgetest.StartNATSProcess(t)
	d := startDaemon(t, bin, n.URL())
	const thread = "t-observer-restart"
	r := openStream(t, "POST", d.base+"/v1/runs", `{"target":"stream","threadId":"`+thread+`","parameters":{"deltas":300,"delay_ms":10},"inputs":[]}`)
	if _, ok := r.next(); !ok {
		t.Fatal("no first event")
	}
	obs := openStream(t, "GET", d.base+"/v1/threads/"+thread+"/events?since=0", "")
	var last uint64
	read := func(s *eventReader, until int) (ended bool) {
		for i := 0; until < 0 || i < until; i++ {
			ev, ok := s.next()
			if !ok {
				return false
			}
			if ev.GetSeq() != last+1 {
				t.Fatalf("observer got seq %d after %d", ev.GetSeq(), last)
			}
			last = ev.GetSeq()
			if _, end := canonical.TerminalOf(ev); end {
				return true
			}
		}
		return false
	}
	read(obs, 20)
	n.Kill()
	time.Sleep(300 * time.Millisecond)
	n.Start(t)
	ended := read(obs, -1)
	evs := r.untilTerminal()
	want := evs[len(evs)-1].GetSeq()
	if !ended {
		t.Logf("the observer's stream ended at seq %d; resuming", last)
		waitStatus(t, d.base+"/readyz", 200)
		resumed := openStream(t, "GET", fmt.Sprintf("%s/v1/threads/%s/events?since=%d", d.base, thread, last), "")
		if !read(resumed, -1) {
			t.Fatalf("the resumed observer's stream ended at seq %d without the run's end", last)
		}
	}
	if last != want {
		t.Fatalf("the observer ended at seq %d, the run's client at %d", last, want)
	}
}

// An observer replaying from the start a thread longer than the events an
// instance keeps for its observers reads the rest from the replay log;
// nats-server killed while it does and back a second later, it reads on
// once the log answers again and gets every event, in order, to the end.
func TestObserverCatchUpThroughNATSRestart(t *testing.T) {
	bin := buildBinary(t)
	n := bridgetest.StartNATSProcess(t)
	d := startDaemon(t, bin, n.URL())
	const thread = "t-catch-up-restart"
	r := openStream(t, "POST", d.base+"/v1/runs", `{"target":"stream","threadId":"`+thread+`","parameters":{"deltas":9000},"inputs":[]}`)
	evs := r.untilTerminal()
	want := evs[len(evs)-1].GetSeq()
	obs := openStream(t, "GET", d.base+"/v1/threads/"+thread+"/events?since=0", "")
	// The daemon's handler reads on while nats-server is away: its
	// catch-up reads fail until it is back.
	n.Kill()
	time.Sleep(time.Second)
	n.Start(t)
	var last uint64
	for last != want {
		ev, ok := obs.next()
		if !ok {
			t.Fatalf("the observer's stream ended at seq %d of %d", last, want)
		}
		if ev.GetSeq() != last+1 {
			t.Fatalf("observer got seq %d after %d", ev.GetSeq(), last)
		}
		last = ev.GetSeq()
	}
}
