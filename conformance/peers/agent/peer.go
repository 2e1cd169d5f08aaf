package agentpeer

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

//go:embed testdata/*.jsonl
var scriptFS embed.FS

// Timestamp is the fixed timestamp of every event, so transcripts compare.
const Timestamp = 1710000000000

// Line is one script line: an event (Method and Params), or a pause.
type Line struct {
	// Method and Params are the event; the peer adds type, seq, event_id
	// and timestamp (Params holds namespace, node and data).
	Method string     `json:"method,omitempty"`
	Params json.Value `json:"params,omitzero"`
	// Pause "cancel" waits for the run's cancellation.
	Pause string `json:"pause,omitempty"`
	// DelayMs is slept before the line; a cancellation ends the wait.
	DelayMs int `json:"delay_ms,omitzero"`
}

// readOptions read scripts, commands and frames as encoding/json did:
// names match ignoring case, of duplicates the last wins, invalid UTF-8
// becomes U+FFFD (a Value keeps its bytes), a value of the wrong type does
// not stop the rest, errors are worded as it worded them.
var readOptions = json.JoinOptions(json.MatchCaseInsensitiveNames(true), json.MatchCaseSensitiveDelimiter(true),
	json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true), json.ReportErrorsWithLegacySemantics(true))

// writeOptions write the peer's frames as they always were (the agent
// adapter's transcripts): encoding/json's form, map keys sorted (appendLocked
// also counts on "node" preceding "timestamp"), <, >, &, U+2028 and U+2029
// escaped, in event data too, whose strings are otherwise kept as spelled,
// nil as null.
var writeOptions = json.JoinOptions(json.Deterministic(true), json.EscapeForHTML(true), json.EscapeForJS(true),
	json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true),
	json.PreserveRawStrings(true), json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

// Refusal is a run.start error response: an ErrorCode and a message.
type Refusal struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Script is what runs of one assistant play.
type Script struct {
	// Lines are played in order.
	Lines []Line
	// Refusal, when set, answers run.start with it instead of starting a
	// run.
	Refusal *Refusal
	// Input, when not empty, is the text the run.start input's last
	// message must carry (input.messages[-1].content, a string or text
	// content blocks); another input is refused with invalid_argument.
	Input string
	// WriteBytes cuts each SSE frame of a thread running this assistant
	// into writes of at most this many bytes, each flushed (0: whole
	// frames).
	WriteBytes int
}

// Config configures a Peer.
type Config struct {
	// Scripts are played by assistant_id, besides the embedded testdata
	// scripts (a name in both plays this one). "<assistant>.resume" is
	// played by a resumed run.
	Scripts map[string]Script
	// Heartbeat, when positive, is how often an SSE stream writes a
	// ": heartbeat" comment, as LangGraph Platform writes one about every
	// 5 s. 0: none.
	Heartbeat time.Duration
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
	scripts map[string]Script

	cancelled chan string // assistants of cancelled runs

	mu      sync.Mutex
	threads map[string]*thread
	cancels []string
	nextRun int

	ctx    context.Context // cancelled by Close: runs and streams end
	cancel context.CancelFunc
	wg     sync.WaitGroup

	heartbeat time.Duration
	hushed    atomic.Bool // Hush: streams write nothing more
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
func New() (*Peer, error) { return NewWithConfig(Config{}) }

// NewWithConfig loads the embedded scripts and adds cfg's.
func NewWithConfig(cfg Config) (*Peer, error) {
	p := &Peer{scripts: map[string]Script{}, threads: map[string]*thread{}, cancelled: make(chan string, 64)}
	entries, err := scriptFS.ReadDir("testdata")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		data, err := scriptFS.ReadFile("testdata/" + e.Name())
		if err != nil {
			return nil, err
		}
		var lines []Line
		for i, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			var ln Line
			if err := json.Unmarshal(l, &ln, readOptions); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", e.Name(), i+1, err)
			}
			lines = append(lines, ln)
		}
		p.scripts[strings.TrimSuffix(e.Name(), ".jsonl")] = Script{Lines: lines}
	}
	for name, sc := range cfg.Scripts {
		for i, l := range sc.Lines {
			if l.Method == "" && l.Pause == "" {
				return nil, fmt.Errorf("script %s, line %d: neither a method nor a pause", name, i+1)
			}
			if l.Pause != "" && l.Pause != "cancel" {
				return nil, fmt.Errorf("script %s, line %d: pause %q is not \"cancel\"", name, i+1, l.Pause)
			}
		}
		p.scripts[name] = sc
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.heartbeat = cfg.Heartbeat
	return p, nil
}

// Hush makes every stream write nothing more, heartbeats included, while
// its connection stays open: a server that hangs.
func (p *Peer) Hush() { p.hushed.Store(true) }

