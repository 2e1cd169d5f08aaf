package agent_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/adapters/scripted"
	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// wait bounds every wait for something that must happen.
const wait = 10 * time.Second

// newRunner is a bridge over the scripted backend (its targets), with the
// calculator tool, on an embedded NATS server (its replay log and thread
// store), running the agent runtime.
func newRunner(t testing.TB) *bridge.Bridge {
	t.Helper()
	b, _ := startBridge(t, bridgeOpts{})
	return b
}

// bridgeOpts configure startBridge: the data folder (a new one when
// empty), the runtime's config, and the backend "scripted" with its
// targets (the scripted backend's when nil).
type bridgeOpts struct {
	dir string
	// logBytes bounds the replay log (nats.replay_max_bytes), so that it
	// lets go of a thread's oldest events.
	logBytes int64
	// publishQueue bounds the events queued for the replay log
	// (nats.publish_queue).
	publishQueue int
	runtime      agent.RuntimeConfig
	backend      canonical.Backend
	targets      []string
}

// startBridge starts a bridge on an embedded NATS server in o.dir,
// running the agent runtime; stop (also the test's cleanup) stops it.
func startBridge(t testing.TB, o bridgeOpts) (b *bridge.Bridge, stop func()) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if o.backend == nil {
		tools := bridge.NewToolRegistry(bridge.ToolsConfig{Allow: []string{"calculator"}, Timeout: 5 * time.Second}, nil, "interlingua", log)
		o.backend, o.targets = scripted.New(scripted.Config{Tools: tools}), scripted.Targets
	}
	c := bridge.DefaultConfig()
	c.DataDir = cmp.Or(o.dir, t.TempDir())
	c.NATS.ReplayMaxBytes = o.logBytes
	c.NATS.PublishQueue = o.publishQueue
	c.Defaults()
	fabric, err := bridge.StartFabric(context.Background(), c.NATS, c.DataDir, log)
	if err != nil {
		t.Fatal(err)
	}
	var routes []bridge.Route
	for _, tg := range o.targets {
		routes = append(routes, bridge.Route{Target: tg, Backend: "scripted"})
	}
	b = bridge.NewBridge(bridge.NewRouter(routes, map[string]canonical.Backend{"scripted": o.backend}, nil), fabric, log)
	b.AddRuntime("agent", agent.NewRuntime(fabric.ThreadStore(), log, o.runtime))
	if err := b.StartCluster(nil, c.NATS); err != nil {
		fabric.Close()
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			b.Stop(5*time.Second, time.Second)
			fabric.Close()
		})
	}
	t.Cleanup(stop)
	return b, stop
}

// server is a frontend on an httptest server; hc is its client
// (http.DefaultClient unless the server speaks TLS).
type server struct {
	URL string
	fe  *agent.Frontend
	hc  *http.Client
	b   *bridge.Bridge
}

// overBridge is cfg with the ports of its Runner, a bridge (newRunner's
// when cfg has none).
func overBridge(t testing.TB, cfg agent.Config) (agent.Config, *bridge.Bridge) {
	b, _ := cfg.Runner.(*bridge.Bridge)
	if b == nil {
		b = newRunner(t)
	}
	cfg.Runner, cfg.Observer, cfg.Store, cfg.CheckThread, cfg.CancelRun = b, b, b.ThreadStore(), b.CheckThread, b.CancelRun
	return cfg, b
}

// newServer is a frontend with cfg over a bridge (newRunner's, unless
// cfg's Runner is one).
func newServer(t testing.TB, cfg agent.Config) *server {
	t.Helper()
	fe, ts, b := unstartedServer(t, cfg)
	ts.Start()
	return &server{URL: ts.URL, fe: fe, hc: http.DefaultClient, b: b}
}

// unstartedServer is a frontend with cfg over a bridge, mounted on an
// httptest server the caller sets up and starts. The test's cleanup shuts
// the frontend down (its streams end once their runs here have), closes
// the server, then closes the frontend.
func unstartedServer(t testing.TB, cfg agent.Config) (*agent.Frontend, *httptest.Server, *bridge.Bridge) {
	t.Helper()
	cfg, b := overBridge(t, cfg)
	fe, err := agent.NewFrontend(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	fe.Mount(mux)
	ts := httptest.NewUnstartedServer(mux)
	t.Cleanup(func() {
		fe.Shutdown()
		ts.Close()
		fe.Close()
	})
	return fe, ts, b
}

// command posts one command and returns the decoded response.
func (s *server) command(t testing.TB, thread string, id int, method string, params any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	resp, err := s.hc.Post(s.URL+"/threads/"+thread+"/commands", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, b)
	}
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// runStart starts a run and returns its id and the response's
// applied_through_seq.
func (s *server) runStart(t testing.TB, thread, assistant string, input any, configurable map[string]any) (string, uint64) {
	t.Helper()
	p := map[string]any{"assistant_id": assistant, "input": input}
	if configurable != nil {
		p["config"] = map[string]any{"configurable": configurable}
	}
	res := s.command(t, thread, 1, "run.start", p)
	if res["type"] != "success" {
		t.Fatalf("run.start: %v", res)
	}
	return res["result"].(map[string]any)["run_id"].(string), uint64(res["meta"].(map[string]any)["applied_through_seq"].(float64))
}

func user(text string) map[string]any {
	return map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}}
}

// stream is an open SSE event stream; its reader goroutine exits when the
// body is closed or ends (err: how, once done is closed).
type stream struct {
	t      testing.TB
	resp   *http.Response
	events chan sse.Event
	done   chan struct{}
	err    error
}

func (s *server) openSSE(t testing.TB, thread string, body string, header http.Header) *stream {
	t.Helper()
	req, _ := http.NewRequest("POST", s.URL+"/threads/"+thread+"/stream/events", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: HTTP %d %s", resp.StatusCode, b)
	}
	st := &stream{t: t, resp: resp, events: make(chan sse.Event, 1<<14), done: make(chan struct{})}
	go st.readLoop()
	t.Cleanup(st.Close)
	return st
}

func (st *stream) readLoop() {
	defer close(st.done)
	defer close(st.events)
	p := sse.Parser{KeepComments: true}
	buf := make([]byte, 32<<10)
	var out []sse.Event
	for {
		n, err := st.resp.Body.Read(buf)
		out, _ = p.Feed(buf[:n], out[:0])
		for _, e := range out {
			st.events <- e
		}
		if err != nil {
			st.err = err
			return
		}
	}
}

func (st *stream) Close() {
	st.resp.Body.Close()
	<-st.done
}

// next returns the next event (comments are skipped unless comments).
func (st *stream) next(comments bool) sse.Event {
	st.t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-st.events:
			if !ok {
				st.t.Fatal("stream ended")
			}
			if e.IsComment && !comments {
				continue
			}
			return e
		case <-timer.C:
			st.t.Fatal("no event within the wait")
		}
	}
}

// envelope is the part of an event frame tests look at.
type envelope struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	Seq     uint64 `json:"seq"`
	Method  string `json:"method"`
	Params  struct {
		Namespace []string        `json:"namespace"`
		Data      json.RawMessage `json:"data"`
	} `json:"params"`
	Error           string `json:"error"`
	Message         string `json:"message"`
	Since           uint64 `json:"since"`
	MinAvailableSeq uint64 `json:"min_available_seq"`
}

