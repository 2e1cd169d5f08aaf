package agent

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// Config configures the frontend. Zero fields take the documented defaults.
type Config struct {
	// Runner starts runs; required. Every run names the agent runtime
	// (Runtime), which the bridge runs beside the backend.
	Runner canonical.Runner
	// Observer serves a thread's events from the replay log; required:
	// every event stream and subscription reads it.
	Observer canonical.Observer
	// Store holds thread state (record.go), which the runtime writes and
	// the state commands read; required.
	Store canonical.ThreadStore
	// Logger receives the frontend's records. Default discards.
	Logger *slog.Logger
	// CheckThread, when set, is asked before any use of a thread: it claims
	// a new thread for the caller's API key or refuses (not found) a thread
	// of another key. The daemon wires the bridge's tenant check here.
	CheckThread func(ctx context.Context, thread string) error
	// CancelRun cancels a run of a thread on whichever instance runs it;
	// nil: only the runs started here can be cancelled.
	CancelRun func(thread, run string)
	// StoreTimeout bounds one read or write of the store. Default 5s.
	StoreTimeout time.Duration
	// SubscriptionKeep is how long a closed WebSocket's subscriptions can
	// be restored with subscription.reconnect. Default 5 minutes.
	SubscriptionKeep time.Duration
	// Heartbeat is the interval of ": heartbeat" comments on SSE streams.
	// Default 5s.
	Heartbeat time.Duration
	// SlowSSE counts the SSE streams cut off by WriteTimeout on
	// connections net/http no longer carries (HTTP/1.1: see sse.Hijack),
	// in the counter the server uses for those it carries. Nil: not
	// counted.
	SlowSSE sse.Counter
	// WriteTimeout bounds one SSE write; a client that does not read is cut
	// off after it. Default 30s.
	WriteTimeout time.Duration
	// MaxRequestBytes bounds a command or stream request body (and a
	// WebSocket message). Default 4 MiB.
	MaxRequestBytes int64
	// MaxQueuedRuns bounds the runs this instance has started on a thread
	// and that have not ended (they take turns). Default 8.
	MaxQueuedRuns int
	// MaxSubscriptions bounds the subscriptions of one WebSocket. Default 64.
	MaxSubscriptions int
	// MaxStateCache bounds the states read back for large values events,
	// kept for the instance's readers, in bytes (one over a quarter of it
	// is not kept). Default 64 MiB.
	MaxStateCache int
	// WebSocket configures each WebSocket (limits, pings). SendQueue
	// defaults to 256 frames: a replay waits for room (backpressure), and a
	// client that stops reading is cut off (1008).
	WebSocket wsconn.Config
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.StoreTimeout = cmp.Or(c.StoreTimeout, 5*time.Second)
	c.SubscriptionKeep = cmp.Or(c.SubscriptionKeep, 5*time.Minute)
	c.Heartbeat = cmp.Or(c.Heartbeat, 5*time.Second)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 30*time.Second)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, 4<<20)
	c.MaxQueuedRuns = cmp.Or(c.MaxQueuedRuns, 8)
	c.MaxSubscriptions = cmp.Or(c.MaxSubscriptions, 64)
	c.MaxStateCache = cmp.Or(c.MaxStateCache, 64<<20)
	c.WebSocket.SendQueue = cmp.Or(c.WebSocket.SendQueue, 256)
	c.WebSocket.MaxMessageBytes = cmp.Or(c.WebSocket.MaxMessageBytes, c.MaxRequestBytes)
	if c.WebSocket.Logger == nil {
		c.WebSocket.Logger = c.Logger
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports missing ports and negative limits.
func (c Config) Validate() error {
	var errs []error
	for name, missing := range map[string]bool{"Runner": c.Runner == nil, "Observer": c.Observer == nil, "Store": c.Store == nil} {
		if missing {
			errs = append(errs, canonical.Errorf(canonical.CodeInvalidArgument, "agent: Config.%s is required", name))
		}
	}
	for name, v := range map[string]int64{
		"MaxQueuedRuns": int64(c.MaxQueuedRuns), "MaxSubscriptions": int64(c.MaxSubscriptions), "MaxRequestBytes": c.MaxRequestBytes,
		"MaxStateCache": int64(c.MaxStateCache), "StoreTimeout": int64(c.StoreTimeout), "SubscriptionKeep": int64(c.SubscriptionKeep),
		"Heartbeat": int64(c.Heartbeat), "WriteTimeout": int64(c.WriteTimeout),
	} {
		if v < 0 {
			errs = append(errs, canonical.Errorf(canonical.CodeInvalidArgument, "agent: Config.%s is negative (%d); zero means the default", name, v))
		}
	}
	if err := c.WebSocket.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Frontend serves the LangChain agent streaming protocol: thread event
// streams over SSE and WebSocket, and commands over HTTP and WebSocket.
// It keeps no thread of its own: runs go to the bridge with the agent
// runtime named (which keeps the state in the thread store, and numbers
// its events in the thread's seqs), streams read the bridge's replay log,
// and the state commands read the store; so any instance serves any
// thread.
type Frontend struct {
	cfg    Config
	states stateCache

	runCtx    context.Context // parent of every run started here; cancelled by Close
	cancelRun context.CancelFunc

	mu sync.Mutex
	// runs are the runs started here that have not ended, by id, and
	// queued counts them per thread (MaxQueuedRuns).
	runs   map[string]*localRun
	queued map[string]int
	// ends are the seqs of the ends of the runs started here that ended
	// lately: what a stream the shutdown ends writes first (settled).
	ends recentEnds
	// subs are the WebSocket subscriptions, by id, for
	// subscription.reconnect.
	subs          map[string]*subRec
	closing       chan struct{} // closed by Shutdown: streams and sockets end
	closingCtx    context.Context
	closingCancel context.CancelFunc
	// streamsCtx is cancelled when Close stops waiting for the streams to
	// write their threads' runs' ends: those left end at once.
	streamsCtx    context.Context
	cancelStreams context.CancelFunc
	shutdown      bool
	closed        atomic.Bool // no run starts after Close
	// runMu orders wg.Add against Close's wg.Wait (taken alone, never
	// while holding another lock of the frontend's): see track.
	runMu sync.Mutex
	wg    sync.WaitGroup // runs' readers, SSE streams
}

// NewFrontend returns a frontend; it fails on an invalid Config.
func NewFrontend(cfg Config) (*Frontend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	cctx, ccancel := context.WithCancel(context.Background())
	sctx, scancel := context.WithCancel(context.Background())
	f := &Frontend{cfg: cfg, runCtx: ctx, cancelRun: cancel, runs: map[string]*localRun{}, queued: map[string]int{},
		subs: map[string]*subRec{}, closing: make(chan struct{}), closingCtx: cctx, closingCancel: ccancel,
		streamsCtx: sctx, cancelStreams: scancel}
	f.states = stateCache{store: cfg.Store, log: cfg.Logger, timeout: cfg.StoreTimeout, max: cfg.MaxStateCache, data: map[string][]byte{}}
	return f, nil
}

// Mount registers the routes: SSE (POST) and WebSocket (GET with Upgrade)
// on /threads/{thread_id}/stream and /stream/events, commands on
// /threads/{thread_id}/commands, and two LangGraph REST extras the SDK and
// our backend use: GET /threads/{thread_id}/state and
// POST /threads/{thread_id}/runs/{run_id}/cancel.
func (f *Frontend) Mount(mux *http.ServeMux) {
	for _, p := range []string{"/threads/{thread_id}/stream", "/threads/{thread_id}/stream/events"} {
		mux.HandleFunc("POST "+p, f.serveSSE)
		mux.HandleFunc("GET "+p, f.serveWebSocket)
	}
	mux.HandleFunc("POST /threads/{thread_id}/commands", f.serveCommands)
	mux.HandleFunc("GET /threads/{thread_id}/state", f.serveState)
	mux.HandleFunc("POST /threads/{thread_id}/runs/{run_id}/cancel", f.serveCancel)
}

// Shutdown refuses new SSE streams and WebSockets and ends those open
// (close 1001 on a WebSocket) once their thread's runs started here have
// ended and they have written the runs' ends: runs go on (the bridge
// drains them), and a client reading them here sees how they end. A
// stream of a thread with no run here ends at once. Register it with the
// server's OnShutdown.
func (f *Frontend) Shutdown() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.shutdown {
		f.shutdown = true
		close(f.closing)
		f.closingCancel()
	}
}

// Close shuts down, cancels every run started here and waits for the
// frontend's goroutines: the streams write the ends of the runs it
// cancelled, for settleWait at most, and then end at once.
func (f *Frontend) Close() {
	f.Shutdown()
	f.runMu.Lock()
	f.closed.Store(true)
	f.runMu.Unlock()
	f.cancelRun()
	done := make(chan struct{})
	go func() {
		f.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(settleWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	f.cancelStreams()
	<-done
}

const (
	// settleWait bounds how long Close waits for the streams to write the
	// ends of their threads' runs (the server gives every frontend's Close
	// 5 s in all).
	settleWait = 2 * time.Second
	// settlePoll is how often a stream the shutdown ends looks again
	// whether its thread's runs here have ended: the run's end reaches the
	// stream through the log, which wakes it, but drain may forget the
	// run only after that, and nothing wakes the stream then.
	settlePoll = 50 * time.Millisecond
	// endsKeep and maxEnds bound what recentEnds keeps: an end is looked
	// for only while the replay log carries it to this instance's streams.
	endsKeep = time.Minute
	maxEnds  = 1 << 16
)

// settled reports whether a stream of thread that has read its events up
// to seq at may end for the shutdown: no run started here on the thread
// is going on or waiting, and at is past the end of the last one.
func (f *Frontend) settled(thread string, at uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queued[thread] == 0 && at >= f.ends.seq[thread]
}

// recentEnds keeps, for endsKeep, the seq of the end of each thread's last
// run started here.
type recentEnds struct {
	seq   map[string]uint64
	order []threadEnd // oldest first
}

type threadEnd struct {
	thread string
	seq    uint64
	at     time.Time
}

// note records the end of a run of thread at seq, letting go of the ends
// older than endsKeep (or past maxEnds).
func (e *recentEnds) note(thread string, seq uint64, now time.Time) {
	for len(e.order) > 0 && (now.Sub(e.order[0].at) > endsKeep || len(e.order) >= maxEnds) {
		old := e.order[0]
		e.order = e.order[1:]
		if e.seq[old.thread] == old.seq {
			delete(e.seq, old.thread)
		}
	}
	if e.seq == nil {
		e.seq = map[string]uint64{}
	}
	e.seq[thread] = max(e.seq[thread], seq)
	e.order = append(e.order, threadEnd{thread: thread, seq: seq, at: now})
}

func (f *Frontend) isClosed() bool { return f.closed.Load() }

// track adds one to what Close waits for (a run's reader, an SSE stream);
// false, adding nothing, once Close has begun.
func (f *Frontend) track() bool {
	f.runMu.Lock()
	defer f.runMu.Unlock()
	if f.isClosed() {
		return false
	}
	f.wg.Add(1)
	return true
}

// checkThread claims a new thread for the caller's API key, or refuses
// another key's (not found).
func (f *Frontend) checkThread(ctx context.Context, thread string) error {
	if f.cfg.CheckThread == nil {
		return nil
	}
	return f.cfg.CheckThread(ctx, thread)
}

// readState reads a thread's record from the store, its checkpoints
// with it: nil when it has none (or another key's, which reads the same).
func (f *Frontend) readState(ctx context.Context, thread string) (*threadRecord, uint64, error) {
	if err := f.checkThread(ctx, thread); err != nil {
		if canonical.CodeOf(err) == canonical.CodeNotFound {
			return nil, 0, nil
		}
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.StoreTimeout)
	defer cancel()
	return readState(ctx, f.cfg.Store, thread, 0, f.cfg.Logger)
}

// transportError is a transport-level failure's body (1.2).
type transportError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// httpError writes a transport-level failure: {"error","message"} (1.2).
func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(appendJSON(nil, &transportError{Error: code, Message: msg}), '\n'))
}

func canonicalHTTPError(w http.ResponseWriter, err error) {
	ce := canonical.AsError(err)
	httpError(w, httpStatus(ce.Code), wireCode(ce.Code), ce.Message)
}

// readBody reads a request body within MaxRequestBytes.
func (f *Frontend) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, f.cfg.MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			httpError(w, http.StatusRequestEntityTooLarge, errInvalidArgument, "request body exceeds MaxRequestBytes ("+strconv.FormatInt(mbe.Limit, 10)+" bytes)")
			return nil, false
		}
		httpError(w, http.StatusBadRequest, errInvalidArgument, "reading request body: "+err.Error())
		return nil, false
	}
	return body, true
}

