// Package agentpeer is a reference LangChain agent-protocol thread server
// for testing clients of the protocol (Interlingua's agent backend): it
// plays scripted runs (testdata/<assistant_id>.jsonl, one event per line)
// over the protocol's transports, written from the reference
// (/work/shared/reference/agent-protocol.md) independently of the adapter
// it tests.
//
// It serves, with snake_case keys:
//
//   - POST /threads/{thread_id}/commands: run.start (a new run, or a resume
//     when the thread is interrupted and input is not null), input.respond,
//     state.get; other methods are unknown_command. Responses carry
//     meta.applied_through_seq, the thread's seq before the command.
//   - POST /threads/{thread_id}/stream/events (and /stream): SSE, filtered by
//     channels, replaying buffered events with seq > since, then live.
//   - GET on the same paths: a WebSocket taking the same commands plus
//     subscription.subscribe, whose replay follows its response.
//   - POST /threads/{thread_id}/runs/{run_id}/cancel: cancels the run
//     (LangGraph's REST endpoint); Cancels lists the runs cancelled.
//
// A script line is {"method": ..., "params": {"namespace", "node"?, "data"}}
// (the peer adds type, seq, event_id and timestamp), or {"pause":"cancel"},
// which waits for the run's cancellation and ends it with a failed
// lifecycle event ("cancelled: ..."). A resumed run plays
// <assistant>.resume.jsonl after an input.answered event.
package agentpeer

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

//go:embed testdata/*.jsonl
var scriptFS embed.FS

// Timestamp is the fixed timestamp of every event, so transcripts compare.
const Timestamp = 1710000000000

// line is one script line.
type line struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Pause  string          `json:"pause"`
}

// event is one buffered event.
type event struct {
	seq    uint64
	method string
	custom string
	frame  []byte
}

// Peer is the server. Create it with New, serve Handler, and Close it.
type Peer struct {
	scripts map[string][]line

	mu      sync.Mutex
	threads map[string]*thread
	cancels []string
	nextRun int

	ctx    context.Context // cancelled by Close: runs and streams end
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type thread struct {
	seq         uint64
	events      []event
	wake        chan struct{} // closed and replaced on every append
	interrupts  []string
	assistant   string
	active      string
	cancelRun   context.CancelFunc
	interrupted bool
}

// New loads the embedded scripts.
func New() (*Peer, error) {
	p := &Peer{scripts: map[string][]line{}, threads: map[string]*thread{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	entries, err := scriptFS.ReadDir("testdata")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		data, err := scriptFS.ReadFile("testdata/" + e.Name())
		if err != nil {
			return nil, err
		}
		var lines []line
		for i, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			var ln line
			if err := json.Unmarshal(l, &ln); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", e.Name(), i+1, err)
			}
			lines = append(lines, ln)
		}
		p.scripts[strings.TrimSuffix(e.Name(), ".jsonl")] = lines
	}
	return p, nil
}

// Script returns a script's lines as wire events without envelopes, for
// tests that compare what a client decoded with what was sent.
func (p *Peer) Script(name string) []json.RawMessage {
	var out []json.RawMessage
	for _, l := range p.scripts[name] {
		if l.Method != "" {
			b, _ := json.Marshal(map[string]any{"method": l.Method, "params": l.Params})
			out = append(out, b)
		}
	}
	return out
}

// Cancels returns the run ids cancelled so far.
func (p *Peer) Cancels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.cancels)
}

// Close ends every run and stream and waits for the runs.
func (p *Peer) Close() {
	p.cancel()
	p.wg.Wait()
}

// Handler returns the peer's routes.
func (p *Peer) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, s := range []string{"/threads/{thread_id}/stream", "/threads/{thread_id}/stream/events"} {
		mux.HandleFunc("POST "+s, p.serveSSE)
		mux.HandleFunc("GET "+s, p.serveWS)
	}
	mux.HandleFunc("POST /threads/{thread_id}/commands", p.serveCommands)
	mux.HandleFunc("POST /threads/{thread_id}/runs/{run_id}/cancel", p.serveCancel)
	return mux
}

func (p *Peer) thread(id string) *thread {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.threads[id]
	if t == nil {
		t = &thread{wake: make(chan struct{})}
		p.threads[id] = t
	}
	return t
}