func (e envelope) status() string {
	var d struct{ Event, Error string }
	_ = json.Unmarshal(e.Params.Data, &d)
	return d.Event
}

func (e envelope) rootTerminal() bool {
	s := e.status()
	return e.Method == "lifecycle" && len(e.Params.Namespace) == 0 && (s == "completed" || s == "failed" || s == "interrupted")
}

func (st *stream) envelope() envelope {
	st.t.Helper()
	e := st.next(false)
	var env envelope
	if err := json.Unmarshal(e.Data, &env); err != nil {
		st.t.Fatalf("frame %q: %v", e.Data, err)
	}
	if env.Type == "event" && (e.ID != env.EventID || e.Event != env.Method) {
		st.t.Fatalf("SSE id %q / event %q do not match the envelope %q / %q", e.ID, e.Event, env.EventID, env.Method)
	}
	return env
}

// untilTerminal reads envelopes up to and including the next root terminal
// lifecycle event.
func (st *stream) untilTerminal() []envelope {
	st.t.Helper()
	var out []envelope
	for {
		e := st.envelope()
		out = append(out, e)
		if e.rootTerminal() {
			return out
		}
	}
}

// awaitEnd waits for the first root terminal event after seq after and
// returns its seq.
func (s *server) awaitEnd(t testing.TB, thread string, after uint64) uint64 {
	t.Helper()
	st := s.openSSE(t, thread, `{"channels":["lifecycle"],"since":`+strconv.FormatUint(after, 10)+`}`, nil)
	defer st.Close()
	end := st.untilTerminal()
	return end[len(end)-1].Seq
}

// runToEnd starts a run and waits for its end; it returns the run id and
// the seq of its terminal event.
func (s *server) runToEnd(t testing.TB, thread, assistant string, input any, configurable map[string]any) (string, uint64) {
	t.Helper()
	run, applied := s.runStart(t, thread, assistant, input, configurable)
	return run, s.awaitEnd(t, thread, applied)
}

// TestReplaySince1000 is the replay contract: after a run of 1,000 events a
// subscriber with since = 500 receives exactly 501..1000, then live events.
func TestReplaySince1000(t *testing.T) {
	s := newServer(t, agent.Config{})
	// stream with 989 deltas is 1,000 events: lifecycle, input values and
	// checkpoint, message start, block start, deltas, block finish,
	// message finish, updates, values, checkpoint, terminal.
	_, last := s.runToEnd(t, "t1000", "stream", user("go"), map[string]any{"deltas": 989})
	if last != 1000 {
		t.Fatalf("the run produced %d events, want 1000", last)
	}
	st := s.openSSE(t, "t1000", `{"channels":["values","updates","messages","tools","lifecycle","input","checkpoints","tasks","custom"],"since":500}`, nil)
	for want := uint64(501); want <= 1000; want++ {
		e := st.envelope()
		if e.Seq != want || e.EventID != strconv.FormatUint(want, 10) {
			t.Fatalf("got seq %d (event_id %q), want %d", e.Seq, e.EventID, want)
		}
	}
	s.runStart(t, "t1000", "stream", user("again"), map[string]any{"deltas": 2})
	for want := uint64(1001); ; want++ {
		e := st.envelope()
		if e.Seq != want {
			t.Fatalf("live: got seq %d, want %d", e.Seq, want)
		}
		if e.rootTerminal() {
			break
		}
	}
	// Last-Event-ID is an alias for since.
	st2 := s.openSSE(t, "t1000", `{"channels":["lifecycle"]}`, http.Header{"Last-Event-Id": {"1000"}})
	if e := st2.envelope(); e.Seq != 1001 || e.status() != "running" {
		t.Fatalf("after Last-Event-ID 1000: seq %d %s", e.Seq, e.status())
	}
}

