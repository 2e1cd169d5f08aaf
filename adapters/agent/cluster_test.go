package agent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/interlingua-dev/interlingua/adapters/agent"
)

// instance is one agent frontend of a cluster and its NATS connection.
type instance struct {
	*server
	nc *nats.Conn
}

// newCluster starts n agent frontends that share one NATS server: the
// thread store and the agent subjects, each with its own runner.
func newCluster(t *testing.T, n int) []instance { return newClusterOf(t, n, agent.Config{}) }

// newClusterOf is newCluster with each frontend configured as cfg.
func newClusterOf(t *testing.T, n int, cfg agent.Config) []instance {
	kv, connect := startFabric(t)
	var out []instance
	for range n {
		nc := connect()
		cfg.Store, cfg.Cluster = kv, &agent.Cluster{Conn: nc}
		out = append(out, instance{newServer(t, cfg), nc})
	}
	return out
}

// frames reads n runs' worth of frames: every frame, byte for byte, up to
// the n-th root terminal event.
func frames(t *testing.T, st *stream, runs int) []string {
	t.Helper()
	var out []string
	for runs > 0 {
		e := st.next(false)
		out = append(out, e.ID+" "+e.Event+" "+string(e.Data))
		var env envelope
		if err := json.Unmarshal(e.Data, &env); err != nil {
			t.Fatal(err)
		}
		if env.rootTerminal() {
			runs--
		}
	}
	return out
}

