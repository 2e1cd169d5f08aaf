package bridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestSeqOutlivesTheReplayLog: a thread's seqs are never given twice, not
// even once the replay log has let go of the thread's events (they age out
// after replay_max_age, an hour by default, or are discarded past
// replay_max_bytes) and no instance remembers the thread: the next run
// numbers on from the thread's last seq, not from 1. Here instance a runs
// the thread twice; its events are then purged from the log, as aging
// would, and its lease entry (which carries the last seq for a while)
// expires; instance b, which never saw the thread, runs it next.
func TestSeqOutlivesTheReplayLog(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	body := `{"target":"stream","threadId":"aged thread","parameters":{"deltas":2},"inputs":[]}`
	var last uint64
	for range 2 {
		evs, code := bridgetest.PostRun(t, a.URL, body)
		if code != 200 || len(evs) == 0 {
			t.Fatalf("run on a: status %d, %d events", code, len(evs))
		}
		if first := evs[0].GetSeq(); first != last+1 {
			t.Fatalf("run on a starts at seq %d, want %d", first, last+1)
		}
		last = evs[len(evs)-1].GetSeq()
	}
	a.WaitNoRuns(t)

	js, stream := replayStream(t, ns.ClientURL())
	ctx := t.Context()
	leases, err := js.KeyValue(ctx, bridge.LeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	threads, err := js.KeyValue(ctx, bridge.ThreadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	// Once the log holds the thread's last event and the lease is free
	// (a's run has ended, its events are stored), the log lets go of them
	// all and the lease entry expires.
	subjects := "interlingua.events." + "~YWdlZCB0aHJlYWQ" + ".>" // subject.Token("aged thread")
	// Wait for the log's last event of the thread, and a free lease.
	waitFor(t, func() bool {
		m, err := stream.GetLastMsgForSubject(ctx, subjects)
		if err != nil || m.Header.Get("Interlingua-Last-Seq") != strconv.FormatUint(last, 10) {
			return false
		}
		e, err := leases.Get(ctx, "=YWdlZCB0aHJlYWQ") // subject.Key("aged thread")
		var v struct{ Holder string }
		return err == nil && json.Unmarshal(e.Value(), &v) == nil && v.Holder == ""
	})
	// a wrote the thread's last seq where it outlives the log, off the
	// run's path (seqfloor.go): the log lets go of events an hour later,
	// not at once as here.
	waitFor(t, func() bool {
		e, err := threads.Get(ctx, "seq.=YWdlZCB0aHJlYWQ")
		return err == nil && string(e.Value()) == strconv.FormatUint(last, 10)
	})
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subjects)); err != nil {
		t.Fatal(err)
	}
	if err := leases.Purge(ctx, "=YWdlZCB0aHJlYWQ"); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetLastMsgForSubject(ctx, subjects); err == nil {
		t.Fatal("the thread's events are still in the log")
	}

	// A replay after a seq the log no longer reaches is refused at once,
	// naming the events gone; one after the thread's last waits for more.
	for since, want := range map[uint64]string{
		1:    `{"code":"out_of_range","message":"the replay log no longer holds the thread's events 2 to ` + strconv.FormatUint(last, 10) + ` (nats.replay_max_age, nats.replay_max_bytes), nor any later"}` + "\n",
		last: "",
	} {
		status, got := observeHead(t, b.URL, "aged%20thread", since)
		if wantStatus := map[bool]int{true: 400, false: 200}[want != ""]; status != wantStatus || got != want {
			t.Fatalf("replay after %d: %d %q, want %d %q", since, status, got, wantStatus, want)
		}
	}

	evs, code := bridgetest.PostRun(t, b.URL, body)
	if code != 200 || len(evs) == 0 {
		t.Fatalf("run on b: status %d, %d events", code, len(evs))
	}
	if first := evs[0].GetSeq(); first != last+1 {
		t.Fatalf("run on b, the log emptied of the thread, starts at seq %d; the thread's seqs reached %d", first, last)
	}
}

// replayStream connects to the NATS server at url, for a test's look at
// the instances' JetStream assets, and returns its JetStream and the
// replay stream.
func replayStream(t *testing.T, url string) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(t.Context(), bridge.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	return js, stream
}

// observeHead opens a native replay of thread after since on base and
// returns its status and, for a refusal, its body (a stream's is left
// unread: it waits for events).
func observeHead(t *testing.T, base, thread string, since uint64) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/threads/"+thread+"/events?since="+strconv.FormatUint(since, 10), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		return 200, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
