package agent

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/tracing"
	"github.com/interlingua-dev/interlingua/internal/wiretap"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
	"github.com/interlingua-dev/interlingua/protocol"
)

// BackendConfig configures a client of an upstream agent-protocol thread
// server (LangGraph Platform, langgraph-api, aegra, or another Interlingua).
type BackendConfig struct {
	// URL is the server's base URL (http or https); required.
	URL string `yaml:"url"`
	// AssistantID is the upstream assistant every run starts; default: the
	// request's target.
	AssistantID string `yaml:"assistant_id"`
	// Transport is "sse" (commands over HTTP, events over SSE; the default)
	// or "websocket".
	Transport string `yaml:"transport"`
	// Headers are sent with every request (e.g. x-api-key).
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds connecting and each command. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxEventBytes bounds one upstream event (SSE event or WebSocket
	// message). Default 4 MiB.
	MaxEventBytes int `yaml:"max_event_bytes"`
	// MaxPendingEvents bounds the WebSocket frames held while waiting for
	// the subscription's and the run.start answers (the subscription's
	// replay of the upstream's buffer comes then). Default 10,000.
	MaxPendingEvents int `yaml:"max_pending_events"`
	// KeepStreams bounds the threads whose event stream (SSE transport)
	// or socket (WebSocket) stays open after a run ends, for the thread's
	// next run; a goroutine per kept stream reads it meanwhile. Default
	// 256; negative keeps none.
	KeepStreams int `yaml:"keep_streams"`
	// KeepStreamIdle is how long a kept event stream waits for its
	// thread's next run before it is closed. Default 30s.
	KeepStreamIdle time.Duration `yaml:"keep_stream_idle"`
	// HTTPClient makes the HTTP requests. Default: a client without a total
	// timeout (streams are long) on a pool of the backend's own that keeps
	// up to 256 idle connections to the upstream.
	HTTPClient *http.Client `yaml:"-"`
	// Logger receives the backend's records. Default discards.
	Logger *slog.Logger `yaml:"-"`
}

// Validate names every bad field.
func (c BackendConfig) Validate() error {
	var errs []error
	if _, err := protocol.UpstreamURL("url", c.URL, "the agent server's base URL"); err != nil {
		errs = append(errs, err)
	}
	switch c.Transport {
	case "", "sse", "websocket":
	default:
		errs = append(errs, fmt.Errorf("transport: %q is not sse or websocket", c.Transport))
	}
	if c.Timeout < 0 || c.MaxEventBytes < 0 || c.MaxPendingEvents < 0 || c.KeepStreamIdle < 0 {
		errs = append(errs, errors.New("timeout, max_event_bytes, max_pending_events and keep_stream_idle must not be negative (zero is the default)"))
	}
	return errors.Join(errs...)
}

// Backend starts runs on an upstream agent server: it subscribes to the
// thread's events on every channel, then sends run.start (or input.respond
// for a request that resumes interrupts), and decodes the events after the
// command's applied_through_seq into canonical events with their
// namespaces. Subscribed first, it reads a run from its first event however
// fast the run fills the upstream's buffer; subscribed after the answer, it
// asked for events a fast run had already pushed out. Events the upstream
// reports lost (its in-band gap report, resume_gap) or that never come (a
// jump in seqs) fail the run with CodeDataLoss, and any other upstream
// error frame with the upstream's code: a run never completes with a hole.
// Closing a run that has not ended cancels it upstream (POST
// /threads/{id}/runs/{run_id}/cancel, LangGraph's REST endpoint; the
// protocol has no cancel command).
//
// Over SSE a thread's event stream outlives the run that opened it, as the
// SDK's ThreadStream does: the protocol's thread stream never ends (a
// server must not close it when a run ends), so closing it after each run
// cost the thread's next run a new connection and a request before its
// first event. The backend keeps it, up to KeepStreams threads for
// KeepStreamIdle each, and the next run, already subscribed, sends its
// command and reads on. While kept, the stream is read and what comes
// (other clients' runs on the thread) discarded: unread, it held back an
// upstream that waits for its readers, as ours does, until the upstream
// cut it off. The run that takes it stops that first, before its command,
// so none of its events is discarded. A kept stream that ends, fails or
// reports a gap is dropped, and the next run opens another. A new stream
// replays the upstream's buffer, which the decoder skips up to the
// command's seq.
//
// Over a WebSocket the thread's socket is kept the same way (wsSession),
// its subscription with it: LangGraph forgets a thread (its assistant, its
// interrupted run) when one of its sockets closes, so a socket per run
// left input.respond with no run to resume. A resume that finds none
// (no_such_run) is sent again as run.start with the resume value as input.
type Backend struct {
	cfg  BackendConfig
	base string          // URL without a trailing slash
	own  *http.Transport // the pool made when the config has no HTTPClient

	mu     sync.Mutex
	kept   map[string]*eventStream // by thread: open streams between runs
	keptWS map[string]*wsSession   // by thread: open WebSockets between runs
	closed bool
}

// NewBackend returns a backend; it fails on an invalid config.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Transport = cmp.Or(cfg.Transport, "sse")
	cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	cfg.MaxEventBytes = cmp.Or(cfg.MaxEventBytes, 4<<20)
	cfg.MaxPendingEvents = cmp.Or(cfg.MaxPendingEvents, 10_000)
	cfg.KeepStreams = cmp.Or(cfg.KeepStreams, 256)
	cfg.KeepStreamIdle = cmp.Or(cfg.KeepStreamIdle, 30*time.Second)
	var own *http.Transport
	if cfg.HTTPClient == nil {
		own = http.DefaultTransport.(*http.Transport).Clone()
		// Every run holds one connection for its event stream and takes
		// another for its command: keep them for the next runs rather
		// than the default two per host, or a burst of run starts dials
		// (and the upstream accepts) a connection for each.
		own.MaxIdleConns, own.MaxIdleConnsPerHost = 256, 256 // the clone's total is 100
		// The inspector records a captured run's upstream exchange
		// through the wrapper (internal/wiretap); one atomic load while
		// it is off.
		cfg.HTTPClient = &http.Client{Transport: wiretap.Transport(own)}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{cfg: cfg, base: strings.TrimRight(cfg.URL, "/"), own: own}, nil
}

// Close closes the kept event streams and releases the idle upstream
// connections of the backend's own pool. Running runs go on.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	kept, keptWS := b.kept, b.keptWS
	b.kept, b.keptWS = nil, nil
	b.mu.Unlock()
	for _, es := range kept {
		es.idle.Stop()
		es.stopDrain()
		es.close()
	}
	for _, w := range keptWS {
		w.idle.Stop()
		w.close()
	}
	if b.own != nil {
		b.own.CloseIdleConnections()
	}
	return nil
}