// TestClusterSubscriberOnOtherInstance: a subscriber on instance B of a
// thread whose run is on instance A receives the run live, fed from NATS:
// the same frames, byte for byte, with the seqs A gave them, as a
// subscriber on A.
func TestClusterSubscriberOnOtherInstance(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c[0], c[1]
	filter := `{"channels":["lifecycle","messages","values","tools","checkpoints"]}`
	onB := b.openSSE(t, "shared-live", filter, nil)
	if err := b.nc.Flush(); err != nil { // B's mirror subscription is in place
		t.Fatal(err)
	}
	onA := a.openSSE(t, "shared-live", filter, nil)
	a.runStart(t, "shared-live", "demo-agent", user("What is 6 * 7?"), nil)
	want := frames(t, onA, 1)
	got := frames(t, onB, 1)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("subscriber on B:\n%s\nsubscriber on A:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(want) < 10 || !strings.Contains(want[len(want)-1], `"completed"`) {
		t.Fatalf("the run on A: %d frames, last %s", len(want), want[len(want)-1])
	}
	// A run started on B (forwarded to A, which still takes the idle
	// thread's commands) reaches both subscribers the same way, numbered
	// after the first run's events.
	b.runStart(t, "shared-live", "demo-agent", user("and again"), nil)
	want = frames(t, onB, 1)
	got = frames(t, onA, 1)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("subscriber on A:\n%s\nsubscriber on B:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestClusterCommandsReachTheRunOwner: commands sent to B for a run live on
// A (agent.getTree, run.start queueing behind it, the REST cancel) are
// executed by A; B's subscriber sees their effect with A's seqs.
func TestClusterCommandsReachTheRunOwner(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c[0], c[1]
	onB := b.openSSE(t, "owned", `{"channels":["lifecycle"]}`, nil)
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	first, _ := a.runStart(t, "owned", "stream", user("go"), map[string]any{"hang": true, "deltas": 1})
	if e := onB.envelope(); e.status() != "running" {
		t.Fatalf("B sees %+v", e)
	}
	tree := b.command(t, "owned", 7, "agent.getTree", map[string]any{})
	if tree["type"] != "success" || !strings.Contains(mustJSON(tree["result"]), `"running"`) {
		t.Fatalf("agent.getTree on B: %v", tree)
	}
	res := b.command(t, "owned", 8, "run.start", map[string]any{"assistant_id": "stream", "input": user("x"), "multitask_strategy": "reject"})
	if res["error"] != "invalid_argument" || !strings.Contains(res["message"].(string), "active run") {
		t.Fatalf("reject on B while A runs: %v", res)
	}
	queued, _ := b.runStart(t, "owned", "stream", user("queued"), map[string]any{"deltas": 1})
	resp, err := http.Post(b.URL+"/threads/owned/runs/"+first+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("cancel on B: %v %v", resp, err)
	}
	resp.Body.Close()
	end := onB.untilTerminal()
	if st := end[len(end)-1]; st.status() != "failed" || !bytes.Contains(st.Params.Data, []byte("cancelled: ")) {
		t.Fatalf("the cancelled run ends on B with %s", st.Params.Data)
	}
	if e := onB.envelope(); e.status() != "running" {
		t.Fatalf("queued run %s did not start: %+v", queued, e)
	}
	if e := onB.untilTerminal(); e[len(e)-1].status() != "completed" {
		t.Fatalf("queued run: %v", e[len(e)-1].status())
	}
	resp, err = http.Post(b.URL+"/threads/owned/runs/run-nope/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != 404 {
		t.Fatalf("cancel of an unknown run: %v %v", resp, err)
	}
	resp.Body.Close()
	// Once A is idle, state read on B is A's (A still takes the thread's
	// commands).
	st := b.command(t, "owned", 9, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
	if !strings.Contains(mustJSON(st["result"]), "queued") {
		t.Fatalf("state.get on B: %v", st)
	}
}

// TestClusterOwnerKeepsTheThreadAfterItsRuns: the instance that ran a
// thread's run keeps taking its commands while the thread is in its
// memory. A run started on B then runs on A, whose state holds both runs
// without reading the record back; B follows it by mirror (the record B
// read meanwhile, which A's saves of that run may already be past, is not
// merged: it restarted B's buffer past the run's events, and the run's end
// never reached B's client). Once A shuts down it takes none (no
// responders), and B runs the next run itself on the state A saved.
func TestClusterOwnerKeepsTheThreadAfterItsRuns(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c[0], c[1]
	const subject = "interlingua.agent.cmd.sticky"
	probe := []byte(`{"id":1,"method":"state.get","params":{"namespace":[],"keys":["messages"]}}`)
	a.runToEnd(t, "sticky", "stream", user("first turn"), map[string]any{"deltas": 1})
	if _, err := b.nc.Request(subject, probe, wait); err != nil {
		t.Fatalf("the idle thread's commands after its run on A: %v", err)
	}
	b.runToEnd(t, "sticky", "stream", user("second turn"), map[string]any{"deltas": 1})
	onA := mustJSON(a.command(t, "sticky", 2, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})["result"])
	if !strings.Contains(onA, "first turn") || !strings.Contains(onA, "second turn") {
		t.Fatalf("state on A after a run started on B: %s", onA)
	}
	a.fe.Shutdown()
	if err := a.nc.Flush(); err != nil { // the server has A's unsubscription
		t.Fatal(err)
	}
	if _, err := b.nc.Request(subject, probe, wait); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("the thread's commands once A shuts down: %v, want no responders", err)
	}
	b.runToEnd(t, "sticky", "stream", user("third turn"), map[string]any{"deltas": 1})
	onB := mustJSON(b.command(t, "sticky", 3, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})["result"])
	for _, turn := range []string{"first turn", "second turn", "third turn"} {
		if !strings.Contains(onB, turn) {
			t.Fatalf("state on B after A shut down lacks %q: %s", turn, onB)
		}
	}
}

