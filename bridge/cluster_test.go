package bridge_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// natsServer starts a standalone JetStream nats-server on loopback.
func natsServer(t testing.TB) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
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
	return ns
}

func clusterConfig(url string, host ...string) *bridge.Config {
	c := bridge.DefaultConfig()
	c.NATS.URL = url
	c.NATS.Heartbeat = 50 * time.Millisecond
	c.HostBackends = host
	return &c
}

var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// strip removes what differs between two runs of the same request.
func strip(evs []*canonical.Event) []string {
	var out []string
	for _, ev := range evs {
		ev.TimeUnixNano, ev.RunId, ev.ThreadId = 0, "", ""
		if ms := ev.GetMessageStart(); ms != nil {
			ms.MessageId = ""
		}
		b, _ := protojson.Marshal(ev)
		out = append(out, string(b))
	}
	return out
}

// Client on A, backend only on B: the stream arrives complete and in
// order, identical to running on B directly.
func TestRunPlacedOnHostingInstance(t *testing.T) {
	ns := natsServer(t)
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL(), "none"))
	body := `{"target":"demo-agent","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`
	direct, code := bridgetest.PostRun(t, b.URL, body)
	if code != 200 {
		t.Fatalf("direct: %d", code)
	}
	viaA, code := bridgetest.PostRun(t, a.URL, body)
	if code != 200 {
		t.Fatalf("via A: %d", code)
	}
	if err := canonical.Validate(viaA); err != nil {
		t.Fatal(err)
	}
	for i, ev := range viaA {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.GetSeq())
		}
	}
	if a.Bridge().Running() != 0 {
		t.Fatal("A ran the run itself")
	}
	d, v := strip(direct), strip(viaA)
	if strings.Join(d, "\n") != strings.Join(v, "\n") {
		t.Fatalf("via A differs from direct:\n%s\n---\n%s", strings.Join(v, "\n"), strings.Join(d, "\n"))
	}
	// No instance hosts the backend any more: unavailable, before any event.
	b.Bridge().StopAccepting()
	if _, code := bridgetest.PostRun(t, a.URL, body); code != http.StatusServiceUnavailable {
		t.Fatalf("no host: status %d, want 503", code)
	}
}

// A client that leaves cancels the run at its owner.
func TestRemoteCancel(t *testing.T) {
	ns := natsServer(t)
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL(), "none"))
	ctx, cancel := context.WithCancel(context.Background())
	hang := &canonical.Request{Target: "echo", Parameters: map[string]*structpb.Value{"hang": canonical.Value(true)}}
	s2, err := a.Bridge().Run(ctx, hang)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := s2.Recv(); err != nil || ev.GetLifecycle().GetStatus() != canonical.StatusRunning {
		t.Fatalf("first event %v %v", ev, err)
	}
	waitFor(t, func() bool { return b.Bridge().Running() == 1 })
	cancel()
	rest, _ := canonical.Collect(s2)
	if st, _ := canonical.TerminalOf(rest[len(rest)-1]); st != canonical.StatusCancelled {
		t.Fatalf("client sees %v", rest[len(rest)-1])
	}
	waitFor(t, func() bool { return b.Bridge().Running() == 0 })
}

// An observer on any instance gets a thread's events from the replay log:
// after since, then live.
func TestObserveReplaysAfterSince(t *testing.T) {
	ns := natsServer(t)
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL(), "none"))
	body := `{"target":"stream","threadId":"obs","parameters":{"deltas":50},"inputs":[]}`
	first, _ := bridgetest.PostRun(t, b.URL, body)
	total := len(first)
	o, err := a.Bridge().Observe(context.Background(), "obs", 20)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for want := uint64(21); want <= uint64(total); want++ {
		ev, err := o.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetSeq() != want {
			t.Fatalf("got seq %d, want %d", ev.GetSeq(), want)
		}
	}
	// A second run on the thread, started on A and placed on B: the
	// observer sees it live, its seq continuing the thread's.
	second, _ := bridgetest.PostRun(t, a.URL, body)
	if second[0].GetSeq() != uint64(total+1) {
		t.Fatalf("second run starts at seq %d, want %d", second[0].GetSeq(), total+1)
	}
	for i := range second {
		ev, err := o.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetSeq() != uint64(total+1+i) {
			t.Fatalf("live event %d has seq %d", i, ev.GetSeq())
		}
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A thread's seq continues on whichever instance runs it next: B, which
// never ran the thread, reads the last seq from the replay log (a direct
// get of the thread's last message, whatever its run).
func TestThreadSeqContinuesOnOtherInstance(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	body := `{"target":"echo","threadId":"t-cont","inputs":[{"name":"prompt","node":{"data":"b25lIHR3byB0aHJlZQ=="}}]}`
	first, code := bridgetest.PostRun(t, a.URL, body)
	if code != 200 {
		t.Fatalf("on A: %d", code)
	}
	last := first[len(first)-1].GetSeq()
	if last != uint64(len(first)) {
		t.Fatalf("on A: last seq %d of %d events", last, len(first))
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, err := js.Stream(context.Background(), bridge.EventsStream)
		if err == nil {
			if m, err := st.GetLastMsgForSubject(context.Background(), "interlingua.events.t-cont.*"); err == nil {
				if evs, err := bridge.DecodeEvents(m.Data); err == nil && evs[len(evs)-1].GetSeq() == last {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the replay log did not store A's run")
		}
	}
	second, code := bridgetest.PostRun(t, b.URL, body)
	if code != 200 {
		t.Fatalf("on B: %d", code)
	}
	for i, ev := range second {
		if want := last + uint64(i) + 1; ev.GetSeq() != want {
			t.Fatalf("on B, event %d has seq %d, want %d", i, ev.GetSeq(), want)
		}
	}
	// The runs let go of the bridges once their ends are written.
	waitFor(t, func() bool { return b.Bridge().Running() == 0 && a.Bridge().Running() == 0 })
}
