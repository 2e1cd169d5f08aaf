package bridge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// An event larger than the NATS server carries (max_payload) cannot reach
// the replay log or another instance: the run fails resource_exhausted in
// its place, with the thread's seqs consecutive and a replay on another
// instance equal to what the client saw (no hole where the event would
// have been). (A client on another instance cannot be tested so: the
// request that asks for the event is as large, and NATS refuses it first.)
func TestEventTooLargeForNATS(t *testing.T) {
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, MaxPayload: 64 << 10,
		StoreDir: filepath.Join(t.TempDir(), "js"), NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	owner := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	client := bridgetest.Start(t, clusterConfig(ns.ClientURL(), "none"))
	for _, at := range []*bridgetest.Instance{owner} {
		thread := "big-" + strings.TrimPrefix(at.URL, "http://")
		body := fmt.Sprintf(`{"target":"stream","threadId":%q,"parameters":{"deltas":3,"delta_text":%q},"inputs":[]}`,
			thread, strings.Repeat("x", 100<<10))
		evs, code := bridgetest.PostRun(t, at.URL, body)
		if code != 200 || len(evs) == 0 {
			t.Fatalf("%s: status %d, %d events", at.URL, code, len(evs))
		}
		last := evs[len(evs)-1]
		st, _ := canonical.TerminalOf(last)
		if e := last.GetLifecycle().GetError(); st != canonical.StatusFailed || e.GetCode() != uint32(canonical.CodeResourceExhausted) ||
			!strings.Contains(e.GetMessage(), "max_payload") {
			t.Fatalf("%s: run ended %v", at.URL, last)
		}
		for i, ev := range evs {
			if ev.GetSeq() != uint64(i+1) {
				t.Fatalf("%s: event %d has seq %d", at.URL, i, ev.GetSeq())
			}
			if d := ev.GetBlockDelta(); d != nil {
				t.Fatalf("%s: a delta of %d bytes was delivered", at.URL, len(d.GetText()))
			}
		}
		o, err := client.Bridge().Observe(context.Background(), thread, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			ev, err := o.Recv()
			if err != nil {
				t.Fatal(err)
			}
			ev.TimeUnixNano, evs[i].TimeUnixNano = 0, 0
			if !proto.Equal(ev, evs[i]) {
				t.Fatalf("%s: replay event %d is %v, the client saw %v", at.URL, i, ev, evs[i])
			}
		}
		o.Close()
	}
}

// A run on a thread whose last seq cannot be read from NATS (NATS is down)
// does not number its events from what this instance last saw: another
// instance may have run the thread since, and its seqs would be reused.
// It is refused unavailable before it starts (its thread's lease cannot
// be taken), or, when this instance still holds the lease (its free waits
// for the replay log), ends failed unavailable, its end its client's
// alone, with no delta delivered.
func TestRunFailsWhenThreadSeqUnknown(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	body := `{"target":"stream","threadId":"known","parameters":{"deltas":2},"inputs":[]}`
	if evs, code := bridgetest.PostRun(t, a.URL, body); code != 200 || len(evs) == 0 {
		t.Fatalf("first run: status %d, %d events", code, len(evs))
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	evs, code := bridgetest.PostRun(t, a.URL, body)
	switch {
	case code == 503:
	case code == 200 && len(evs) > 0:
		last := evs[len(evs)-1]
		st, _ := canonical.TerminalOf(last)
		if e := last.GetLifecycle().GetError(); st != canonical.StatusFailed || e.GetCode() != uint32(canonical.CodeUnavailable) ||
			!strings.Contains(e.GetMessage(), "last seq") {
			t.Fatalf("second run ended %v", last)
		}
		for _, ev := range evs {
			if ev.GetBlockDelta() != nil {
				t.Fatalf("a delta was delivered under a guessed seq: %v", ev)
			}
		}
	default:
		t.Fatalf("second run: status %d, %d events", code, len(evs))
	}
}

// A run of a known thread cancelled before the replay log has answered
// for the thread's last seq still reads it and ends cancelled, numbered
// after the thread's last event: the cancellation is the client's, not a
// reason to fail the run unavailable (it did, when the log request shared
// the run's context).
func TestCancelBeforeSeqRecovered(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	body := `{"target":"stream","threadId":"known","parameters":{"deltas":2},"inputs":[]}`
	first, code := bridgetest.PostRun(t, a.URL, body)
	if code != 200 || len(first) == 0 {
		t.Fatalf("first run: status %d, %d events", code, len(first))
	}
	last := first[len(first)-1].GetSeq()
	for i := range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		r := &canonical.Request{Target: "stream", ThreadId: "known", RunId: fmt.Sprintf("cancelled-%d", i),
			Parameters: map[string]*structpb.Value{"hang": structpb.NewBoolValue(true)}}
		s, err := a.Bridge().Run(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		evs, _ := canonical.Collect(s)
		end := evs[len(evs)-1]
		if st, _ := canonical.TerminalOf(end); st != canonical.StatusCancelled {
			t.Fatalf("run %d ended %v", i, end)
		}
		for _, ev := range evs {
			if last++; ev.GetSeq() != last {
				t.Fatalf("run %d: event %v, want seq %d", i, ev, last)
			}
		}
	}
}