// awaitLastEnd waits for the thread's last event to be a run's end, and
// returns its seq: a reader of a small log (smallLog) that follows a long
// run from its start may find events gone before it reads them.
func (s *server) awaitLastEnd(t *testing.T, thread string) uint64 {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		last, err := s.b.LastSeq(t.Context(), thread)
		if err != nil {
			t.Fatal(err)
		}
		if last > 0 {
			st := s.openSSE(t, thread, `{"channels":["lifecycle"],"since":`+strconv.FormatUint(last-1, 10)+`}`, nil)
			select {
			case e := <-st.events:
				var env envelope
				if json.Unmarshal(e.Data, &env) == nil && env.rootTerminal() {
					st.Close()
					return env.Seq
				}
			case <-time.After(100 * time.Millisecond):
			}
			st.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no run of thread %q ended within the wait", thread)
	return 0
}

// smallLog is a bridge whose replay log keeps about the last 256 KiB of
// events: a thread's oldest events leave it.
func smallLog(t *testing.T) *bridge.Bridge {
	b, _ := startBridge(t, bridgeOpts{logBytes: 256 << 10})
	return b
}

// TestReplayGap: a subscriber whose since is older than the replay log
// gets the missed-events report first, then what the log holds.
func TestReplayGap(t *testing.T) {
	s := newServer(t, agent.Config{Runner: smallLog(t)})
	s.runStart(t, "gap", "stream", user("go"), map[string]any{"deltas": 8000})
	last := s.awaitLastEnd(t, "gap")
	st := s.openSSE(t, "gap", `{"channels":["values","messages","lifecycle","checkpoints","updates"],"since":10}`, nil)
	first := st.next(false)
	var gap envelope
	if err := json.Unmarshal(first.Data, &gap); err != nil || first.ID != "" {
		t.Fatalf("first frame %+v", first)
	}
	oldest := gap.MinAvailableSeq
	if gap.Type != "error" || gap.Error != "invalid_argument" || gap.Since != 10 || oldest <= 11 || oldest > last ||
		gap.Message != "events after seq 10 are no longer buffered" || !bytes.Contains(first.Data, []byte(`"id":null`)) {
		t.Fatalf("gap report = %s", first.Data)
	}
	for want := oldest; want <= last; want++ {
		if e := st.envelope(); e.Seq != want {
			t.Fatalf("after the gap: seq %d, want %d", e.Seq, want)
		}
	}
}

// TestReplayGapOfAThreadAgedOut: a subscriber after a seq of a thread the
// replay log holds nothing of any more (another thread's events pushed it
// out) waits, and when the thread's next run comes gets the missed-events
// report, then that run: the bridge refuses such a replay (out_of_range)
// and the reader goes on from the oldest event to come.
func TestReplayGapOfAThreadAgedOut(t *testing.T) {
	s := newServer(t, agent.Config{Runner: smallLog(t)})
	s.runStart(t, "aged", "stream", user("go"), map[string]any{"deltas": 3})
	last := s.awaitLastEnd(t, "aged")
	s.runStart(t, "filler", "stream", user("go"), map[string]any{"deltas": 8000})
	s.awaitLastEnd(t, "filler")
	st := s.openSSE(t, "aged", `{"channels":["lifecycle"],"since":2}`, nil)
	s.runStart(t, "aged", "stream", user("again"), map[string]any{"deltas": 3})
	first := st.next(false)
	var gap envelope
	if err := json.Unmarshal(first.Data, &gap); err != nil || gap.Type != "error" || gap.Since != 2 || gap.MinAvailableSeq <= last {
		t.Fatalf("first frame %s, want the gap after 2 up to the next run (after %d)", first.Data, last)
	}
	if e := st.envelope(); e.Seq != gap.MinAvailableSeq {
		t.Fatalf("after the gap: seq %d, want %d", e.Seq, gap.MinAvailableSeq)
	}
}

// TestPinnedValuesOnSubscribe: a subscriber joining a long run after the
// state left the buffer still starts with the current state.
func TestPinnedValuesOnSubscribe(t *testing.T) {
	s := newServer(t, agent.Config{})
	// A slow run: its state (the input) leaves the 50-event buffer long
	// before the run ends.
	s.runStart(t, "pin", "stream", user("go"), map[string]any{"deltas": 5000, "delay_ms": 1})
	lc := s.openSSE(t, "pin", `{"channels":["messages"],"since":120}`, nil)
	lc.envelope() // the run is past seq 120
	st := s.openSSE(t, "pin", `{"channels":["values"]}`, nil)
	e := st.envelope()
	if e.Method != "values" || e.Seq != 2 || !bytes.Contains(e.Params.Data, []byte(`"content":"go"`)) {
		t.Fatalf("first event %s seq %d %s", e.Method, e.Seq, e.Params.Data)
	}
	// The pinned state goes only to streams whose filter takes it.
	msgs := s.openSSE(t, "pin", `{"channels":["messages"]}`, nil)
	if e := msgs.envelope(); e.Method != "messages" {
		t.Fatalf("a messages stream's first event is %s seq %d", e.Method, e.Seq)
	}
}

func TestHeartbeatAndStreamOpenAcrossRuns(t *testing.T) {
	s := newServer(t, agent.Config{Heartbeat: 20 * time.Millisecond})
	st := s.openSSE(t, "hb", `{"channels":["lifecycle"]}`, nil)
	if e := st.next(true); !e.IsComment || e.Comment != "heartbeat" {
		t.Fatalf("want a heartbeat comment, got %+v", e)
	}
	for range 2 { // the stream stays open across runs
		s.runStart(t, "hb", "echo", user("hi"), nil)
		st.untilTerminal()
	}
}

func TestCommandErrors(t *testing.T) {
	s := newServer(t, agent.Config{})
	s.runStart(t, "known", "echo", user("hi"), nil)
	cases := []struct {
		thread, method string
		params         any
		code, message  string
	}{
		{"unknown", "state.get", map[string]any{"namespace": []string{}}, "no_such_run", "no run"},
		{"unknown", "input.respond", map[string]any{"namespace": []string{}, "interrupt_id": "x", "response": 1}, "no_such_run", "no run"},
		{"unknown", "state.listCheckpoints", map[string]any{}, "no_such_run", "no run"},
		{"unknown", "bogus.method", map[string]any{}, "unknown_command", "Unknown protocol command: bogus.method"},
		{"known", "bogus.method", map[string]any{}, "unknown_command", "Unknown protocol command: bogus.method"},
		{"known", "run.start", map[string]any{"input": nil}, "invalid_argument", "run.start requires an assistant_id."},
		{"known", "run.start", map[string]any{"assistant_id": 7}, "invalid_argument", "assistant_id must be a string"},
		{"known", "run.start", map[string]any{"assistant_id": "nope"}, "invalid_argument", `unknown assistant_id "nope"`},
		{"known", "run.start", map[string]any{"assistant_id": "stream"}, "invalid_argument", `bound to assistant "echo"`},
		{"known", "run.start", map[string]any{"assistant_id": "echo", "config": "x"}, "invalid_argument", "config must be an object"},
		{"known", "run.start", map[string]any{"assistant_id": "echo", "input": 5}, "invalid_argument", "input must be an object"},
		{"known", "run.start", map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{map[string]any{"content": "x"}}}}, "invalid_argument", "input.messages[0]: role is required"},
		{"known", "run.start", map[string]any{"assistant_id": "echo", "multitask_strategy": "later"}, "invalid_argument", "multitask_strategy"},
		{"known", "input.respond", map[string]any{"namespace": []string{}}, "invalid_argument", "input.respond requires an interrupt_id."},
		{"known", "input.respond", map[string]any{"namespace": []string{}, "interrupt_id": "x"}, "invalid_argument", "is not interrupted"},
		{"known", "input.inject", map[string]any{"namespace": []string{}, "message": map[string]any{"role": "bot", "content": "x"}}, "invalid_argument", "message.role"},
		{"known", "input.inject", map[string]any{"namespace": []string{"sub"}, "message": map[string]any{"role": "user", "content": "x"}}, "no_such_namespace", "sub"},
		{"known", "state.get", map[string]any{"namespace": "root"}, "invalid_argument", "namespace must be an array"},
		{"known", "state.get", map[string]any{"keys": []string{"messages"}}, "invalid_argument", "requires a namespace"},
		{"known", "state.get", map[string]any{"namespace": []string{"x"}}, "no_such_namespace", "x"},
		{"known", "state.fork", map[string]any{}, "invalid_argument", "state.fork requires a checkpoint_id"},
		{"known", "state.fork", map[string]any{"checkpoint_id": "ckpt-99"}, "no_such_checkpoint", "ckpt-99"},
		{"known", "state.listCheckpoints", map[string]any{"limit": -1}, "invalid_argument", "limit"},
		{"known", "agent.getTree", map[string]any{"run_id": "run-x"}, "no_such_run", "run-x"},
		{"known", "subscription.subscribe", map[string]any{"channels": []string{"values"}}, "not_supported", "WebSocket"},
	}
	for _, c := range cases {
		res := s.command(t, c.thread, 42, c.method, c.params)
		if res["type"] != "error" || res["id"] != float64(42) || res["error"] != c.code || !strings.Contains(fmt.Sprint(res["message"]), c.message) {
			t.Errorf("%s %s %v: got %v, want %s containing %q", c.thread, c.method, c.params, res, c.code, c.message)
		}
	}
	// applied_through_seq on every success
	res := s.command(t, "known", 43, "state.get", map[string]any{"namespace": []string{}})
	if meta, _ := res["meta"].(map[string]any); meta == nil || meta["applied_through_seq"] == nil {
		t.Errorf("state.get response has no meta.applied_through_seq: %v", res)
	}
}