// DefaultStallTimeout turns the bridge's per-event stall bound
// (backends.<name>.stall_timeout) off unless configured: a graph's node
// may rightly run for long with no event, while its server shows it is
// alive with ": heartbeat" comments (about every 5 s on LangGraph
// Platform), which no canonical event carries.
func (b *Backend) DefaultStallTimeout() time.Duration { return -1 }

// Start implements canonical.Backend.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	thread := upstreamThread(cmp.Or(req.GetThreadId(), req.GetRunId(), "interlingua-"+nuid.Next()))
	// Only a thread of the client's own can have a next run to keep the
	// stream for (the bridge names a run's thread after the run when the
	// client gave none).
	ownThread := req.GetThreadId() != "" && req.GetThreadId() != req.GetRunId()
	assistant := cmp.Or(b.cfg.AssistantID, req.GetTarget())
	cmd, err := command1(req, assistant)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	s := &upStream{b: b, ctx: runCtx, cancel: cancel, thread: thread, keep: ownThread, resumeStart: resumeByStart(req, assistant),
		tap: wiretap.TapFrom(ctx)}
	if b.cfg.Transport == "websocket" {
		err = s.startWS(cmd)
	} else {
		err = s.startSSE(cmd)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// upstreamThread is the upstream's id for thread: the id itself when it
// is a UUID, else a name-based UUID (version 5, RFC 9562) of it, the same
// for every run of the thread. LangGraph's REST routes (the run cancel
// among them) take only UUID thread ids: a thread named after a run
// ("run-<id>", the bridge's) answered 400 to our cancel.
func upstreamThread(thread string) string {
	if isUUID(thread) {
		return thread
	}
	// The RFC's URL namespace, 6ba7b811-9dad-11d1-80b4-00c04fd430c8.
	ns := [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte("interlingua:thread:" + thread))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // variant 10
	x := hex.EncodeToString(u[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// isUUID reports whether s is a UUID in its hyphenated text form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
			return false
		}
	}
	return true
}

// command1 is the command (id 2) that starts the run: input.respond when
// the request resumes interrupts, else run.start.
func command1(req *canonical.Request, assistant string) ([]byte, error) {
	if len(req.GetResume()) > 0 {
		return json.Marshal(&commandFrame{ID: 2, Method: "input.respond", Params: inputRespond(req)}, wireJSON)
	}
	if assistant == "" {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "agent backend: no assistant_id (set options.assistant_id or a request target)")
	}
	// input.messages is null, not [], when the request holds no text: what
	// the backend has always sent an upstream for such a request.
	return json.Marshal(&commandFrame{ID: 2, Method: "run.start", Params: runStart(req, assistant)}, wireJSON, json.FormatNilSliceAsNull(true))
}

// resumeByStart is the run.start (id 3) that resumes req's interrupts on
// an upstream that has no run bound to the thread for input.respond
// (LangGraph forgets a thread's assistant when the WebSocket that started
// its run closes, and answers no_such_run): run.start with the resume
// value, {interrupt_id: response, ...}, as input, which LangGraph and ours
// take as a resume while the thread has pending interrupts. Nil when req
// does not resume, or asks for a goto (run.start has none).
func resumeByStart(req *canonical.Request, assistant string) []byte {
	if len(req.GetResume()) == 0 || assistant == "" {
		return nil
	}
	if _, ok := req.GetExtensions()["agent.goto"]; ok {
		return nil
	}
	in := map[string]json.Value{}
	for id, v := range req.GetResume() {
		in[id] = appendValue(nil, v)
	}
	b, _ := json.Marshal(&commandFrame{ID: 3, Method: "run.start", Params: &runStartParams{AssistantID: assistant, Input: in}}, wireJSON)
	return b
}

// commandFrame is a Command (section 3.1) the backend sends.
type commandFrame struct {
	ID     uint64 `json:"id"`
	Method string `json:"method"`
	Params any    `json:"params"`
}

// inputRespondParams is input.respond's params: one response's members,
// or several in responses, and the goto the client asked for.
type inputRespondParams struct {
	inputResponse
	Responses []inputResponse `json:"responses,omitzero"`
	Goto      json.Value      `json:"goto,omitzero"`
}

// inputResponse answers one interrupt; response is its value as JSON.
type inputResponse struct {
	Namespace   []string   `json:"namespace,omitzero"`
	InterruptID string     `json:"interrupt_id,omitzero"`
	Response    json.Value `json:"response,omitzero"`
}

// inputRespond is the input.respond params that resume req's interrupts.
func inputRespond(req *canonical.Request) *inputRespondParams {
	var entries []inputResponse
	for id, v := range req.GetResume() {
		entries = append(entries, inputResponse{Namespace: []string{}, InterruptID: id, Response: appendValue(nil, v)})
	}
	p := &inputRespondParams{}
	if len(entries) == 1 {
		p.inputResponse = entries[0]
	} else {
		p.Responses = entries
	}
	if g, ok := req.GetExtensions()["agent.goto"]; ok {
		p.Goto = appendValue(nil, g)
	}
	return p
}