func (f *Frontend) serveCommands(w http.ResponseWriter, r *http.Request) {
	body, ok := f.readBody(w, r)
	if !ok {
		return
	}
	cmd, id, pe := parseCommand(body)
	if pe != nil {
		if id < 0 { // transport-level: no command to answer
			httpError(w, http.StatusBadRequest, pe.Code, pe.Message)
			return
		}
		writeJSON(w, errorFrame(id, pe))
		return
	}
	thread := r.PathValue("thread_id")
	result, applied, pe := f.execute(r.Context(), thread, cmd)
	if pe != nil {
		writeJSON(w, errorFrame(int64(cmd.id), pe))
		return
	}
	writeJSON(w, successFrame(cmd.id, result, thread, applied))
}

func writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// serveState is LangGraph's GET /threads/{id}/state (hydration; 404 when
// the thread has no state).
func (f *Frontend) serveState(w http.ResponseWriter, r *http.Request) {
	thread := r.PathValue("thread_id")
	rec, _, err := f.readState(r.Context(), thread)
	if err != nil {
		canonicalHTTPError(w, err)
		return
	}
	if rec == nil {
		httpError(w, http.StatusNotFound, errNoSuchRun, "thread not found")
		return
	}
	state := &threadState{Values: rec.Values, Interrupts: make([]stateInterrupt, len(rec.Interrupts))}
	if h := rec.Head; h != "" {
		state.Checkpoint = &stateCheckpoint{ThreadID: thread, CheckpointID: h}
	}
	for i, x := range rec.Interrupts {
		state.Interrupts[i] = stateInterrupt{ID: x.ID, Value: x.Payload}
	}
	writeJSON(w, appendJSON(nil, state))
}