func TestHTTPTransportErrors(t *testing.T) {
	s := newServer(t, agent.Config{MaxRequestBytes: 1 << 10})
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/threads/x/commands", `{not json`, 400, "invalid_argument"},
		{"POST", "/threads/x/commands", `{"id":1}`, 400, "invalid_argument"},
		{"POST", "/threads/x/commands", `{"method":"state.get"}`, 400, "invalid_argument"},
		{"POST", "/threads/x/commands", `{"id":1,"method":"run.start","params":{"input":"` + strings.Repeat("x", 2000) + `"}}`, 413, "invalid_argument"},
		{"POST", "/threads/x/stream/events", `{"channels":[]}`, 400, "invalid_argument"},
		{"POST", "/threads/x/stream", `{"channels":["bogus"]}`, 400, "invalid_argument"},
		{"POST", "/threads/x/stream", `[]`, 400, "invalid_argument"},
		{"GET", "/threads/x/stream", ``, 426, "invalid_argument"},
		{"GET", "/threads/x/state", ``, 404, "no_such_run"},
	} {
		req, _ := http.NewRequest(c.method, s.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error, Message string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != c.status || body.Error != c.code || body.Message == "" {
			t.Errorf("%s %s %.40s: %d %+v, want %d %s", c.method, c.path, c.body, resp.StatusCode, body, c.status, c.code)
		}
	}
	// A command with an id but bad params is answered in the protocol's form.
	res := s.command(t, "x", 9, "run.start", "not-an-object")
	if res["type"] != "error" || res["id"] != float64(9) || !strings.Contains(res["message"].(string), "params must be an object") {
		t.Errorf("bad params: %v", res)
	}
}

// ws is a WebSocket test client; frames are read by the test goroutine.
// Events read while waiting for a response are kept for the next read.
type ws struct {
	t       testing.TB
	c       *websocket.Conn
	pending []map[string]any
}

func (s *server) dialWS(t testing.TB, thread string) *ws {
	t.Helper()
	u := "ws" + strings.TrimPrefix(s.URL, "http") + "/threads/" + thread + "/stream/events"
	c, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return &ws{t: t, c: c}
}

func (w *ws) send(v any) {
	w.t.Helper()
	var b []byte
	if s, ok := v.(string); ok {
		b = []byte(s)
	} else {
		b, _ = json.Marshal(v)
	}
	if err := w.c.WriteMessage(websocket.TextMessage, b); err != nil {
		w.t.Fatal(err)
	}
}

func (w *ws) read() map[string]any {
	w.t.Helper()
	if len(w.pending) > 0 {
		m := w.pending[0]
		w.pending = w.pending[1:]
		return m
	}
	return w.readFrame()
}

func (w *ws) readFrame() map[string]any {
	w.t.Helper()
	_ = w.c.SetReadDeadline(time.Now().Add(wait))
	_, b, err := w.c.ReadMessage()
	if err != nil {
		w.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		w.t.Fatalf("frame %s: %v", b, err)
	}
	return m
}

// response reads frames until the response to id; events read meanwhile
// are kept for read (a run's events may precede its run.start response).
func (w *ws) response(id int) map[string]any {
	w.t.Helper()
	for {
		m := w.readFrame()
		if m["type"] != "event" && m["id"] == float64(id) {
			return m
		}
		w.pending = append(w.pending, m)
	}
}

func TestWebSocketBadInputKeepsConnection(t *testing.T) {
	s := newServer(t, agent.Config{})
	w := s.dialWS(t, "wsbad")
	w.send(`{not json`)
	if m := w.read(); m["type"] != "error" || m["id"] != nil || m["error"] != "invalid_argument" || m["message"] != "Protocol commands must be valid JSON." {
		t.Fatalf("malformed JSON: %v", m)
	}
	w.send(`{"id":"x","method":"run.start"}`)
	if m := w.read(); m["id"] != nil || m["message"] != "Protocol commands must include an integer id and string method." {
		t.Fatalf("missing id: %v", m)
	}
	w.send(`{"id":3}`)
	if m := w.read(); m["id"] != nil || m["message"] != "Protocol commands must include an integer id and string method." {
		t.Fatalf("missing method: %v", m)
	}
	w.send(map[string]any{"id": 4, "method": "nope"})
	if m := w.read(); m["id"] != float64(4) || m["error"] != "unknown_command" {
		t.Fatalf("unknown method: %v", m)
	}
	w.send(map[string]any{"id": 5, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{}}})
	if m := w.read(); m["error"] != "invalid_argument" || m["message"] != "subscription.subscribe requires a non-empty channels array." {
		t.Fatalf("empty channels: %v", m)
	}
	w.send(map[string]any{"id": 6, "method": "subscription.unsubscribe", "params": map[string]any{"subscription_id": "sub-x"}})
	if m := w.read(); m["error"] != "no_such_subscription" {
		t.Fatalf("unknown subscription: %v", m)
	}
	// still working
	w.send(map[string]any{"id": 7, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"lifecycle"}}})
	if m := w.response(7); m["type"] != "success" {
		t.Fatalf("subscribe after errors: %v", m)
	}
	w.send(map[string]any{"id": 8, "method": "run.start", "params": map[string]any{"assistant_id": "echo", "input": user("hi")}})
	if m := w.response(8); m["type"] != "success" {
		t.Fatalf("run.start: %v", m)
	}
	for {
		m := w.read()
		if m["type"] == "event" && m["method"] == "lifecycle" && m["params"].(map[string]any)["data"].(map[string]any)["event"] == "completed" {
			break
		}
	}
}

// TestWebSocketSubscribeReplayOrder: the response comes first, then the
// replay, then live events, with no duplicate when several subscriptions
// match.
func TestWebSocketSubscribeReplayOrder(t *testing.T) {
	s := newServer(t, agent.Config{})
	s.runToEnd(t, "wsorder", "echo", user("one two"), nil)
	w := s.dialWS(t, "wsorder")
	w.send(map[string]any{"id": 1, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"lifecycle"}}})
	res := w.read()
	if res["type"] != "success" || res["result"].(map[string]any)["replayed_events"] != float64(2) {
		t.Fatalf("subscribe: %v", res)
	}
	for range 2 {
		if m := w.read(); m["method"] != "lifecycle" {
			t.Fatalf("replay: %v", m)
		}
	}
	w.send(map[string]any{"id": 2, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"lifecycle", "messages"}}})
	res = w.read()
	n := int(res["result"].(map[string]any)["replayed_events"].(float64))
	for range n {
		if m := w.read(); m["type"] != "event" {
			t.Fatalf("replay: %v", m)
		}
	}
	w.send(map[string]any{"id": 3, "method": "run.start", "params": map[string]any{"assistant_id": "echo", "input": user("three")}})
	seen := map[float64]bool{}
	for {
		m := w.read()
		if m["type"] != "event" {
			continue
		}
		seq := m["seq"].(float64)
		if seen[seq] {
			t.Fatalf("seq %v sent twice on one connection", seq)
		}
		seen[seq] = true
		if m["method"] == "lifecycle" && m["params"].(map[string]any)["data"].(map[string]any)["event"] == "completed" {
			break
		}
	}
}