// Script returns a script's lines as wire events without envelopes, for
// tests that compare what a client decoded with what was sent.
func (p *Peer) Script(name string) []json.Value {
	var out []json.Value
	for _, l := range p.scripts[name].Lines {
		if l.Method != "" {
			b, _ := json.Marshal(map[string]any{"method": l.Method, "params": l.Params}, writeOptions)
			out = append(out, b)
		}
	}
	return out
}

// Cancelled receives the assistant_id of each run cancelled (a report is
// dropped when 64 are pending).
func (p *Peer) Cancelled() <-chan string { return p.cancelled }

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
func (t *thread) appendLocked(method string, params json.Value) {
	t.seq++
	var pr struct {
		Namespace []string   `json:"namespace"`
		Node      string     `json:"node,omitempty"`
		Data      json.Value `json:"data"`
	}
	_ = json.Unmarshal(params, &pr, readOptions)
	if pr.Namespace == nil {
		pr.Namespace = []string{}
	}
	var custom struct {
		Name string `json:"name"`
	}
	if method == "custom" {
		_ = json.Unmarshal(pr.Data, &custom, readOptions)
	}
	frame, _ := json.Marshal(map[string]any{
		"type": "event", "event_id": strconv.FormatUint(t.seq, 10), "seq": t.seq, "method": method,
		"params": map[string]any{"namespace": pr.Namespace, "timestamp": Timestamp, "node": pr.Node, "data": pr.Data},
	}, writeOptions)
	if pr.Node == "" { // node only when there is one
		frame = bytes.Replace(frame, []byte(`"node":"",`), nil, 1)
	}
	t.events = append(t.events, event{seq: t.seq, method: method, custom: custom.Name, frame: frame})
	close(t.wake)
	t.wake = make(chan struct{})
}

// cancelledLifecycle ends a cancelled run.
const cancelledLifecycle = `{"namespace":[],"data":{"event":"failed","error":"cancelled: cancelled by client"}}`