// threadState is LangGraph's ThreadState as GET /threads/{id}/state
// answers it: the values, the head checkpoint, the pending interrupts.
type threadState struct {
	Values     map[string]json.Value `json:"values"`
	Next       []string              `json:"next"`
	Tasks      []json.Value          `json:"tasks"`
	Metadata   struct{}              `json:"metadata"`
	CreatedAt  *string               `json:"created_at"`
	Checkpoint *stateCheckpoint      `json:"checkpoint"`
	Interrupts []stateInterrupt      `json:"interrupts"`
}

type stateCheckpoint struct {
	ThreadID     string `json:"thread_id"`
	CheckpointNS string `json:"checkpoint_ns"`
	CheckpointID string `json:"checkpoint_id"`
}

type stateInterrupt struct {
	ID    string     `json:"id"`
	Value json.Value `json:"value"`
}

// serveCancel is LangGraph's POST /threads/{id}/runs/{run_id}/cancel: it
// cancels the run if it is going on or waiting for its turn. The run ends
// with a failed lifecycle event whose error starts "cancelled: ". A run of
// the thread that the record does not show ended is cancelled wherever it
// runs (an id no run has is answered as one that ended: the record keeps
// the last runs, not every id).
func (f *Frontend) serveCancel(w http.ResponseWriter, r *http.Request) {
	thread, run := r.PathValue("thread_id"), r.PathValue("run_id")
	noSuchRun := func() { httpError(w, http.StatusNotFound, errNoSuchRun, "no active or queued run "+strconv.Quote(run)) }
	// Another key's thread has no runs, before anything is done to them.
	if err := f.checkThread(r.Context(), thread); err != nil {
		if canonical.CodeOf(err) == canonical.CodeNotFound {
			noSuchRun()
		} else {
			canonicalHTTPError(w, err)
		}
		return
	}
	if f.cancelLocal(thread, run) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rec, _, err := f.readState(r.Context(), thread)
	if err != nil {
		canonicalHTTPError(w, err)
		return
	}
	if rec != nil && !rec.ended(run) && f.cfg.CancelRun != nil {
		// Started on another instance, or not yet in the record: the
		// bridge tells whichever instance runs it.
		f.cfg.CancelRun(thread, run)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	noSuchRun()
}

// streamOpen answers a stream request itself while shutting down, or when
// the thread is another key's; false then.
func (f *Frontend) streamOpen(w http.ResponseWriter, r *http.Request) bool {
	select {
	case <-f.closing:
		httpError(w, http.StatusServiceUnavailable, errUnknownError, "server is shutting down")
		return false
	default:
	}
	if err := f.checkThread(r.Context(), r.PathValue("thread_id")); err != nil {
		canonicalHTTPError(w, err)
		return false
	}
	return true
}

// streamSince reads an SSE stream request's since: the request's own, or
// else Last-Event-ID; bad names the rule broken.
func streamSince(p params, r *http.Request) (since uint64, bad string) {
	if p.has("since") {
		s, ok := uintParam(p["since"])
		if !ok {
			return 0, "event stream request: since must be a non-negative integer"
		}
		return s, ""
	}
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		s, ok := seqText(h)
		if !ok {
			return 0, "Last-Event-ID must be a decimal seq below 2^53"
		}
		return s, ""
	}
	return 0, ""
}