// TestWebSocketReconnectMissedEvents: subscription.reconnect beyond the
// buffer restores the subscription, reports the missed events and sends
// the in-band gap report before the replay (issue 36 #4).
func TestWebSocketReconnectMissedEvents(t *testing.T) {
	s := newServer(t, agent.Config{Runner: smallLog(t)})
	w := s.dialWS(t, "wsre")
	w.send(map[string]any{"id": 1, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"messages", "lifecycle"}}})
	sub := w.response(1)["result"].(map[string]any)["subscription_id"].(string)
	w.send(map[string]any{"id": 2, "method": "run.start", "params": map[string]any{"assistant_id": "stream", "input": user("go"), "config": map[string]any{"configurable": map[string]any{"deltas": 8000}}}})
	started := w.response(2)
	run := started["result"].(map[string]any)["run_id"].(string)
	w.c.Close() // dropped
	s.awaitLastEnd(t, "wsre")
	w2 := s.dialWS(t, "wsre")
	w2.send(map[string]any{"id": 1, "method": "subscription.reconnect", "params": map[string]any{"run_id": run, "last_event_id": "5", "subscriptions": []string{sub}}})
	res := w2.read()
	r, _ := res["result"].(map[string]any)
	if res["type"] != "success" || r["restored"] != true || r["missed_events"].(float64) <= 0 {
		t.Fatalf("reconnect: %v", res)
	}
	if cn := r["current_namespaces"].([]any); len(cn) != 1 || cn[0].(map[string]any)["status"] != "completed" {
		t.Fatalf("current_namespaces: %v", cn)
	}
	missed := uint64(r["missed_events"].(float64))
	// The gap is reported in band, as on SSE and subscribe (section 6.2):
	// an id-null invalid_argument naming since and min_available_seq.
	gapReport := w2.read()
	if gapReport["type"] != "error" || gapReport["id"] != nil || gapReport["error"] != "invalid_argument" ||
		gapReport["since"] != float64(5) || gapReport["min_available_seq"] != float64(5+missed+1) {
		t.Fatalf("gap report: %v", gapReport)
	}
	first := w2.read()
	if first["type"] != "event" || uint64(first["seq"].(float64)) != 5+missed+1 {
		t.Fatalf("replay starts at %v, want %d", first["seq"], 5+missed+1)
	}
	// The Python shape: since older than the buffer is resume_gap.
	w2.send(map[string]any{"id": 2, "method": "subscription.reconnect", "params": map[string]any{"channels": []string{"messages"}, "since": 3}})
	if m := w2.response(2); m["error"] != "resume_gap" || m["since"] != float64(3) {
		t.Fatalf("python reconnect: %v", m)
	}
	w2.send(map[string]any{"id": 3, "method": "subscription.reconnect", "params": map[string]any{"run_id": "run-nope"}})
	if m := w2.response(3); m["error"] != "no_such_run" {
		t.Fatalf("unknown run: %v", m)
	}
	// Naming no subscription restores none: the client must subscribe.
	w2.send(map[string]any{"id": 4, "method": "subscription.reconnect", "params": map[string]any{"run_id": run, "last_event_id": "5"}})
	if m := w2.response(4); m["type"] != "success" || m["result"].(map[string]any)["restored"] != false {
		t.Fatalf("reconnect without subscriptions: %v", m)
	}
}

// TestWebSocketReconnectKeepsOthersSubscriptions: a reconnect in the
// Python shape naming a subscription id of another thread, or of another
// open connection, gets an id of its own and leaves that one be; the
// connection that held it, once closed, can take it back on its thread.
func TestWebSocketReconnectKeepsOthersSubscriptions(t *testing.T) {
	s := newServer(t, agent.Config{Runner: smallLog(t)})
	reconnect := func(w *ws, id int, sub string) string {
		t.Helper()
		w.send(map[string]any{"id": id, "method": "subscription.reconnect", "params": map[string]any{"channels": []string{"lifecycle"}, "since": 0, "subscription_id": sub}})
		m := w.response(id)
		got, _ := m["result"].(map[string]any)["subscription_id"].(string)
		if m["type"] != "success" || got == "" {
			t.Fatalf("reconnect naming %s: %v", sub, m)
		}
		return got
	}
	a := s.dialWS(t, "wsk-a")
	a.send(map[string]any{"id": 1, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"lifecycle"}}})
	sub := a.response(1)["result"].(map[string]any)["subscription_id"].(string)
	if len(sub) < len("sub-")+26 {
		t.Fatalf("subscription id %q: want 128 random bits", sub)
	}
	if got := reconnect(s.dialWS(t, "wsk-b"), 1, sub); got == sub {
		t.Fatal("another thread's connection took the subscription")
	}
	if got := reconnect(s.dialWS(t, "wsk-a"), 1, sub); got == sub {
		t.Fatal("another open connection took the subscription")
	}
	a.c.Close()
	a2 := s.dialWS(t, "wsk-a")
	for i := 1; ; i++ { // the closed connection's subscription is kept once its reader has seen the close
		if got := reconnect(a2, i, sub); got == sub {
			break
		}
		if i == 50 {
			t.Fatal("the subscription was not kept for its thread after its connection closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWebSocketReconnectMissedEventsOfAnyChannel: missed_events counts
// the events after last_event_id the replay log let go, of any channel:
// the log keeps nothing of them to tell which a subscription would have
// matched. (The frontend's own buffer counted only those, issue 36 #4.)
func TestWebSocketReconnectMissedEventsOfAnyChannel(t *testing.T) {
	s := newServer(t, agent.Config{Runner: smallLog(t)})
	w := s.dialWS(t, "wsref")
	w.send(map[string]any{"id": 1, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"lifecycle", "values"}}})
	states := w.response(1)["result"].(map[string]any)["subscription_id"].(string)
	w.send(map[string]any{"id": 2, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"messages"}}})
	deltas := w.response(2)["result"].(map[string]any)["subscription_id"].(string)
	w.send(map[string]any{"id": 3, "method": "run.start", "params": map[string]any{"assistant_id": "stream", "input": user("go"), "config": map[string]any{"configurable": map[string]any{"deltas": 8000}}}})
	started := w.response(3)
	run := started["result"].(map[string]any)["run_id"].(string)
	w.c.Close()
	s.awaitLastEnd(t, "wsref")
	reconnect := func(id int, sub string) (missed, oldest float64) {
		w2 := s.dialWS(t, "wsref")
		w2.send(map[string]any{"id": id, "method": "subscription.reconnect", "params": map[string]any{"run_id": run, "last_event_id": "5", "subscriptions": []string{sub}}})
		res := w2.read()
		r, _ := res["result"].(map[string]any)
		if res["type"] != "success" || r["restored"] != true {
			t.Fatalf("reconnect: %v", res)
		}
		gapReport := w2.read()
		if gapReport["type"] != "error" || gapReport["id"] != nil {
			t.Fatalf("gap report: %v", gapReport)
		}
		return r["missed_events"].(float64), gapReport["min_available_seq"].(float64)
	}
	// The log keeps no trace of the events it let go: missed_events counts
	// them all, whatever the subscriptions' channels.
	for i, sub := range []string{states, deltas} {
		if missed, oldest := reconnect(1, sub); oldest <= 100 || missed != oldest-1-5 {
			t.Errorf("subscription %d: missed_events %v with the log from seq %v, want %v (seqs 6..%v)", i, missed, oldest, oldest-1-5, oldest-1)
		}
	}
}