// play runs a script on a thread: the owner goroutine of one run. A
// cancellation (at a pause, during a delay, or between lines) ends the run
// with a failed lifecycle event whose error starts "cancelled: ".
func (p *Peer) play(ctx context.Context, t *thread, run string, lines []Line) {
	defer p.wg.Done()
	cut := false // the run was cancelled before its end
	for i, l := range lines {
		if l.DelayMs > 0 && !sleep(ctx, time.Duration(l.DelayMs)*time.Millisecond) {
			cut = true
			break
		}
		if l.Pause == "cancel" {
			<-ctx.Done()
			cut = true
			break
		}
		if ctx.Err() != nil {
			cut = true
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
			_ = json.Unmarshal(l.Params, &d, readOptions)
			t.interrupts = append(t.interrupts, d.Data.InterruptID)
		}
		if l.Method == "lifecycle" && bytes.Contains(l.Params, []byte(`"namespace":[]`)) && bytes.Contains(l.Params, []byte(`"interrupted"`)) {
			t.interrupted = true
		}
		if i == len(lines)-1 {
			// The run is over when its last event can be read: a client
			// that starts the next run on seeing it must not be refused.
			t.endLocked(run)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	if cut {
		t.appendLocked("lifecycle", json.Value(cancelledLifecycle))
	}
	t.endLocked(run) // (a next run may be active already: it stays)
	p.mu.Unlock()
}

// endLocked marks run, if it is the thread's active run, as over.
func (t *thread) endLocked(run string) {
	if t.active == run {
		t.active, t.cancelRun = "", nil
	}
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type command struct {
	ID     *uint64               `json:"id"`
	Method string                `json:"method"`
	Params map[string]json.Value `json:"params"`
}

func success(id uint64, result any, applied uint64) []byte {
	b, _ := json.Marshal(map[string]any{"type": "success", "id": id, "result": result, "meta": map[string]any{"applied_through_seq": applied}}, writeOptions)
	return b
}

func failure(id any, code, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "id": id, "error": code, "message": msg}, writeOptions)
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
		_ = json.Unmarshal(c.Params[k], &s, readOptions)
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
		if script.Refusal != nil {
			return failure(id, script.Refusal.Code, script.Refusal.Message)
		}
		if script.Input != "" {
			if got := lastMessageText(input); got != script.Input {
				return failure(id, "invalid_argument", fmt.Sprintf("run.start input: the last message says %.200q, want %.200q", got, script.Input))
			}
		}
		if t.active != "" {
			return failure(id, "invalid_argument", "the thread has an active run")
		}
		t.assistant = assistant
		return success(id, map[string]any{"run_id": p.startLocked(t, script.Lines)}, applied)
	case "input.respond":
		ids := []string{str("interrupt_id")}
		if raw, ok := c.Params["responses"]; ok {
			var rs []struct {
				InterruptID string `json:"interrupt_id"`
			}
			_ = json.Unmarshal(raw, &rs, readOptions)
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
	script := p.scripts[t.assistant+".resume"].Lines
	ids, _ := json.Marshal(answered, writeOptions)
	t.appendLocked("input.answered", json.Value(`{"namespace":[],"data":{"interrupt_ids":`+string(ids)+`}}`))
	t.interrupted, t.interrupts = false, nil
	return success(id, map[string]any{"run_id": p.startLocked(t, script)}, applied)
}

func (p *Peer) startLocked(t *thread, script []Line) string {
	p.nextRun++
	run := "peer-run-" + strconv.Itoa(p.nextRun)
	ctx, cancel := context.WithCancel(p.ctx)
	t.active, t.cancelRun = run, cancel
	p.wg.Add(1)
	go p.play(ctx, t, run, script)
	return run
}

// lastMessageText is the text of input.messages' last message: its
// content string, or its text content blocks joined.
func lastMessageText(input json.Value) string {
	var in struct {
		Messages []struct {
			Content json.Value `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(input, &in, readOptions) != nil || len(in.Messages) == 0 {
		return ""
	}
	raw := in.Messages[len(in.Messages)-1].Content
	var s string
	if json.Unmarshal(raw, &s, readOptions) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks, readOptions)
	var sb strings.Builder
	for _, b := range blocks {
		if b.Type == "text" {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

func readCommand(body []byte) (*command, []byte) {
	var c command
	if json.Unmarshal(body, &c, readOptions) != nil {
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
	select {
	case p.cancelled <- t.assistant:
	default:
	}
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
// send fails or ctx ends; beat, when not nil, is called every
// Config.Heartbeat. A hushed peer delivers nothing more.
func (p *Peer) follow(ctx context.Context, t *thread, after uint64, channels []string, send func([]byte) error, beat func() error) {
	var tick <-chan time.Time
	if beat != nil && p.heartbeat > 0 {
		tk := time.NewTicker(p.heartbeat)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		if p.hushed.Load() {
			select { // a hung server: nothing more until the stream ends
			case <-ctx.Done():
			case <-p.ctx.Done():
			}
			return
		}
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
		case <-tick:
			if !p.hushed.Load() && beat() != nil {
				return
			}
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
	// The body's first value, as encoding/json's Decoder read it.
	if err := json.UnmarshalDecode(json.NewDecoder(r.Body, readOptions), &req, readOptions); err != nil || len(req.Channels) == 0 {
		http.Error(w, `{"error":"invalid_argument","message":"channels"}`, 400)
		return
	}
	t := p.thread(r.PathValue("thread_id"))
	p.mu.Lock()
	size := p.scripts[t.assistant].WriteBytes
	p.mu.Unlock()
	if size > 0 {
		w = &splitWriter{ResponseWriter: w, size: size}
	}
	sw, err := sse.NewWriter(w)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	sse.SetHeaders(w.Header())
	w.WriteHeader(200)
	_ = http.NewResponseController(w).Flush()
	p.follow(r.Context(), t, req.Since, req.Channels, func(f []byte) error {
		var env struct {
			EventID string `json:"event_id"`
			Method  string `json:"method"`
		}
		_ = json.Unmarshal(f, &env, readOptions)
		return sw.Event(env.EventID, env.Method, f)
	}, func() error { return sw.Comment("heartbeat") })
}

// splitWriter cuts every write into writes of at most size bytes, each
// flushed: an upstream whose frames arrive in pieces (a rune may be cut).
type splitWriter struct {
	http.ResponseWriter
	size int
}

func (s *splitWriter) Write(b []byte) (int, error) {
	rc := http.NewResponseController(s.ResponseWriter)
	n := 0
	for len(b) > 0 {
		k := min(len(b), s.size)
		m, err := s.ResponseWriter.Write(b[:k])
		n += m
		if err != nil {
			return n, err
		}
		if err := rc.Flush(); err != nil {
			return n, err
		}
		b = b[k:]
	}
	return n, nil
}

// Flush implements http.Flusher.
func (s *splitWriter) Flush() { _ = http.NewResponseController(s.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the server's writer.
func (s *splitWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

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
		_ = json.Unmarshal(cmd.Params["channels"], &channels, readOptions)
		t := p.thread(threadID)
		p.mu.Lock()
		applied := t.seq
		p.mu.Unlock()
		sendMu.Lock()
		_ = c.SendText(success(*cmd.ID, map[string]any{"subscription_id": path.Join("peer-sub", strconv.FormatUint(*cmd.ID, 10))}, applied))
		wg.Add(1)
		go func() { // the subscription's owner: exits when the socket ends
			defer wg.Done()
			p.follow(ctx, t, 0, channels, send, nil)
		}()
		sendMu.Unlock()
	}
}