// TestClusterOwnerLetsGoWhenItsConnectionIsLost: an instance whose NATS
// connection was lost no longer acts on a subscription it kept past its
// runs (another instance may have run the thread meanwhile): a command
// for the thread there is refused, as for any thread it cannot ask the
// cluster about, not executed on what it holds.
func TestClusterOwnerLetsGoWhenItsConnectionIsLost(t *testing.T) {
	c := newCluster(t, 2)
	a := c[0]
	a.runToEnd(t, "lost", "stream", user("first turn"), map[string]any{"deltas": 1})
	a.nc.Close()
	res := a.command(t, "lost", 2, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
	if msg, _ := res["message"].(string); res["type"] != "error" || !strings.Contains(msg, "connection closed") {
		t.Fatalf("state.get on A with its connection lost: %v", res)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestClusterResumeOnOtherInstance: a client that read part of a live run
// on A resumes on B (which did not hold the thread) with its last seq: B
// catches up from A's buffer, and the client receives every later event
// exactly once, the same frames as A's subscriber.
func TestClusterResumeOnOtherInstance(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c[0], c[1]
	onA := a.openSSE(t, "resume", `{"channels":["lifecycle","messages","values"]}`, nil)
	run, _ := a.runStart(t, "resume", "stream", user("go"), map[string]any{"hang": true, "deltas": 3})
	var seen []string
	for {
		e := onA.next(false)
		seen = append(seen, e.ID+" "+e.Event+" "+string(e.Data))
		if strings.Contains(string(e.Data), `"content-block-delta"`) {
			break // the run now hangs until cancelled
		}
	}
	if len(seen) < 4 {
		t.Fatalf("before the hang: %v", seen)
	}
	last := strings.Fields(seen[len(seen)-3])[0] // the client saw up to here
	onB := b.openSSE(t, "resume", `{"channels":["lifecycle","messages","values"],"since":`+last+`}`, nil)
	resp, err := http.Post(b.URL+"/threads/resume/runs/"+run+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("cancel on B: %v %v", resp, err)
	}
	resp.Body.Close()
	restA := append(seen[len(seen)-2:], frames(t, onA, 1)...)
	restB := frames(t, onB, 1)
	if strings.Join(restB, "\n") != strings.Join(restA, "\n") {
		t.Fatalf("resumed on B after seq %s:\n%s\nA:\n%s", last, strings.Join(restB, "\n"), strings.Join(restA, "\n"))
	}
}

// TestClusterReplayOnOtherInstance: an instance that loads a thread while
// another runs it replays what the owner replays, byte for byte: from the
// start (the state, pinned once it left the owner's buffer, then the
// buffer) and after every seq the owner still buffers. Before, it opened
// its buffer with the saved record's state at the record's seq, which the
// owner saves beside its run, so a reader behind that seq got a gap here
// and none on the owner.
func TestClusterReplayOnOtherInstance(t *testing.T) {
	const bufferEvents = 4
	c := newClusterOf(t, 2, agent.Config{BufferEvents: bufferEvents})
	a, b := c[0], c[1]
	const filter = `"channels":["lifecycle","messages","values","checkpoints"]`
	_, ended := a.runToEnd(t, "replay", "stream", user("first"), map[string]any{"deltas": 10})
	live := a.openSSE(t, "replay", `{`+filter+`,"since":`+strconv.FormatUint(ended, 10)+`}`, nil)
	run, _ := a.runStart(t, "replay", "stream", user("go"), map[string]any{"hang": true, "deltas": 3})
	var last string
	for {
		e := live.next(false)
		last = e.ID
		if strings.Contains(string(e.Data), `"content-block-delta"`) {
			break // the run now hangs until cancelled
		}
	}
	upTo := func(st *stream) []string { // the replay, up to the live reader's last frame
		var out []string
		for {
			e := st.next(false)
			out = append(out, e.ID+" "+e.Event+" "+string(e.Data))
			if e.ID == last {
				return out
			}
		}
	}
	onA := upTo(a.openSSE(t, "replay", "{"+filter+"}", nil))
	if len(onA) != bufferEvents+1 || !strings.Contains(onA[0], `"method":"values"`) || !strings.Contains(onA[0], `"content":"go"`) {
		t.Fatalf("the owner's replay is not the pinned state and its %d buffered events:\n%s", bufferEvents, strings.Join(onA, "\n"))
	}
	onB := upTo(b.openSSE(t, "replay", "{"+filter+"}", nil))
	if d := cmp.Diff(onA, onB); d != "" {
		t.Fatalf("replay on B (-A +B):\n%s", d)
	}
	for _, fr := range onA[1:] {
		since := strings.Fields(fr)[0]
		body := "{" + filter + `,"since":` + since + "}"
		fromA, fromB := a.openSSE(t, "replay", body, nil), b.openSSE(t, "replay", body, nil)
		if since == last {
			continue // nothing after it yet
		}
		if d := cmp.Diff(upTo(fromA), upTo(fromB)); d != "" {
			t.Fatalf("after seq %s (-A +B):\n%s", since, d)
		}
	}
	resp, err := http.Post(b.URL+"/threads/replay/runs/"+run+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("cancel on B: %v %v", resp, err)
	}
	resp.Body.Close()
	live.untilTerminal()
}