// Seq-like inputs follow one rule on every path, an integer in 0..2^53-1:
// a last_event_id of 2^64-1 is refused (it reported one missed event by
// overflow), and subscription.subscribe refuses a since that the SSE
// request refuses.
func TestSeqInputsOneRule(t *testing.T) {
	s := newServer(t, agent.Config{})
	w := s.dialWS(t, "seqs")
	w.send(map[string]any{"id": 1, "method": "run.start", "params": map[string]any{"assistant_id": "echo", "input": user("hi")}})
	run := w.response(1)["result"].(map[string]any)["run_id"].(string)
	for i, last := range []string{"18446744073709551615", "9007199254740992", "-1", "x"} {
		w.send(map[string]any{"id": 10 + i, "method": "subscription.reconnect", "params": map[string]any{"run_id": run, "last_event_id": last}})
		if m := w.response(10 + i); m["error"] != "invalid_argument" {
			t.Errorf("last_event_id %s: %v", last, m)
		}
	}
	for i, since := range []any{-1, 1.5, "3", true, 9007199254740992.0} {
		w.send(map[string]any{"id": 20 + i, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"messages"}, "since": since}})
		if m := w.response(20 + i); m["error"] != "invalid_argument" {
			t.Errorf("subscribe since %v: %v", since, m)
		}
		resp, err := http.Post(s.URL+"/threads/seqs/stream/events", "application/json",
			strings.NewReader(fmt.Sprintf(`{"channels":["messages"],"since":%s}`, jsonText(since))))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("SSE since %v: status %d, want 400 as subscribe refuses it", since, resp.StatusCode)
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMultitask: reject refuses, enqueue runs after the active run.
func TestMultitask(t *testing.T) {
	s := newServer(t, agent.Config{})
	st := s.openSSE(t, "mt", `{"channels":["lifecycle"]}`, nil)
	first, _ := s.runStart(t, "mt", "stream", user("go"), map[string]any{"hang": true, "deltas": 1})
	st.envelope() // running
	res := s.command(t, "mt", 2, "run.start", map[string]any{"assistant_id": "stream", "input": user("x"), "multitask_strategy": "reject"})
	if res["error"] != "invalid_argument" || !strings.Contains(res["message"].(string), "active run") {
		t.Fatalf("reject: %v", res)
	}
	queued, _ := s.runStart(t, "mt", "stream", user("queued"), map[string]any{"deltas": 1})
	// Cancel the hanging run through the LangGraph REST endpoint.
	resp, err := http.Post(s.URL+"/threads/mt/runs/"+first+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("cancel: %v %v", resp, err)
	}
	resp.Body.Close()
	end := st.untilTerminal()
	var d struct{ Event, Error string }
	_ = json.Unmarshal(end[len(end)-1].Params.Data, &d)
	if d.Event != "failed" || !strings.HasPrefix(d.Error, "cancelled: ") {
		t.Fatalf("cancelled run ends with %+v", d)
	}
	if e := st.envelope(); e.status() != "running" {
		t.Fatalf("queued run %s did not start: %+v", queued, e)
	}
	if e := st.untilTerminal(); e[len(e)-1].status() != "completed" {
		t.Fatalf("queued run: %v", e[len(e)-1].status())
	}
}

// interruptAsked is an input.requested event's data.
type interruptAsked struct {
	InterruptID string          `json:"interrupt_id"`
	Payload     json.RawMessage `json:"payload"`
}

// runToInterrupt runs demo-approval on thread, read by st (lifecycle and
// input), to its interrupted end, and returns the interrupt it asked.
func (s *server) runToInterrupt(t *testing.T, thread string, st *stream) interruptAsked {
	t.Helper()
	s.runStart(t, thread, "demo-approval", user("What is 6 * 7?"), nil)
	var asked interruptAsked
	events := st.untilTerminal()
	for _, e := range events {
		if e.Method == "input.requested" {
			_ = json.Unmarshal(e.Params.Data, &asked)
		}
	}
	if asked.InterruptID == "" || events[len(events)-1].status() != "interrupted" {
		t.Fatalf("the run did not end interrupted with an interrupt: %+v", events)
	}
	return asked
}

// TestThreadFreeAtItsRunsEnd: a client that has read a run's end from
// the thread acts on it at once, while the frontend's own reading of the
// run lags (held 300 ms here; a busy machine does it unasked, as CI did):
// the interrupt is answered, and a run with multitask_strategy reject
// starts, rather than "is not interrupted" or "active run".
func TestThreadFreeAtItsRunsEnd(t *testing.T) {
	agent.SlowDrain(t, 300*time.Millisecond)
	s := newServer(t, agent.Config{})
	st := s.openSSE(t, "free", `{"channels":["lifecycle","input"]}`, nil)
	defer st.Close()
	asked := s.runToInterrupt(t, "free", st)
	res := s.command(t, "free", 2, "input.respond", map[string]any{"namespace": []string{}, "interrupt_id": asked.InterruptID, "response": map[string]any{"approved": true}})
	if res["type"] != "success" {
		t.Fatalf("input.respond: %v", res)
	}
	if end := st.untilTerminal(); end[len(end)-1].status() != "completed" {
		t.Fatalf("resumed run ends %s", end[len(end)-1].status())
	}
	res = s.command(t, "free", 3, "run.start", map[string]any{"assistant_id": "demo-approval", "input": user("again"), "multitask_strategy": "reject"})
	if res["type"] != "success" {
		t.Fatalf("run.start after the end: %v", res)
	}
	if end := st.untilTerminal(); end[len(end)-1].status() != "interrupted" {
		t.Fatalf("third run ends %s", end[len(end)-1].status())
	}
}