// runStartParams is run.start's params (RunStartParams).
type runStartParams struct {
	AssistantID string `json:"assistant_id"`
	Config      any    `json:"config,omitzero"`
	Input       any    `json:"input"`
	Metadata    any    `json:"metadata,omitzero"`
}

// runInput is the input of a run whose client spoke another protocol.
type runInput struct {
	Messages []runMessage `json:"messages"`
}

type runMessage struct {
	Content string `json:"content"`
	Role    string `json:"role"`
}

// runStart is run.start's params for req. Config, input and metadata are
// the client's own when the frontend was the agent protocol's (extensions
// agent.config, agent.input, agent.metadata), else made from the request:
// its parameters as config.configurable, {"messages": [...]} with one
// {content, role} per text leaf of its inputs, its metadata.
func runStart(req *canonical.Request, assistant string) *runStartParams {
	ext := req.GetExtensions()
	p := &runStartParams{AssistantID: assistant}
	if c, ok := ext["agent.config"]; ok {
		p.Config = json.Value(appendValue(nil, c)) // null too, when the client sent null
	} else if len(req.GetParameters()) > 0 {
		p.Config = map[string]any{"configurable": plainFields(req.GetParameters(), false)}
	}
	if in, ok := ext["agent.input"]; ok {
		p.Input = json.Value(appendValue(nil, in))
	} else {
		var in runInput
		for _, node := range req.GetInputs() {
			for _, leaf := range canonical.Leaves(nil, node.GetNode()) {
				if canonical.IsText(leaf) {
					in.Messages = append(in.Messages, runMessage{Content: string(leaf.GetData()), Role: cmp.Or(leaf.GetRole(), "user")})
				}
			}
		}
		p.Input = &in
	}
	if m, ok := ext["agent.metadata"]; ok {
		p.Metadata = json.Value(appendValue(nil, m))
	} else if md := req.GetMetadata(); len(md) > 0 {
		p.Metadata = md
	}
	return p
}

// eventStream is one open POST /threads/{id}/stream/events. Its decoder
// carries the SSE parser's state from one run of the thread to the next.
type eventStream struct {
	thread string
	body   io.ReadCloser
	sdec   *SSEDecoder
	buf    []byte
	cancel context.CancelFunc // ends the request
	idle   *time.Timer        // while kept: closes it after KeepStreamIdle
	// silence ends the request when a run's read of it waits past the
	// decoder's SilenceLimit (readWatched); silent says it did.
	silence *time.Timer
	silent  atomic.Bool

	// While the stream is kept, a drain goroutine reads it (see drain).
	drainMu  sync.Mutex      // held by the drain while it parses a chunk
	drainGen uint64          // the drain that may discard what it reads; 0: none
	gens     uint64          // drains started
	drainSeq uint64          // the seq of the last event the drain discarded; 0 before one
	carry    chan streamRead // the read a drain made after it was stopped
	carrying bool            // a read is owed on carry: the stream's next read takes it
	drained  chan struct{}   // closed when the last drain started returns
}

// streamRead is one read of an event stream into its buf.
type streamRead struct {
	n   int
	err error
}

// readWatched is a run's read: once the upstream has shown its heartbeat,
// a read that waits past SilenceLimit ends the request (the server keeps
// its connection open but writes nothing: gone, as the official SDK's
// watchdog takes it), and the run fails.
func (es *eventStream) readWatched() (int, error) {
	limit := es.sdec.SilenceLimit()
	if limit == 0 {
		return es.read()
	}
	if es.silence == nil {
		es.silence = time.AfterFunc(limit, func() {
			es.silent.Store(true)
			es.cancel()
		})
	} else {
		es.silence.Reset(limit)
	}
	n, err := es.read()
	es.silence.Stop()
	return n, err
}

// read reads the stream's next chunk into buf: first the read a stopped
// drain made, which is the next one.
func (es *eventStream) read() (int, error) {
	if es.carrying {
		es.carrying = false
		c := <-es.carry
		return c.n, c.err
	}
	return es.body.Read(es.buf)
}

// close ends the request, waits for the last drain to return, and
// closes the body.
func (es *eventStream) close() {
	es.cancel()
	if es.drained != nil {
		<-es.drained
	}
	es.body.Close()
}

// takeStream returns the thread's kept event stream, if any, for a run,
// its drain stopped: nothing the stream brings from now on is discarded.
// A stream the drain found ended or broken is closed, not returned.
func (b *Backend) takeStream(thread string) *eventStream {
	b.mu.Lock()
	es := b.kept[thread]
	if es != nil {
		delete(b.kept, thread)
		es.idle.Stop() // if it fired, expire finds the stream gone
	}
	b.mu.Unlock()
	if es != nil && !es.stopDrain() {
		es.close()
		return nil
	}
	return es
}

// keepStream keeps a stream whose run ended for the thread's next run, or
// closes it when KeepStreams are kept or the thread has one already.
func (b *Backend) keepStream(es *eventStream) {
	b.mu.Lock()
	if b.closed || len(b.kept) >= b.cfg.KeepStreams || b.kept[es.thread] != nil {
		b.mu.Unlock()
		es.close()
		return
	}
	if b.kept == nil {
		b.kept = map[string]*eventStream{}
	}
	b.kept[es.thread] = es
	es.idle = time.AfterFunc(b.cfg.KeepStreamIdle, func() { b.expire(es) })
	b.startDrain(es)
	b.mu.Unlock()
}

// expire closes a kept stream that no run took within KeepStreamIdle.
func (b *Backend) expire(es *eventStream) {
	b.mu.Lock()
	mine := b.kept[es.thread] == es
	if mine {
		delete(b.kept, es.thread)
	}
	b.mu.Unlock()
	if mine {
		es.stopDrain()
		es.close()
	}
}

// dropKept removes a kept stream its drain found ended or broken; false
// when a run took it or it was evicted first (the taker closes it).
func (b *Backend) dropKept(es *eventStream) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := b.kept[es.thread] == es
	if mine {
		delete(b.kept, es.thread)
		es.idle.Stop()
	}
	return mine
}