// appendLocked adds an event to t; p.mu is held.
func (t *thread) appendLocked(method string, params json.RawMessage) {
	t.seq++
	var pr struct {
		Namespace []string        `json:"namespace"`
		Node      string          `json:"node,omitempty"`
		Data      json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(params, &pr)
	if pr.Namespace == nil {
		pr.Namespace = []string{}
	}
	var custom struct{ Name string }
	if method == "custom" {
		_ = json.Unmarshal(pr.Data, &custom)
	}
	frame, _ := json.Marshal(map[string]any{
		"type": "event", "event_id": strconv.FormatUint(t.seq, 10), "seq": t.seq, "method": method,
		"params": map[string]any{"namespace": pr.Namespace, "timestamp": Timestamp, "node": pr.Node, "data": pr.Data},
	})
	if pr.Node == "" { // node only when there is one
		frame = bytes.Replace(frame, []byte(`"node":"",`), nil, 1)
	}
	t.events = append(t.events, event{seq: t.seq, method: method, custom: custom.Name, frame: frame})
	close(t.wake)
	t.wake = make(chan struct{})
}

// play runs a script on a thread: the owner goroutine of one run.
func (p *Peer) play(ctx context.Context, t *thread, run string, lines []line) {
	defer p.wg.Done()
	for _, l := range lines {
		if l.Pause == "cancel" {
			<-ctx.Done()
			p.mu.Lock()
			t.appendLocked("lifecycle", json.RawMessage(`{"namespace":[],"data":{"event":"failed","error":"cancelled: cancelled by client"}}`))
			p.mu.Unlock()
			break
		}
		p.mu.Lock()
		t.appendLocked(l.Method, l.Params)
		if l.Method == "input.requested" {
			var d struct {
				Data struct {
					InterruptID string `json:"interrupt_id"`
				} `json:"data"`
			}
			_ = json.Unmarshal(l.Params, &d)
			t.interrupts = append(t.interrupts, d.Data.InterruptID)
		}
		if l.Method == "lifecycle" && bytes.Contains(l.Params, []byte(`"namespace":[]`)) && bytes.Contains(l.Params, []byte(`"interrupted"`)) {
			t.interrupted = true
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	if t.active == run {
		t.active, t.cancelRun = "", nil
	}
	p.mu.Unlock()
}

type command struct {
	ID     *uint64                    `json:"id"`
	Method string                     `json:"method"`
	Params map[string]json.RawMessage `json:"params"`
}

func success(id uint64, result any, applied uint64) []byte {
	b, _ := json.Marshal(map[string]any{"type": "success", "id": id, "result": result, "meta": map[string]any{"applied_through_seq": applied}})
	return b
}

func failure(id any, code, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "id": id, "error": code, "message": msg})
	return b
}

// execute runs a command on a thread and returns the response frame.
func (p *Peer) execute(threadID string, c *command) []byte {
	t := p.thread(threadID)
	p.mu.Lock()
	defer p.mu.Unlock()
	applied := t.seq
	id := *c.ID
	var str = func(k string) string {
		var s string
		_ = json.Unmarshal(c.Params[k], &s)
		return s
	}
	switch c.Method {
	case "run.start":
		assistant := str("assistant_id")
		if assistant == "" {
			return failure(id, "invalid_argument", "run.start requires an assistant_id.")
		}
		input := bytes.TrimSpace(c.Params["input"])
		if t.interrupted && len(input) > 0 && string(input) != "null" {
			return p.resumeLocked(t, id, applied, t.interrupts)
		}
		script, ok := p.scripts[assistant]
		if !ok {
			return failure(id, "invalid_argument", fmt.Sprintf("unknown assistant_id %q", assistant))
		}
		if t.active != "" {
			return failure(id, "invalid_argument", "the thread has an active run")
		}
		t.assistant = assistant
		return success(id, map[string]any{"run_id": p.startLocked(t, script)}, applied)
	case "input.respond":
		ids := []string{str("interrupt_id")}
		if raw, ok := c.Params["responses"]; ok {
			var rs []struct {
				InterruptID string `json:"interrupt_id"`
			}
			_ = json.Unmarshal(raw, &rs)
			ids = ids[:0]
			for _, r := range rs {
				ids = append(ids, r.InterruptID)
			}
		}
		if !t.interrupted {
			return failure(id, "invalid_argument", "the run is not interrupted")
		}
		for _, x := range ids {
			if !slices.Contains(t.interrupts, x) {
				return failure(id, "no_such_interrupt", fmt.Sprintf("no interrupt %q", x))
			}
		}
		return p.resumeLocked(t, id, applied, ids)
	case "state.get":
		return success(id, map[string]any{"values": map[string]any{}}, applied)
	}
	return failure(id, "unknown_command", "Unknown protocol command: "+c.Method)
}

// resumeLocked starts the resume script of the thread's assistant.
func (p *Peer) resumeLocked(t *thread, id, applied uint64, answered []string) []byte {
	script := p.scripts[t.assistant+".resume"]
	ids, _ := json.Marshal(answered)
	t.appendLocked("input.answered", json.RawMessage(`{"namespace":[],"data":{"interrupt_ids":`+string(ids)+`}}`))
	t.interrupted, t.interrupts = false, nil
	return success(id, map[string]any{"run_id": p.startLocked(t, script)}, applied)
}

func (p *Peer) startLocked(t *thread, script []line) string {
	p.nextRun++
	run := "peer-run-" + strconv.Itoa(p.nextRun)
	ctx, cancel := context.WithCancel(p.ctx)
	t.active, t.cancelRun = run, cancel
	p.wg.Add(1)
	go p.play(ctx, t, run, script)
	return run
}

func readCommand(body []byte) (*command, []byte) {
	var c command
	if json.Unmarshal(body, &c) != nil {
		return nil, failure(nil, "invalid_argument", "Protocol commands must be valid JSON.")
	}
	if c.ID == nil || c.Method == "" {
		return nil, failure(nil, "invalid_argument", "Protocol commands must include an integer id and string method.")
	}
	return &c, nil
}

func (p *Peer) serveCommands(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, `{"error":"invalid_argument","message":"body"}`, 400)
		return
	}
	c, bad := readCommand(body)
	w.Header().Set("Content-Type", "application/json")
	if bad != nil {
		w.WriteHeader(400)
		_, _ = w.Write(bad)
		return
	}
	_, _ = w.Write(p.execute(r.PathValue("thread_id"), c))
}