func (f *Frontend) serveSSE(w http.ResponseWriter, r *http.Request) {
	body, ok := f.readBody(w, r)
	if !ok {
		return
	}
	p, ok := parseParams(body)
	if !ok {
		httpError(w, http.StatusBadRequest, errInvalidArgument, "the event stream request must be a JSON object (EventStreamRequest)")
		return
	}
	flt, pe := parseFilter(p, "event stream request")
	if pe != nil {
		httpError(w, http.StatusBadRequest, pe.Code, pe.Message)
		return
	}
	since, bad := streamSince(p, r)
	if bad != "" {
		httpError(w, http.StatusBadRequest, errInvalidArgument, bad)
		return
	}
	if !f.streamOpen(w, r) {
		return
	}
	if !f.track() {
		httpError(w, http.StatusServiceUnavailable, errUnknownError, "server is shutting down")
		return
	}
	s := &sseStream{f: f, flt: flt, ended: make(chan struct{})}
	s.state.Store(writerRunning) // the handler is the first writer
	// The reader lives as long as the stream, past the handler when the
	// connection is taken over (the caller's key stays in its context).
	tail, err := f.openTail(context.WithoutCancel(r.Context()), r.PathValue("thread_id"), since, s.kick)
	if err != nil {
		f.wg.Done()
		canonicalHTTPError(w, err)
		return
	}
	s.tail = tail
	s.hb = time.AfterFunc(f.cfg.Heartbeat, s.heartbeat)
	s.settle = time.AfterFunc(time.Hour, s.kick)
	s.settle.Stop()
	if !s.open(w, r) {
		s.close()
		return
	}
	s.run()
	if s.conn == nil {
		<-s.ended // the writes go through w: the handler stays
	}
}