// startDrain starts the goroutine that reads a kept stream: the upstream
// writes the thread's every event to it, those of other clients' runs
// between ours too, and a stream nobody reads held them back (an upstream
// that waits for its readers, as our frontend does) or filled buffers. The
// drain is the stream's only reader until stopDrain; the run that takes
// the stream then reads on from where the drain's parser left it.
func (b *Backend) startDrain(es *eventStream) {
	if es.carry == nil {
		es.carry = make(chan streamRead, 1)
	}
	es.drainMu.Lock()
	es.gens++
	gen := es.gens
	es.drainGen, es.drainSeq = gen, 0
	carried := es.carrying // the read a drain stopped earlier made: this one's first
	es.carrying = false
	es.drainMu.Unlock()
	done := make(chan struct{})
	es.drained = done
	go b.drain(es, gen, carried, done)
}

// stopDrain stops the stream's drain between two chunks: when it returns,
// the drain discards nothing more, and the read it may be blocked in is
// owed to the stream's next reader (read). False when the drain had
// stopped itself: the stream ended or broke while kept.
func (es *eventStream) stopDrain() bool {
	es.drainMu.Lock()
	defer es.drainMu.Unlock()
	if es.drainGen == 0 {
		return false
	}
	es.drainGen = 0
	es.carrying = true
	return true
}

// drain (drain gen of es) reads and discards the kept stream's events
// through the stream's own parser, so the stream is handed over at the
// point the drain's last chunk left it (an event it holds in part is the
// next run's to read on). A read that ends after the drain was stopped is
// not parsed: it goes to carry. A stream that ends, fails, or brings an
// error frame, a gap or anything but events is dropped: the thread's next
// run opens a new one.
func (b *Backend) drain(es *eventStream, gen uint64, carried bool, done chan struct{}) {
	defer close(done)
	for {
		var c streamRead
		if carried {
			c, carried = <-es.carry, false
		} else {
			c.n, c.err = es.body.Read(es.buf)
		}
		es.drainMu.Lock()
		if es.drainGen != gen { // taken or evicted
			es.carry <- c // its one slot is free: each drain owes one read at most, and took the one it was owed
			es.drainMu.Unlock()
			return
		}
		ok := c.err == nil && es.discard(es.buf[:c.n])
		if !ok {
			es.drainGen = 0
		}
		es.drainMu.Unlock()
		if !ok {
			if b.dropKept(es) {
				es.cancel()
				es.body.Close()
			}
			return
		}
	}
}

// discard parses a chunk the drain read and drops the events it
// completes; false on a parser failure or a frame that makes the stream
// unfit for the next run: one that is not an event, or an event whose seq
// jumps past the next (the upstream dropped events of the stream).
func (es *eventStream) discard(chunk []byte) bool {
	d := es.sdec
	var err error
	d.evs, err = d.parser.Feed(chunk, d.evs[:0])
	ok := err == nil
	for _, e := range d.evs {
		if e.IsComment {
			d.noteBeat()
			continue
		}
		if ok && len(bytes.TrimSpace(e.Data)) > 0 {
			ok = es.discardFrame(e.Data)
		}
	}
	clear(d.evs) // keep no frame
	return ok
}

// discardFrame checks one frame the drain drops (see discard).
func (es *eventStream) discardFrame(frame []byte) bool {
	var f struct {
		Type string  `json:"type"`
		Seq  *uint64 `json:"seq"`
	}
	if json.Unmarshal(frame, &f, peerJSON) != nil || f.Type != "event" {
		return false
	}
	if f.Seq != nil {
		if es.drainSeq != 0 && *f.Seq > es.drainSeq+1 {
			return false
		}
		es.drainSeq = max(es.drainSeq, *f.Seq)
	}
	return true
}

// upStream is one upstream run.
type upStream struct {
	b      *Backend
	ctx    context.Context
	cancel context.CancelFunc
	thread string
	run    string // upstream run id (from run.start)
	after  uint64 // the command's applied_through_seq
	keep   bool   // the stream may be kept for the thread's next run
	// resumeStart is the command sent when input.respond finds no run
	// (see resumeByStart); nil when there is none to send.
	resumeStart []byte
	// tap records what the run reads from its event stream for the
	// inspector (the zero Tap: not captured). The stream outlives runs (kept for
	// the thread's next one), so its request is not the run's and the
	// transport's wiretap does not see it.
	tap wiretap.Tap

	// SSE
	es      *eventStream
	unwatch func() bool // stops the run's context from ending es
	reused  bool        // es was kept from an earlier run and no event of this run came yet
	broken  bool        // es failed (read or decode): it ends with the run
	// WebSocket
	ws      *wsSession
	gen     uint64 // the run's generation on ws: its frames are those of gen
	conn    *wsconn.Conn
	wdec    *Decoder
	pending [][]byte // frames read before the command's answer

	out      []*canonical.Event // decoded; out[next:] are for Recv
	next     int
	marked   bool
	eof      bool
	ended    atomic.Bool // the run's terminal event was returned (read by Close)
	once     sync.Once
	relMu    sync.Mutex // release runs once, from Recv or Close
	released bool
}

func (s *upStream) decoder() *Decoder {
	if s.es != nil {
		return &s.es.sdec.Decoder
	}
	return s.wdec
}

func (s *upStream) header(h http.Header) {
	for k, v := range s.b.cfg.Headers {
		h.Set(k, v)
	}
	tracing.ToHTTP(s.ctx, h) // the run's trace continues upstream
}