func (p *Peer) serveCancel(w http.ResponseWriter, r *http.Request) {
	t := p.thread(r.PathValue("thread_id"))
	run := r.PathValue("run_id")
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.active != run || t.cancelRun == nil {
		http.Error(w, `{"error":"no_such_run","message":"no active run"}`, 404)
		return
	}
	t.cancelRun()
	p.cancels = append(p.cancels, run)
	w.WriteHeader(http.StatusNoContent)
}

// matches is the channel filter (namespaces are not filtered: the peer's
// clients ask for every namespace).
func matches(channels []string, e *event) bool {
	ch := e.method
	switch e.method {
	case "input.requested", "input.answered":
		ch = "input"
	}
	for _, c := range channels {
		if c == ch || (e.method == "custom" && e.custom != "" && c == "custom:"+e.custom) {
			return true
		}
	}
	return false
}

// follow delivers the thread's events with seq > after that match, until
// send fails or ctx ends.
func (p *Peer) follow(ctx context.Context, t *thread, after uint64, channels []string, send func([]byte) error) {
	for {
		p.mu.Lock()
		var batch [][]byte
		for _, e := range t.events {
			if e.seq > after && matches(channels, &e) {
				batch = append(batch, e.frame)
			}
		}
		after = t.seq
		wake := t.wake
		p.mu.Unlock()
		for _, f := range batch {
			if send(f) != nil {
				return
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		case <-p.ctx.Done():
			return
		}
	}
}

func (p *Peer) serveSSE(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Channels []string `json:"channels"`
		Since    uint64   `json:"since"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Channels) == 0 {
		http.Error(w, `{"error":"invalid_argument","message":"channels"}`, 400)
		return
	}
	sw, err := sse.NewWriter(w)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	t := p.thread(r.PathValue("thread_id"))
	sse.SetHeaders(w.Header())
	w.WriteHeader(200)
	_ = http.NewResponseController(w).Flush()
	p.follow(r.Context(), t, req.Since, req.Channels, func(f []byte) error {
		var env struct {
			EventID string `json:"event_id"`
			Method  string `json:"method"`
		}
		_ = json.Unmarshal(f, &env)
		return sw.Event(env.EventID, env.Method, f)
	})
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (p *Peer) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := wsconn.New(ws, wsconn.Config{SendQueue: 4096, CloseGrace: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	var wg sync.WaitGroup
	defer func() {
		cancel()
		_ = c.Close(wsconn.CloseGoingAway, "")
		wg.Wait()
	}()
	threadID := r.PathValue("thread_id")
	var sendMu sync.Mutex // a subscribe's response precedes its replay
	send := func(f []byte) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return c.SendText(f)
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		cmd, bad := readCommand(data)
		if bad != nil {
			_ = send(bad)
			continue
		}
		if cmd.Method != "subscription.subscribe" {
			_ = send(p.execute(threadID, cmd))
			continue
		}
		var channels []string
		_ = json.Unmarshal(cmd.Params["channels"], &channels)
		t := p.thread(threadID)
		p.mu.Lock()
		applied := t.seq
		p.mu.Unlock()
		sendMu.Lock()
		_ = c.SendText(success(*cmd.ID, map[string]any{"subscription_id": path.Join("peer-sub", strconv.FormatUint(*cmd.ID, 10))}, applied))
		wg.Add(1)
		go func() { // the subscription's owner: exits when the socket ends
			defer wg.Done()
			p.follow(ctx, t, 0, channels, send)
		}()
		sendMu.Unlock()
	}
}