// TestStateEndpoint: GET /threads/{id}/state (LangGraph's hydration) of
// a thread at an interrupt is its values and head checkpoint as state.get
// gives them, and the pending interrupt with the payload input.requested
// carried.
func TestStateEndpoint(t *testing.T) {
	s := newServer(t, agent.Config{})
	st := s.openSSE(t, "hydrate", `{"channels":["lifecycle","input"]}`, nil)
	defer st.Close()
	asked := s.runToInterrupt(t, "hydrate", st)
	res := s.command(t, "hydrate", 2, "state.get", map[string]any{"namespace": []string{}})
	result, _ := res["result"].(map[string]any)
	ckpt, _ := result["checkpoint"].(map[string]any)
	if ckpt == nil {
		t.Fatalf("no checkpoint: %v", res)
	}
	var payload any
	_ = json.Unmarshal(asked.Payload, &payload)
	want, _ := json.Marshal(map[string]any{
		"values": result["values"], "next": []any{}, "tasks": []any{}, "metadata": map[string]any{}, "created_at": nil,
		"checkpoint": map[string]any{"thread_id": "hydrate", "checkpoint_ns": "", "checkpoint_id": ckpt["id"]},
		"interrupts": []any{map[string]any{"id": asked.InterruptID, "value": payload}},
	})
	resp, err := http.Get(s.URL + "/threads/hydrate/state")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !jsonEqual(got, want) {
		t.Fatalf("GET state: %d %s\n%s\nwant\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), got, want)
	}
}

// TestStateSharedThroughStore: two frontends share the thread store, so a
// thread run on one is served by the other.
func TestStateSharedThroughStore(t *testing.T) {
	a := newServer(t, agent.Config{})
	b := newServer(t, agent.Config{Runner: a.b})
	a.runToEnd(t, "shared", "demo-agent", user("What is 6 * 7?"), nil)
	res := b.command(t, "shared", 1, "state.get", map[string]any{"namespace": []string{}})
	if res["type"] != "success" {
		t.Fatalf("state.get on the other instance: %v", res)
	}
	msgs := res["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)
	if len(msgs) != 4 || msgs[3].(map[string]any)["content"] != "6 * 7 = 42." {
		t.Fatalf("messages on b: %v", msgs)
	}
	applied := res["meta"].(map[string]any)["applied_through_seq"].(float64)
	// b's stream replays the thread from the replay log: its last values
	// event, the run's last, is the state a saw, and the command's
	// applied_through_seq is the run's end.
	st := b.openSSE(t, "shared", `{"channels":["values","lifecycle"]}`, nil)
	e := st.untilTerminal()
	if v := e[len(e)-2]; v.Method != "values" || !bytes.Contains(v.Params.Data, []byte("6 * 7 = 42.")) || float64(e[len(e)-1].Seq) != applied {
		t.Fatalf("b's replay ends %s %s, then seq %d; applied_through_seq %v", v.Method, v.Params.Data, e[len(e)-1].Seq, applied)
	}
	// A run on b continues the conversation; a reads it back.
	b.runToEnd(t, "shared", "demo-agent", user("again"), nil)
	res = a.command(t, "shared", 2, "state.listCheckpoints", map[string]any{"limit": 1})
	cps := res["result"].(map[string]any)["checkpoints"].([]any)
	if len(cps) != 1 {
		t.Fatalf("checkpoints on a: %v", res)
	}
	res = b.command(t, "shared", 3, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
	if n := len(res["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)); n != 8 {
		t.Fatalf("after a run on b: %d messages", n)
	}
}

// TestConcurrentSavesMerge: two instances that both hold a thread each run
// a turn; the second save meets the first's newer revision, merges, and
// neither turn is lost (optimistic concurrency on the head record).
func TestConcurrentSavesMerge(t *testing.T) {
	a := newServer(t, agent.Config{})
	b := newServer(t, agent.Config{Runner: a.b})
	a.runToEnd(t, "both", "echo", user("one"), nil)
	// b loads the thread (revision r), then a saves a turn (r+1) that b
	// has not seen, then b saves its own turn over r: a conflict.
	if res := b.command(t, "both", 1, "state.get", map[string]any{"namespace": []string{}}); res["type"] != "success" {
		t.Fatalf("state.get on b: %v", res)
	}
	a.runToEnd(t, "both", "echo", user("two"), nil)
	b.runToEnd(t, "both", "echo", user("three"), nil)
	c := newServer(t, agent.Config{Runner: a.b}) // a fresh frontend reads the record
	res := c.command(t, "both", 1, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
	msgs := res["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)
	var said []string
	for _, m := range msgs {
		if m.(map[string]any)["type"] == "human" || m.(map[string]any)["role"] == "user" {
			said = append(said, fmt.Sprint(m.(map[string]any)["content"]))
		}
	}
	if strings.Join(said, ",") != "one,two,three" {
		t.Fatalf("human turns in the saved thread: %v (all messages: %v)", said, msgs)
	}
}

// TestCheckpointsBeyondMaxAreRemoved: a thread keeps its newest
// MaxCheckpoints checkpoints, in memory and in the store (one record
// each; those let go are removed), and a fresh instance reads back the
// whole conversation and those checkpoints.
func TestCheckpointsBeyondMaxAreRemoved(t *testing.T) {
	br, _ := startBridge(t, bridgeOpts{runtime: agent.RuntimeConfig{MaxCheckpoints: 3}})
	store := br.ThreadStore()
	a := newServer(t, agent.Config{Runner: br})
	for i := range 5 {
		a.runToEnd(t, "long", "echo", user(fmt.Sprintf("turn %d", i)), nil)
	}
	res := a.command(t, "long", 1, "state.listCheckpoints", map[string]any{})
	cps := res["result"].(map[string]any)["checkpoints"].([]any)
	var ids []string
	for _, c := range cps {
		ids = append(ids, c.(map[string]any)["id"].(string))
	}
	if len(ids) != 3 {
		t.Fatalf("checkpoints kept: %v", ids)
	}
	keys, err := store.Keys(t.Context(), "long", "agent.ckpt.")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, id := range ids {
		want = append(want, "agent.ckpt."+subject.Key(id))
	}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("checkpoint records %v, want %v", keys, want)
	}
	c := newServer(t, agent.Config{Runner: br}) // a fresh frontend reads the record
	res = c.command(t, "long", 1, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
	msgs := res["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)
	if len(msgs) != 10 || !strings.Contains(fmt.Sprint(msgs[8]), "turn 4") {
		t.Fatalf("thread read back on a fresh instance: %d messages: %v", len(msgs), msgs)
	}
	res = c.command(t, "long", 2, "state.listCheckpoints", map[string]any{})
	if got := res["result"].(map[string]any)["checkpoints"].([]any); len(got) != 3 {
		t.Fatalf("checkpoints read back: %v", got)
	}
}

// TestLargeThreadSurvivesRestart: a thread whose conversation holds a
// 1.2 MB message (no record cap: the store keeps large values in its
// object store) is read back whole, with its checkpoints, by a new
// instance after the NATS server restarted on the same data folder.
func TestLargeThreadSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	br, stop := startBridge(t, bridgeOpts{dir: dir})
	big := strings.Repeat(strings.Repeat("0123456789", 1000)+" ", 132) // 1.32 MB, in 132 deltas (echo's words)
	a := newServer(t, agent.Config{Runner: br})
	a.runToEnd(t, "big.thread é", "echo", user(big), nil)
	a.runToEnd(t, "big.thread é", "echo", user("after"), nil)
	a.fe.Shutdown()
	a.fe.Close()
	stop()

	br, _ = startBridge(t, bridgeOpts{dir: dir})
	b := newServer(t, agent.Config{Runner: br})
	res := b.command(t, "big.thread é", 1, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
	msgs := res["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)
	var contents []string
	for _, m := range msgs {
		contents = append(contents, fmt.Sprint(m.(map[string]any)["content"]))
	}
	if len(contents) != 4 || contents[0] != big || !strings.Contains(contents[1], big) || contents[2] != "after" {
		t.Fatalf("after restart: %d messages of %v bytes", len(contents), lens(contents))
	}
	res = b.command(t, "big.thread é", 2, "state.listCheckpoints", map[string]any{})
	if cps := res["result"].(map[string]any)["checkpoints"].([]any); len(cps) < 4 {
		t.Fatalf("checkpoints after restart: %v", cps)
	}
	// The conversation goes on from the stored state.
	b.runToEnd(t, "big.thread é", "echo", user("again"), nil)
	res = b.command(t, "big.thread é", 3, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
	if n := len(res["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)); n != 6 {
		t.Fatalf("after a run on the restored thread: %d messages", n)
	}
}

func lens(ss []string) []int {
	out := make([]int, len(ss))
	for i, s := range ss {
		out[i] = len(s)
	}
	return out
}

// startStore starts an embedded NATS server with JetStream in a temporary
// folder and returns the bridge's thread store on it.
func startStore(t testing.TB) canonical.ThreadStore {
	store, _ := startFabric(t)
	return store
}

// startFabric starts an embedded NATS server with JetStream in a temporary
// folder and returns the thread store on it and a function that opens
// another connection to it (one per instance).
func startFabric(t testing.TB) (canonical.ThreadStore, func() *nats.Conn) {
	store, connect, _ := startFabricAt(t, t.TempDir())
	return store, connect
}

// startFabricAt is startFabric on dir; stop shuts the server down (as the
// test's end does).
func startFabricAt(t testing.TB, dir string) (store canonical.ThreadStore, connect func() *nats.Conn, stop func()) {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{JetStream: true, StoreDir: dir, DontListen: true, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(wait) {
		t.Fatal("nats not ready")
	}
	var conns []*nats.Conn
	connect = func() *nats.Conn {
		nc, err := nats.Connect("", nats.InProcessServer(ns))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		return nc
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, c := range conns {
				c.Close()
			}
			ns.Shutdown()
			ns.WaitForShutdown()
		})
	}
	t.Cleanup(stop)
	store, err = bridge.OpenThreadStore(context.Background(), connect(), bridge.NATSConfig{ThreadTTL: time.Hour, ThreadMaxBytes: 1 << 30}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return store, connect, stop
}

// A checkpoint's values leave memory once it is in the store (kept, every
// checkpoint's copy of the whole state grew memory with the square of the
// turns), and a fork reads them back: here on an instance that loaded the
// thread from the store, whose checkpoints hold no values at all.
func TestForkReadsCheckpointFromStore(t *testing.T) {
	dir := t.TempDir()
	br, stop := startBridge(t, bridgeOpts{dir: dir})
	a := newServer(t, agent.Config{Runner: br})
	a.runToEnd(t, "fork.thread", "echo", user("first"), nil)
	res := a.command(t, "fork.thread", 1, "state.listCheckpoints", map[string]any{})
	cps := res["result"].(map[string]any)["checkpoints"].([]any)
	a.runToEnd(t, "fork.thread", "echo", user("second"), nil)
	a.fe.Shutdown()
	a.fe.Close()
	stop()

	br, _ = startBridge(t, bridgeOpts{dir: dir})
	b := newServer(t, agent.Config{Runner: br})
	after := cps[0].(map[string]any)["checkpoint_id"] // the newest checkpoint of the first turn
	if after == nil {
		after = cps[0].(map[string]any)["id"]
	}
	res = b.command(t, "fork.thread", 2, "state.fork", map[string]any{"checkpoint_id": after})
	if res["type"] != "success" {
		t.Fatalf("fork: %v", res)
	}
	b.awaitEnd(t, "fork.thread", uint64(res["meta"].(map[string]any)["applied_through_seq"].(float64)))
	res = b.command(t, "fork.thread", 3, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
	msgs := res["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)
	var contents []string
	for _, m := range msgs {
		contents = append(contents, fmt.Sprint(m.(map[string]any)["content"]))
	}
	// The first turn (the user's "first" and its echo), then the forked
	// run's answer to that state; nothing of the second turn.
	if strings.Join(contents, "|") != "first|first|first" {
		t.Fatalf("after the fork from the first turn: %q", contents)
	}
}

// TestWebSocketOutlivesItsHandler: an upgraded thread socket is served
// past its HTTP handler, which returns once the upgrade is answered, so
// an idle socket holds neither net/http's request buffers nor the
// handler's stack (see wsconn.Upgrade); the socket still works and still
// carries the caller's request values.
func TestWebSocketOutlivesItsHandler(t *testing.T) {
	s := newServer(t, agent.Config{})
	before := httpHandlers()
	w := s.dialWS(t, "outlive")
	deadline := time.Now().Add(5 * time.Second)
	for httpHandlers() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := httpHandlers(); n > before {
		t.Fatalf("%d net/http handlers run with one idle WebSocket open (%d before)", n, before)
	}
	w.send(map[string]any{"id": 1, "method": "run.start", "params": map[string]any{"assistant_id": "echo", "input": user("hi")}})
	if m := w.response(1); m["type"] != "success" {
		t.Fatalf("run.start on the socket: %v", m)
	}
}

// httpHandlers counts the goroutines inside a net/http handler.
func httpHandlers() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "net/http.serverHandler.ServeHTTP")
}

// A state past the runtime's inline bound (256 KiB) reaches a subscriber
// whole: its values frames carry the state read back from the checkpoint
// records the events name, the last one every message of the run.
func TestLargeValuesReachSubscribersWhole(t *testing.T) {
	s := newServer(t, agent.Config{})
	big := strings.Repeat(strings.Repeat("abcdefghij", 1000)+" ", 30) // 300 KB, in 30 deltas
	st := s.openSSE(t, "large-values", `{"channels":["values","lifecycle"]}`, nil)
	s.runStart(t, "large-values", "echo", user(big), nil)
	var last envelope
	values := 0
	for _, e := range st.untilTerminal() {
		if e.Method == "values" {
			last = e
			values++
		}
	}
	var state struct {
		Messages []struct {
			Type    string `json:"type"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(last.Params.Data, &state); err != nil {
		t.Fatalf("last values frame's data (%d bytes) does not decode: %v", len(last.Params.Data), err)
	}
	if values != 2 || len(state.Messages) != 2 || state.Messages[0].Content != big || !strings.Contains(state.Messages[1].Content, strings.TrimSpace(big)) {
		t.Fatalf("%d values frames; the last holds %d messages of %v bytes; want 2 frames, the human message and its echo whole", values, len(state.Messages), len(last.Params.Data))
	}
}

// A run's events reach its readers whole when they come faster than the
// replay log takes them: the agent frontend's readers have no copy but the
// log's, so the run waits for room in the bounded publish queue (as a run
// owned for another instance does) rather than have events dropped from it
// (a run of 3,000 unpaced deltas through a queue of 8 lost events, and its
// reader got data_loss).
func TestRunWaitsForTheReplayLog(t *testing.T) {
	br, _ := startBridge(t, bridgeOpts{publishQueue: 8})
	s := newServer(t, agent.Config{Runner: br})
	st := s.openSSE(t, "flood", `{"channels":["messages","lifecycle"]}`, nil)
	s.runStart(t, "flood", "stream", user("go"), map[string]any{"deltas": 3000})
	deltas := 0
	for {
		e := st.envelope()
		if e.Type != "event" {
			t.Fatalf("after %d deltas: %s %s", deltas, e.Error, e.Message)
		}
		if e.Method == "messages" && strings.Contains(string(e.Params.Data), `"content-block-delta"`) {
			deltas++
		}
		if e.rootTerminal() {
			if e.status() != "completed" || deltas != 3000 {
				t.Fatalf("run ended %s after %d deltas, want completed after 3000", e.status(), deltas)
			}
			return
		}
	}
}