// response is a CommandResponse or ErrorResponse; of an event read while
// waiting for one, the seq.
type response struct {
	Type   string     `json:"type"`
	ID     *uint64    `json:"id"`
	Seq    *uint64    `json:"seq"`
	Result json.Value `json:"result"`
	Meta   struct {
		AppliedThroughSeq uint64 `json:"applied_through_seq"`
	} `json:"meta"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

// accept reads the command's answer: the run id and the seq to follow from.
func (s *upStream) accept(r *response) (uint64, error) {
	if r.Type == "error" {
		return 0, canonical.WireError(canonicalCode(r.Error), "agent upstream: "+r.Message)
	}
	if r.Type != "success" {
		return 0, canonical.Errorf(canonical.CodeUnavailable, "agent upstream: the command's answer is neither success nor error")
	}
	var res struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal(r.Result, &res, peerJSON)
	s.run = res.RunID
	return r.Meta.AppliedThroughSeq, nil
}

// startSSE subscribes, then starts the run: the thread's event stream (the
// one kept from the thread's last run, or a new one from the start of the
// upstream's buffer) is open before the command is sent, so the run's
// events are the stream's from its first: opened after the command's
// answer, it asked for events a fast run had already pushed out of the
// upstream's buffer. What the stream holds up to the command's
// applied_through_seq is skipped.
func (s *upStream) startSSE(cmd []byte) error {
	es := s.b.takeStream(s.thread)
	reused := es != nil
	if es == nil {
		var err error
		if es, err = s.openStream(nil); err != nil {
			return err
		}
	}
	r, err := s.command(cmd)
	if err == nil && r.Type == "error" && r.Error == errNoSuchRun && s.resumeStart != nil {
		r, err = s.command(s.resumeStart)
	}
	var after uint64
	if err == nil {
		after, err = s.accept(r)
	}
	if err != nil {
		if s.keep { // the stream is as it was: the thread's next run may read on
			s.b.keepStream(es)
		} else {
			es.close()
		}
		return err
	}
	s.after = after
	es.sdec.nextRun(after)
	s.use(es, reused)
	return nil
}

// command posts the command that starts the run and returns its answer.
func (s *upStream) command(cmd []byte) (*response, error) {
	b := s.b
	cctx, cancel := context.WithTimeout(s.ctx, b.cfg.Timeout)
	defer cancel()
	hreq, _ := http.NewRequestWithContext(cctx, "POST", b.base+"/threads/"+url.PathEscape(s.thread)+"/commands", bytes.NewReader(cmd))
	hreq.Header.Set("Content-Type", "application/json")
	// With a key the HTTP client sends the command again, once, when a
	// kept-alive connection from its pool turns out closed by the
	// upstream before any answer (the race of an idle connection's close
	// with its reuse); an upstream that honours the key keeps the resent
	// command from running twice.
	hreq.Header.Set("Idempotency-Key", nuid.Next())
	s.header(hreq.Header)
	resp, err := b.cfg.HTTPClient.Do(hreq)
	if err != nil {
		return nil, canonical.Unreachable("agent", fmt.Errorf("sending a command: %w", err))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(b.cfg.MaxEventBytes)))
	resp.Body.Close()
	if err != nil {
		return nil, &canonical.Error{Code: canonical.CodeUnavailable, Message: "agent backend: the upstream's response broke off",
			Cause: fmt.Errorf("reading the command answer: %w", err)}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, httpFailure(resp.StatusCode, body)
	}
	var r response
	if json.Unmarshal(body, &r, peerJSON) != nil {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "agent upstream: the command answer is not JSON")
	}
	return &r, nil
}

// openStream opens the thread's event stream on every channel: after seq
// since, or (nil) from the start of the upstream's buffer. The request
// outlives the run (the stream may be kept for the thread's next one); the
// run's context ends it while the run reads it (use).
func (s *upStream) openStream(since *uint64) (*eventStream, error) {
	b := s.b
	ctx, cancel := context.WithCancel(context.Background())
	req := struct {
		Channels []string `json:"channels"`
		Since    *uint64  `json:"since,omitzero"`
	}{Channels: allChannels, Since: since}
	var after uint64
	if since != nil {
		after = *since
	}
	filter, _ := json.Marshal(&req)
	sreq, _ := http.NewRequestWithContext(ctx, "POST", b.base+"/threads/"+url.PathEscape(s.thread)+"/stream/events", bytes.NewReader(filter))
	sreq.Header.Set("Content-Type", "application/json")
	sreq.Header.Set("Accept", "text/event-stream")
	sreq.Header.Set("Idempotency-Key", nuid.Next()) // a subscription is: resent on a pooled connection found closed, as the command
	s.header(sreq.Header)
	connectTimer := time.AfterFunc(b.cfg.Timeout, cancel) // headers must come within Timeout
	stopRun := context.AfterFunc(s.ctx, cancel)
	sresp, err := b.cfg.HTTPClient.Do(sreq)
	connectTimer.Stop()
	stopRun()
	if err != nil {
		cancel()
		return nil, canonical.Unreachable("agent", fmt.Errorf("opening the event stream: %w", err))
	}
	if sresp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(sresp.Body, 64<<10))
		sresp.Body.Close()
		cancel()
		return nil, httpFailure(sresp.StatusCode, body)
	}
	if mt, _, _ := mime.ParseMediaType(sresp.Header.Get("Content-Type")); mt != "text/event-stream" {
		sresp.Body.Close()
		cancel()
		return nil, canonical.Errorf(canonical.CodeUnavailable, "agent upstream: the event stream's Content-Type is %q, not text/event-stream", sresp.Header.Get("Content-Type"))
	}
	sdec := NewSSEDecoder(after, b.cfg.MaxEventBytes)
	sdec.Contiguous = true // every channel, every namespace: a jump in seqs is events lost
	return &eventStream{thread: s.thread, body: sresp.Body, sdec: sdec, buf: make([]byte, 32<<10), cancel: cancel}, nil
}

// use makes es the run's event stream; the run's context ending (its
// client left) ends the stream, and with it a read in progress.
func (s *upStream) use(es *eventStream, reused bool) {
	s.es, s.reused = es, reused
	s.unwatch = context.AfterFunc(s.ctx, es.cancel)
}

// httpFailure maps a non-200 answer: the body's {"error","message"} if any.
func httpFailure(status int, body []byte) error {
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &e, peerJSON)
	msg := cmp.Or(e.Message, e.Error, strings.TrimSpace(string(body)), http.StatusText(status))
	return canonical.WireError(codeFromHTTP(status), fmt.Sprintf("agent upstream: HTTP %d: %.200s", status, msg))
}

// startWS subscribes and starts the run on a new WebSocket. The two
// commands go together, not the second after the first's answer:
// LangGraph parks a subscription made before its thread record has a run
// until run.start comes (the answer never came while we waited for it).
// The subscription replays the upstream's buffer, so an upstream that
// executes the run.start first loses none of the run's events to it.
func (s *upStream) startWS(cmd []byte) error {
	b := s.b
	dctx, cancel := context.WithTimeout(s.ctx, b.cfg.Timeout)
	defer cancel()
	if s.ws, s.gen = b.takeWS(s.thread); s.ws != nil {
		// The thread's socket, kept from its last run: the subscription
		// holds (LangGraph's and ours persist across runs).
		s.conn = s.ws.conn
		s.tap.Sent(cmd)
		if err := s.conn.SendText(cmd); err != nil {
			return s.failWS(err)
		}
		return s.startedWS(dctx, []*response{{Type: "success"}, nil}, []uint64{2})
	}
	u := "ws" + strings.TrimPrefix(b.base, "http") + "/threads/" + url.PathEscape(s.thread) + "/stream/events"
	h := http.Header{}
	s.header(h)
	ws, resp, err := websocket.DefaultDialer.DialContext(dctx, u, h)
	if err != nil {
		if resp != nil {
			return httpFailure(resp.StatusCode, nil)
		}
		return canonical.Unreachable("agent", fmt.Errorf("dialling the WebSocket: %w", err))
	}
	s.conn = wsconn.New(ws, wsconn.Config{MaxMessageBytes: int64(b.cfg.MaxEventBytes), Logger: b.cfg.Logger})
	s.ws, s.gen = newWSSession(s.thread, s.conn)
	sub, _ := json.Marshal(&commandFrame{ID: 1, Method: "subscription.subscribe", Params: map[string][]string{"channels": allChannels}})
	s.tap.Sent(sub)
	if err := s.conn.SendText(sub); err != nil {
		return s.failWS(err)
	}
	s.tap.Sent(cmd)
	if err := s.conn.SendText(cmd); err != nil {
		return s.failWS(err)
	}
	return s.startedWS(dctx, []*response{nil, nil}, []uint64{1, 2})
}

// startedWS awaits the answers to the commands sent (ids; ans holds one
// slot for the subscription's and one for the command's, an answer
// already known filled in) and readies the run's decoder.
func (s *upStream) startedWS(dctx context.Context, known []*response, ids []uint64) error {
	got, err := s.awaitAnswers(dctx, ids...)
	if err != nil {
		return err
	}
	ans := known
	ans[1] = got[len(got)-1]
	if len(got) == 2 {
		ans[0] = got[0]
	}
	r := ans[1]
	if r != nil && r.Type == "error" && r.Error == errNoSuchRun && s.resumeStart != nil {
		// The subscription stays parked (LangGraph) until this run.start.
		if err := s.conn.SendText(s.resumeStart); err != nil {
			return s.failWS(err)
		}
		sub, ids := ans[0], []uint64{1, 3}
		if sub != nil {
			ids = ids[1:]
		}
		if ans, err = s.awaitAnswers(dctx, ids...); err != nil {
			return err
		}
		r = ans[len(ans)-1]
		ans[0] = cmp.Or(sub, ans[0])
	}
	if sub := ans[0]; sub != nil && sub.Type == "error" {
		s.ws.close()
		return canonical.WireError(canonicalCode(sub.Error), "agent upstream: subscription.subscribe: "+sub.Message)
	}
	after, err := s.accept(r)
	if err != nil {
		s.ws.close()
		return err
	}
	s.wdec = &Decoder{AfterSeq: after, Contiguous: true}
	return nil
}

// awaitAnswers reads up to the answers to the commands ids, in any
// order, and returns them in the order of ids; the answers of the ids
// before the last one may be missing (nil) when the last one's is an
// error (a subscription LangGraph parks until a run starts is answered
// after a run.start, never after a failed command). The frames between (the
// subscription's replay, the run's first events, an error report) are
// held for the decoder, which skips those before the run; events at or
// before the subscription's (id 1) applied_through_seq, the replay of
// the thread's earlier events, are dropped here once its answer came.
func (s *upStream) awaitAnswers(ctx context.Context, ids ...uint64) ([]*response, error) {
	got := make([]*response, len(ids))
	var through uint64
	for n := 0; n < len(ids) && (got[len(ids)-1] == nil || got[len(ids)-1].Type != "error"); {
		data, err := s.readWS(ctx)
		if err != nil {
			return nil, s.failWS(err)
		}
		var r response
		if json.Unmarshal(data, &r, peerJSON) == nil {
			if i := slices.Index(ids, ptrOr(r.ID)); r.Type != "event" && r.ID != nil && i >= 0 && got[i] == nil {
				got[i], n = &r, n+1
				if *r.ID == 1 && r.Type == "success" {
					through = r.Meta.AppliedThroughSeq
				}
				continue
			}
			if r.Type == "event" && r.Seq != nil && *r.Seq <= through {
				continue
			}
		}
		if len(s.pending) >= s.b.cfg.MaxPendingEvents {
			_ = s.conn.Close(wsconn.ClosePolicyViolation, "too many events before the command's answer")
			s.ws.close()
			return nil, canonical.Errorf(canonical.CodeResourceExhausted, "agent upstream: more than MaxPendingEvents (%d) events before the command's answer", s.b.cfg.MaxPendingEvents)
		}
		s.pending = append(s.pending, data)
	}
	return got, nil
}

// wsSession is one upstream WebSocket of a thread. It outlives the run
// that opened it, as the SSE event stream does (see Backend): LangGraph
// drops a thread's record (its assistant binding, its run) when one of the
// thread's sockets closes, even while a newer socket uses it, so the
// thread's next run (a resume above all) must use the same socket. Its
// only reader, readLoop, hands each frame to the run that owns the
// session, tagged with the run's generation; while the session is kept
// between runs it reads and drops what comes.
type wsSession struct {
	thread string
	conn   *wsconn.Conn
	frames chan wsFrame
	kick   chan struct{} // a frame blocked on frames is dropped if its run left
	stop   chan struct{}
	done   chan struct{} // readLoop returned
	once   sync.Once
	idle   *time.Timer // while kept: closes it after KeepStreamIdle

	mu    sync.Mutex
	owner uint64 // the generation of the run that reads; 0 while kept
	gens  uint64
	dead  bool // a read failed, or an error frame came while kept
}

// wsFrame is one read of a session, for the run of generation gen.
type wsFrame struct {
	gen  uint64
	data []byte
	err  error
}

// newWSSession starts the reader of a new socket owned by a first run,
// and returns it with that run's generation.
func newWSSession(thread string, conn *wsconn.Conn) (*wsSession, uint64) {
	w := &wsSession{thread: thread, conn: conn, frames: make(chan wsFrame), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), owner: 1, gens: 1}
	go w.readLoop()
	return w, 1
}

// readLoop reads the socket until it fails or closes.
func (w *wsSession) readLoop() {
	defer close(w.done)
	for {
		_, data, err := w.conn.Read(context.Background())
		w.mu.Lock()
		own := w.owner
		if err != nil || (own == 0 && !droppable(data)) {
			w.dead = true
		}
		w.mu.Unlock()
		if own != 0 && !w.hand(wsFrame{gen: own, data: data, err: err}) {
			return
		}
		if err != nil {
			return
		}
	}
}

// hand gives f to its run; false when the session is being closed. A
// frame whose run left (the session was kept meanwhile) is dropped.
func (w *wsSession) hand(f wsFrame) bool {
	for {
		select {
		case w.frames <- f:
			return true
		case <-w.stop:
			return false
		case <-w.kick:
			w.mu.Lock()
			gone := w.owner != f.gen
			w.mu.Unlock()
			if gone {
				return true
			}
		}
	}
}

// droppable reports whether a frame read while the session is kept leaves
// it fit for the thread's next run: events and answers (LangGraph answers
// the session's subscription again at each run on the thread), not an
// error.
func droppable(frame []byte) bool {
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(frame, &f, peerJSON) == nil && f.Type != "error"
}

// close closes the socket and waits for its reader.
func (w *wsSession) close() {
	w.once.Do(func() {
		_ = w.conn.Close(wsconn.CloseNormal, "")
		close(w.stop)
		<-w.done
	})
}

// readWS is the run's next frame from its session.
func (s *upStream) readWS(ctx context.Context) ([]byte, error) {
	for {
		select {
		case f := <-s.ws.frames:
			if f.gen != s.gen {
				continue // an earlier run's, read before it left
			}
			return f.data, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// takeWS returns the thread's kept socket, if any, owned by a new run,
// and the run's generation.
func (b *Backend) takeWS(thread string) (*wsSession, uint64) {
	b.mu.Lock()
	w := b.keptWS[thread]
	if w != nil {
		delete(b.keptWS, thread)
		w.idle.Stop()
	}
	b.mu.Unlock()
	if w == nil {
		return nil, 0
	}
	w.mu.Lock()
	dead := w.dead
	w.gens++
	w.owner = w.gens
	gen := w.gens
	w.mu.Unlock()
	if dead {
		w.close()
		return nil, 0
	}
	return w, gen
}

// keepWS keeps the socket of a run that ended for the thread's next run,
// or closes it (see keepStream).
func (b *Backend) keepWS(w *wsSession) {
	w.mu.Lock()
	w.owner = 0
	dead := w.dead
	w.mu.Unlock()
	select { // a frame blocked for the run that left is dropped
	case w.kick <- struct{}{}:
	default:
	}
	b.mu.Lock()
	if dead || b.closed || len(b.kept)+len(b.keptWS) >= b.cfg.KeepStreams || b.keptWS[w.thread] != nil {
		b.mu.Unlock()
		w.close()
		return
	}
	if b.keptWS == nil {
		b.keptWS = map[string]*wsSession{}
	}
	b.keptWS[w.thread] = w
	w.idle = time.AfterFunc(b.cfg.KeepStreamIdle, func() { b.expireWS(w) })
	b.mu.Unlock()
}

// expireWS closes a kept socket that no run took within KeepStreamIdle.
func (b *Backend) expireWS(w *wsSession) {
	b.mu.Lock()
	mine := b.keptWS[w.thread] == w
	if mine {
		delete(b.keptWS, w.thread)
	}
	b.mu.Unlock()
	if mine {
		w.close()
	}
}

// ptrOr is *p, or 0 for nil (no command has id 0).
func ptrOr(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func (s *upStream) failWS(err error) error {
	s.ws.close()
	if ce := s.ctx.Err(); ce != nil {
		return canonical.AsError(ce)
	}
	return canonical.Errorf(canonical.CodeUnavailable, "agent upstream: websocket: %v", err)
}

// Recv implements canonical.Stream.
func (s *upStream) Recv() (*canonical.Event, error) {
	for s.next == len(s.out) {
		// The array is kept for the next read: taking events off its
		// front left a paced stream, an event a read, to allocate
		// another for each.
		s.out, s.next = s.out[:0], 0
		if s.eof {
			return nil, io.EOF
		}
		if s.decoder().Ended() {
			s.eof = true
			s.release()
			continue
		}
		s.fill()
	}
	ev := s.out[s.next]
	s.out[s.next] = nil
	s.next++
	if _, ok := canonical.TerminalOf(ev); ok {
		s.ended.Store(true)
		if s.next == len(s.out) { // the stream is free now, for the thread's next run
			s.eof = true
			s.release()
		}
	}
	if !s.marked { // the frontend then keeps this upstream agent's state as reported
		s.marked = true
		if ev.Extensions == nil {
			ev.Extensions = map[string]*structpb.Value{}
		}
		ev.Extensions[passthroughExt] = structpb.NewBoolValue(true)
	}
	return ev, nil
}

// Buffered implements canonical.Buffered: the events decoded from what
// was read so far. The bridge then publishes a burst's events together
// and stamps them with one reading of the clock.
func (s *upStream) Buffered() int { return len(s.out) - s.next }

// fill reads from the upstream and decodes, ending the run on a failure.
func (s *upStream) fill() {
	if es := s.es; es != nil {
		n, err := es.readWatched()
		if n > 0 {
			s.tap.Received(es.buf[:n])
			var ferr error
			if s.out, ferr = es.sdec.Feed(es.buf[:n], s.out); ferr != nil {
				s.broken = true
				s.out = es.sdec.fail(s.out, canonical.AsError(ferr))
				return
			}
			if len(s.out) > 0 {
				s.reused = false
			}
		}
		if err != nil {
			s.broken = true
			if s.ctx.Err() != nil {
				s.cancelUpstream() // our client left: the upstream run must stop too
				s.out = es.sdec.fail(s.out, canonical.AsError(s.ctx.Err()))
				return
			}
			if es.silent.Load() {
				s.cancelUpstream()
				s.out = es.sdec.fail(s.out, canonical.Errorf(canonical.CodeUnavailable,
					"agent upstream: nothing, not even a heartbeat, for %s (three of its heartbeat intervals)", es.sdec.SilenceLimit()))
				return
			}
			if s.reused { // the kept stream ended while it waited: none of the run is lost
				s.reopen()
				return
			}
			s.out, _ = es.sdec.End(s.out)
		}
		return
	}
	for len(s.pending) > 0 {
		f := s.pending[0]
		s.pending = s.pending[1:]
		s.tap.Received(f)
		var err error
		if s.out, err = s.wdec.Feed(f, s.out); err != nil {
			s.broken = true
			s.out = s.wdec.fail(s.out, canonical.AsError(err))
			return
		}
	}
	if len(s.out) > 0 {
		return
	}
	data, err := s.readWS(s.ctx)
	if err != nil {
		s.broken = true
		if s.ctx.Err() != nil {
			s.cancelUpstream() // our client left: the upstream run must stop too
			s.out = s.wdec.fail(s.out, canonical.AsError(s.ctx.Err()))
			return
		}
		s.out = s.wdec.End(s.out)
		return
	}
	s.tap.Received(data)
	if s.out, err = s.wdec.Feed(data, s.out); err != nil {
		s.broken = true
		s.out = s.wdec.fail(s.out, canonical.AsError(err))
	}
}

// fail ends the run with err (cancelled for a cancellation).
func (d *Decoder) fail(out []*canonical.Event, err *canonical.Error) []*canonical.Event {
	if d.ended {
		return out
	}
	st := canonical.StatusFailed
	if err.Code == canonical.CodeCanceled {
		st = canonical.StatusCancelled
	}
	return d.terminal(&canonical.Event{Namespace: []string{}}, st, err, "", out)
}

// reopen replaces a kept event stream that ended before the run's first
// event (the server or the connection closed it while it waited) with a
// new one from the command's seq.
func (s *upStream) reopen() {
	s.unwatch()
	s.es.close()
	es, err := s.openStream(&s.after)
	s.relMu.Lock() // Close may be releasing the run meanwhile
	switch {
	case err == nil && s.released:
		es.close()
		err = canonical.Errorf(canonical.CodeCanceled, "agent upstream: the run was closed")
	case err == nil:
		s.broken = false
		s.use(es, false)
	}
	s.relMu.Unlock()
	if err != nil {
		if s.ctx.Err() != nil { // our client left meanwhile, as in fill
			s.cancelUpstream()
			err = s.ctx.Err()
		}
		s.out = s.es.sdec.fail(s.out, canonical.AsError(err)) // the replaced stream's decoder: the run's state
	}
}

// release ends the run's use of its connection once the run has ended: an
// event stream whose run ended as the upstream said (not cut off, not cut
// short by the run's context) is kept for the thread's next run, anything
// else is closed.
func (s *upStream) release() {
	s.relMu.Lock()
	defer s.relMu.Unlock()
	if s.released {
		return
	}
	s.released = true
	if s.es != nil {
		// ended (an atomic, stored by Recv after the last read) orders
		// the reads of broken after its writes.
		if s.unwatch() && s.keep && s.ended.Load() && !s.broken {
			s.b.keepStream(s.es)
		} else {
			s.es.close()
		}
	}
	if s.ws != nil {
		if s.keep && s.ended.Load() && !s.broken {
			s.b.keepWS(s.ws)
		} else {
			s.ws.close()
		}
	}
	s.cancel()
}

// Close implements canonical.Stream: a run that has not ended is cancelled
// upstream, then the connection is closed.
func (s *upStream) Close() error {
	s.once.Do(func() {
		if !s.ended.Load() {
			s.cancelUpstream()
		}
		s.release()
	})
	return nil
}

// cancelUpstream asks the upstream to cancel the run (best effort).
func (s *upStream) cancelUpstream() {
	if s.run == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(s.b.cfg.Timeout, 5*time.Second))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.b.base+"/threads/"+url.PathEscape(s.thread)+"/runs/"+url.PathEscape(s.run)+"/cancel", nil)
	s.header(req.Header)
	resp, err := s.b.cfg.HTTPClient.Do(req)
	if err != nil {
		s.b.cfg.Logger.Warn("the upstream run may go on: its cancel failed", "thread", s.thread, "run", s.run, "err", err)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		s.b.cfg.Logger.Warn("the upstream run may go on: it refused the cancel", "thread", s.thread, "run", s.run,
			"status", resp.StatusCode, "err", httpFailure(resp.StatusCode, body))
	}
}
