package bridge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// Property: a run cancelled at any point — before its first event, between
// deltas, as it ends — on its own instance or placed on another, ends
// exactly once, cancelled or completed (never failed), and the thread's
// replay log holds every event every client saw, seqs 1, 2, 3 … with no
// hole, no repeat and one terminal event per run.
func TestCancelAtAnyPointKeepsTheLog(t *testing.T) {
	ns := natsServer(t)
	host := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	client := bridgetest.Start(t, clusterConfig(ns.ClientURL(), "none"))
	rng := rand.New(rand.NewPCG(1, 2))
	const thread, runs = "cancel-prop", 40
	// An observer on the client's instance follows the thread live from
	// before its first run: it sees what the log holds, as it is written.
	live, err := client.Bridge().Observe(context.Background(), thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var seen []*canonical.Event
	for i := range runs {
		at := host
		if i%2 == 1 {
			at = client
		}
		seen = append(seen, cancelledRun(t, at, thread, fmt.Sprintf("run-%d", i), time.Duration(rng.IntN(3000))*time.Microsecond)...)
	}
	replay, err := host.Bridge().Observe(context.Background(), thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	for name, o := range map[string]canonical.Stream{"the replay": replay, "the live observer": live} {
		ends := map[string]int{}
		for want := uint64(1); want <= uint64(len(seen)); want++ {
			ev, err := o.Recv()
			if err != nil {
				t.Fatalf("%s ended before seq %d: %v", name, want, err)
			}
			if !proto.Equal(ev, seen[want-1]) {
				t.Fatalf("%s's seq %d is %v; a client saw %v", name, want, ev, seen[want-1])
			}
			if _, ok := canonical.TerminalOf(ev); ok {
				ends[ev.GetRunId()]++
			}
		}
		for i := range runs {
			if n := ends[fmt.Sprintf("run-%d", i)]; n != 1 {
				t.Fatalf("%s: run-%d has %d terminal events", name, i, n)
			}
		}
	}
}

// cancelledRun runs a paced stream on thread at inst, cancels it after
// wait, and returns the events its client saw, checking they continue the
// thread's seqs and end once.
func cancelledRun(t *testing.T, inst *bridgetest.Instance, thread, id string, wait time.Duration) []*canonical.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &canonical.Request{Target: "stream", ThreadId: thread, RunId: id, Parameters: map[string]*structpb.Value{
		"deltas": structpb.NewNumberValue(5), "delay_ms": structpb.NewNumberValue(1)}}
	s, err := inst.Bridge().Run(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(wait, cancel)
	evs, err := canonical.Collect(s)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	if err := canonical.Validate(evs); err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	if st, _ := canonical.TerminalOf(evs[len(evs)-1]); st == canonical.StatusFailed {
		t.Fatalf("%s ended %v", id, evs[len(evs)-1])
	}
	return evs
}
