package agent

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// Config configures the frontend. Zero fields take the documented defaults.
type Config struct {
	// Runner starts runs; required.
	Runner canonical.Runner
	// Logger receives the frontend's records. Default discards.
	Logger *slog.Logger
	// Store holds thread state (a head record and one record per
	// checkpoint, record.go), so any instance can serve a thread and a
	// thread left memory (MaxThreads, BufferKeep) is read back. Nil keeps
	// state in memory only (and threads with state are then never evicted
	// from memory). The daemon wires the bridge's thread store here.
	Store canonical.ThreadStore
	// CheckThread, when set, is asked before any use of a thread: it claims
	// a new thread for the caller's API key or refuses (not found) a thread
	// of another key. The daemon wires the bridge's tenant check here.
	CheckThread func(ctx context.Context, thread string) error
	// StoreTimeout bounds reading a thread from the store, and one save.
	// Default 5s.
	StoreTimeout time.Duration
	// Alone says that no other frontend uses Store: a thread's first save,
	// which creates its record, is then made beside the run like every
	// later one, instead of before run.start is answered so that another
	// instance asked for the thread meanwhile finds it.
	Alone bool
	// BufferEvents is the per-thread replay buffer (ring) size. Default
	// 10,000 events; the latest values event of each namespace is kept
	// beyond it.
	BufferEvents int
	// BufferBytes bounds the frames a thread's buffer holds, in bytes:
	// past it the oldest events leave, as past BufferEvents (the newest
	// stays whatever its size). A values event holds the whole state, so a
	// long conversation's were most of a thread's memory. Default 32 MiB;
	// the pinned values events are beyond it.
	BufferBytes int
	// MaxBufferBytes bounds the frames all threads' buffers hold together,
	// in bytes: past it, when a new thread comes into memory, idle
	// threads leave memory (their state stays in the Store, and is read
	// back whole), the longest idle first, until the rest fit. Threads in
	// use are bounded each by BufferBytes. Default 256 MiB.
	MaxBufferBytes int
	// BufferKeep is how long an idle thread (no connection, no run) keeps
	// its buffer in memory. Default 10 minutes.
	BufferKeep time.Duration
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
	// MaxThreads bounds the threads held in memory (each buffers up to
	// BufferEvents frames, most a few hundred bytes, BufferBytes at
	// most). Default 1,000. At the
	// bound an idle thread (no stream, run or queued run) leaves memory for
	// a new one; its state stays in the Store.
	MaxThreads int
	// MaxThreadsPerKey bounds one API key's threads in memory, so that one
	// key cannot hold every place of MaxThreads and lock other keys out of
	// new threads. Default MaxThreads/4.
	MaxThreadsPerKey int
	// MaxQueuedRuns bounds the runs queued behind a thread's active run.
	// Default 8.
	MaxQueuedRuns int
	// MaxCheckpoints bounds the checkpoints a thread keeps. Default 100.
	MaxCheckpoints int
	// MaxBlockBytes bounds one content block the encoder keeps for its
	// content-block-finish. Default 16 MiB.
	MaxBlockBytes int
	// MaxSubscriptions bounds the subscriptions of one WebSocket. Default 64.
	MaxSubscriptions int
	// WebSocket configures each WebSocket (limits, pings). SendQueue
	// defaults to 256 frames: a replay waits for room (backpressure), and a
	// client that stops reading is cut off (1008).
	WebSocket wsconn.Config
	// Cluster, when set, lets any instance serve any thread: events are
	// mirrored between the instances holding a thread and commands reach
	// the instance running its runs (cluster.go). Nil: one instance.
	Cluster *Cluster
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.StoreTimeout = cmp.Or(c.StoreTimeout, 5*time.Second)
	c.BufferEvents = cmp.Or(c.BufferEvents, 10_000)
	c.BufferBytes = cmp.Or(c.BufferBytes, 32<<20)
	c.MaxBufferBytes = cmp.Or(c.MaxBufferBytes, 256<<20)
	c.BufferKeep = cmp.Or(c.BufferKeep, 10*time.Minute)
	c.SubscriptionKeep = cmp.Or(c.SubscriptionKeep, 5*time.Minute)
	c.Heartbeat = cmp.Or(c.Heartbeat, 5*time.Second)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 30*time.Second)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, 4<<20)
	c.MaxThreads = cmp.Or(c.MaxThreads, 1_000)
	c.MaxThreadsPerKey = cmp.Or(c.MaxThreadsPerKey, max(c.MaxThreads/4, 1))
	c.MaxQueuedRuns = cmp.Or(c.MaxQueuedRuns, 8)
	c.MaxCheckpoints = cmp.Or(c.MaxCheckpoints, 100)
	c.MaxBlockBytes = cmp.Or(c.MaxBlockBytes, 16<<20)
	c.MaxSubscriptions = cmp.Or(c.MaxSubscriptions, 64)
	c.WebSocket.SendQueue = cmp.Or(c.WebSocket.SendQueue, 256)
	c.WebSocket.MaxMessageBytes = cmp.Or(c.WebSocket.MaxMessageBytes, c.MaxRequestBytes)
	if c.WebSocket.Logger == nil {
		c.WebSocket.Logger = c.Logger
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Cluster != nil {
		cl := *c.Cluster
		cl.defaults()
		c.Cluster = &cl
	}
}

// Validate reports a missing Runner and negative limits.
func (c Config) Validate() error {
	var errs []error
	if c.Runner == nil {
		errs = append(errs, canonical.Errorf(canonical.CodeInvalidArgument, "agent: Config.Runner is required"))
	}
	for name, v := range map[string]int64{
		"BufferEvents": int64(c.BufferEvents), "BufferBytes": int64(c.BufferBytes), "MaxBufferBytes": int64(c.MaxBufferBytes), "MaxThreads": int64(c.MaxThreads), "MaxThreadsPerKey": int64(c.MaxThreadsPerKey), "MaxQueuedRuns": int64(c.MaxQueuedRuns),
		"MaxCheckpoints": int64(c.MaxCheckpoints), "MaxBlockBytes": int64(c.MaxBlockBytes),
		"MaxSubscriptions": int64(c.MaxSubscriptions), "MaxRequestBytes": c.MaxRequestBytes,
		"StoreTimeout": int64(c.StoreTimeout), "BufferKeep": int64(c.BufferKeep), "SubscriptionKeep": int64(c.SubscriptionKeep),
		"Heartbeat": int64(c.Heartbeat), "WriteTimeout": int64(c.WriteTimeout),
	} {
		if v < 0 {
			errs = append(errs, canonical.Errorf(canonical.CodeInvalidArgument, "agent: Config.%s is negative (%d); zero means the default", name, v))
		}
	}
	if c.Cluster != nil && c.Cluster.Conn == nil {
		errs = append(errs, canonical.Errorf(canonical.CodeInvalidArgument, "agent: Config.Cluster.Conn is required with a Cluster"))
	}
	if err := c.WebSocket.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Frontend serves the LangChain agent streaming protocol: thread event
// streams over SSE and WebSocket and commands over HTTP and WebSocket.
type Frontend struct {
	cfg    Config
	outbox *outbox // the default mirror publisher; nil without a Cluster or with Cluster.Publish
	origin string  // this frontend on the fabric (mirrored events carry it)
	echo   []byte  // how this frontend's own mirror messages start

	runCtx    context.Context // parent of every run; cancelled by Close
	cancelRun context.CancelFunc

	// buffered is the frames all threads' buffers hold (MaxBufferBytes).
	buffered atomic.Int64

	mu      sync.Mutex
	threads map[string]*Thread
	// keyThreads counts the threads in memory per API key name ("" with
	// auth off, which MaxThreadsPerKey does not bound); threadKey is the
	// key that brought each thread (by id) into memory.
	keyThreads map[string]int
	threadKey  map[string]string
	closing    chan struct{} // closed by Shutdown: streams and sockets end
	// closingCtx is cancelled with closing (for context-based waits).
	closingCtx    context.Context
	closingCancel context.CancelFunc
	shutdown      bool
	closed        atomic.Bool // no run starts after Close
	closeOutbox   sync.Once
	// runMu orders wg.Add against Close's wg.Wait (taken alone, never
	// while holding another lock of the frontend's): see track.
	runMu sync.Mutex
	wg    sync.WaitGroup // run pumps, saves, SSE streams
}

// NewFrontend returns a frontend; it fails on an invalid Config.
func NewFrontend(cfg Config) (*Frontend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	cctx, ccancel := context.WithCancel(context.Background())
	origin := newOrigin()
	var ob *outbox
	if c := cfg.Cluster; c != nil && c.Publish == nil {
		ob = newOutbox(c.Conn, c.MirrorQueue)
		c.Publish = ob.publish
	}
	f := &Frontend{outbox: ob, cfg: cfg, origin: origin, echo: []byte(`{"o":"` + origin + `"`), runCtx: ctx, cancelRun: cancel, threads: map[string]*Thread{}, keyThreads: map[string]int{}, threadKey: map[string]string{}, closing: make(chan struct{}),
		closingCtx: cctx, closingCancel: ccancel}
	if cfg.Cluster != nil {
		f.wg.Add(1)
		go f.watchOwners()
	}
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

// Shutdown ends every SSE stream and WebSocket (close 1001) and refuses new
// ones; runs go on (the bridge drains them). Register it with the server's
// OnShutdown.
func (f *Frontend) Shutdown() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.shutdown {
		f.shutdown = true
		close(f.closing)
		f.closingCancel()
		// Idle threads stop taking commands: new runs start on the
		// instances that stay.
		for _, t := range f.threads {
			t.mu.Lock()
			t.ownLocked()
			t.mu.Unlock()
		}
	}
}

// Close shuts down, cancels every run and waits for the frontend's
// goroutines.
func (f *Frontend) Close() {
	f.Shutdown()
	f.runMu.Lock()
	f.closed.Store(true)
	f.runMu.Unlock()
	f.mu.Lock()
	for _, t := range f.threads {
		t.mu.Lock()
		if t.idle != nil {
			t.idle.Stop()
			t.idle = nil
		}
		t.mu.Unlock()
	}
	f.mu.Unlock()
	f.cancelRun()
	f.wg.Wait()
	f.mu.Lock()
	for _, t := range f.threads {
		t.unfollow()
	}
	f.mu.Unlock()
	if f.outbox != nil {
		f.closeOutbox.Do(f.outbox.close)
	}
}

func (f *Frontend) isClosed() bool { return f.closed.Load() }

// track adds one to what Close waits for (a run's pump, a save, an SSE
// stream); false, adding nothing, once Close has begun.
func (f *Frontend) track() bool {
	f.runMu.Lock()
	defer f.runMu.Unlock()
	if f.isClosed() {
		return false
	}
	f.wg.Add(1)
	return true
}

var errTooManyThreads = canonical.Errorf(canonical.CodeResourceExhausted, "too many threads in memory (MaxThreads)")

// thread returns the thread id, loading it from the store or (with
// create) creating it when it is not in memory; nil when unknown.
func (f *Frontend) thread(ctx context.Context, id string, create bool) (*Thread, error) {
	if f.cfg.CheckThread != nil {
		if err := f.cfg.CheckThread(ctx, id); err != nil {
			if !create && canonical.AsError(err).Code == canonical.CodeNotFound {
				// Another key's thread reads as one nobody used: the
				// answer says no more than that this key has no such
				// thread (a new run on it is refused: not found).
				return nil, nil
			}
			return nil, err
		}
	}
	f.mu.Lock()
	if t := f.threads[id]; t != nil {
		f.mu.Unlock()
		return t, nil
	}
	f.mu.Unlock()
	var rec *threadRecord
	var rev uint64
	if store := f.cfg.Store; store != nil {
		sctx, cancel := context.WithTimeout(ctx, f.cfg.StoreTimeout)
		var err error
		rec, rev, err = readRecord(sctx, store, id, nil, f.cfg.Logger)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if rec == nil && !create {
		return nil, nil
	}
	f.mu.Lock()
	if t := f.threads[id]; t != nil {
		f.mu.Unlock()
		return t, nil
	}
	key := ""
	if p := canonical.PrincipalFrom(ctx); p != nil {
		key = p.Name
	}
	if err := f.roomLocked(key); err != nil {
		f.mu.Unlock()
		return nil, err
	}
	t := newThread(f, id)
	f.threadKey[id] = key
	f.keyThreads[key]++
	t.rt.rev = rev
	if rec != nil {
		t.rt.known, t.rt.rec = true, *rec
		t.seq = rec.Seq
		if len(rec.Values) > 0 && rec.Seq > 0 {
			// The current state opens the new buffer, as the state at the
			// record's seq: it takes no new seq, so the next event here is
			// the one every instance numbers rec.Seq+1.
			t.seq = rec.Seq - 1
			w := wireEvent{method: methodValues, namespace: []string{}, timeMs: f.cfg.Now().UnixMilli(), data: jsonOrNull(valuesJSON(rec.Values, nil))}
			t.storeLocked(record{seq: rec.Seq, method: w.method, ns: w.namespace, frame: newFrame(rec.Seq, &w)})
		}
	}
	// Whoever finds the thread in the map waits on t.mu until it has
	// caught up with the instance running its runs, if any.
	t.mu.Lock()
	f.threads[id] = t
	f.mu.Unlock()
	t.followLocked()
	t.maybeIdleLocked()
	t.mu.Unlock()
	return t, nil
}

// unfollow ends the thread's subscriptions (it leaves memory).
func (t *Thread) unfollow() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unfollowLocked()
}

func (t *Thread) unfollowLocked() {
	for _, s := range []*nats.Subscription{t.evSub, t.cmdSub} {
		if s != nil {
			_ = s.Unsubscribe()
		}
	}
	t.evSub, t.cmdSub = nil, nil
}

// roomLocked makes room in memory for a new thread of key: at the key's
// bound (MaxThreadsPerKey) one of its own idle threads leaves, at the
// frontend's (MaxThreads) any idle thread does; when none is idle the new
// thread is refused. Called with f.mu held.
func (f *Frontend) roomLocked(key string) error {
	if key != "" && f.keyThreads[key] >= f.cfg.MaxThreadsPerKey {
		if !f.evictIdleLocked(key) {
			return canonical.Errorf(canonical.CodeResourceExhausted, "API key %q has %d threads in use (MaxThreadsPerKey)", key, f.cfg.MaxThreadsPerKey)
		}
	}
	if len(f.threads) >= f.cfg.MaxThreads && !f.evictIdleLocked("") {
		return errTooManyThreads
	}
	f.trimBuffersLocked()
	return nil
}

// trimBuffersLocked evicts idle threads, the longest idle first, while all
// threads' buffers hold more than MaxBufferBytes. Called with f.mu held.
func (f *Frontend) trimBuffersLocked() {
	limit := int64(f.cfg.MaxBufferBytes)
	if f.buffered.Load() <= limit {
		return
	}
	type idleThread struct {
		t     *Thread
		since time.Time
	}
	var idle []idleThread
	for _, t := range f.threads {
		t.mu.Lock()
		if t.idle != nil { // idle, its eviction timer set
			idle = append(idle, idleThread{t, t.idleSince})
		}
		t.mu.Unlock()
	}
	slices.SortFunc(idle, func(a, b idleThread) int { return a.since.Compare(b.since) })
	for _, it := range idle {
		if f.buffered.Load() <= limit {
			return
		}
		it.t.mu.Lock()
		it.t.evictLocked()
		it.t.mu.Unlock()
	}
}

// BufferedBytes is the frames all threads' buffers hold (see
// MaxBufferBytes).
func (f *Frontend) BufferedBytes() int64 { return f.buffered.Load() }

// evictIdleLocked removes from memory one idle thread (of key, unless key
// is empty); false when there is none. Called with f.mu held.
func (f *Frontend) evictIdleLocked(key string) bool {
	for _, t := range f.threads {
		if key != "" && f.threadKey[t.id] != key {
			continue
		}
		t.mu.Lock()
		ok := t.evictLocked()
		t.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// evict removes an idle thread from memory.
func (f *Frontend) evict(t *Thread) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.idle = nil // fired
	t.evictLocked()
}

// evictLocked removes the thread from memory unless it is in use (a
// stream, a run, a queued run) or its state is not all in the store (no
// store, or a save under way): what leaves memory is read back whole.
// Called with f.mu and t.mu held.
func (t *Thread) evictLocked() bool {
	f := t.f
	if t.conns > 0 || t.rt.active != nil || len(t.rt.queue) > 0 || f.threads[t.id] != t ||
		t.rt.saving || (t.rt.known && f.cfg.Store == nil) {
		return false
	}
	if t.idle != nil {
		t.idle.Stop()
		t.idle = nil
	}
	delete(f.threads, t.id)
	f.buffered.Add(-int64(t.counted))
	t.counted, t.gone = 0, true
	key := f.threadKey[t.id]
	delete(f.threadKey, t.id)
	if f.keyThreads[key]--; f.keyThreads[key] <= 0 {
		delete(f.keyThreads, key)
	}
	t.unfollowLocked()
	return true
}

// connOpen and connClose count the streams holding a thread in memory.
func (t *Thread) connOpen() {
	t.mu.Lock()
	t.conns++
	t.maybeIdleLocked()
	t.mu.Unlock()
}

func (t *Thread) connClose() {
	t.mu.Lock()
	t.conns--
	t.maybeIdleLocked()
	t.mu.Unlock()
}

// httpError writes a transport-level failure: {"error","message"} (1.2).
func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b := append([]byte(`{"error":`), appendString(nil, code)...)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	_, _ = w.Write(append(b, '}', '\n'))
}

func canonicalHTTPError(w http.ResponseWriter, err error) {
	ce := canonical.AsError(err)
	status := httpStatus(ce.Code)
	if errors.Is(err, errTooManyThreads) {
		status = http.StatusServiceUnavailable
	}
	httpError(w, status, wireCode(ce.Code), ce.Message)
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
	cmd.principal = canonical.PrincipalFrom(r.Context())
	th, err := f.thread(r.Context(), r.PathValue("thread_id"), cmd.method == "run.start")
	if err != nil {
		writeJSON(w, errorFrame(int64(cmd.id), asProtoError(err)))
		return
	}
	result, applied, pe := f.execute(th, cmd)
	if pe != nil {
		writeJSON(w, errorFrame(int64(cmd.id), pe))
		return
	}
	writeJSON(w, successFrame(cmd.id, result, th.id, applied))
}

func writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// serveState is LangGraph's GET /threads/{id}/state (hydration; 404 when
// the thread has no state).
func (f *Frontend) serveState(w http.ResponseWriter, r *http.Request) {
	th, err := f.thread(r.Context(), r.PathValue("thread_id"), false)
	if err != nil {
		canonicalHTTPError(w, err)
		return
	}
	if th == nil {
		httpError(w, http.StatusNotFound, errNoSuchRun, "thread not found")
		return
	}
	f.refresh(th)
	th.mu.Lock()
	if !th.rt.known {
		th.mu.Unlock()
		httpError(w, http.StatusNotFound, errNoSuchRun, "thread has no state")
		return
	}
	// The rest is written apart: the values are the whole conversation,
	// and appendString may grow the array it writes to, whatever its size.
	rest := []byte(`,"next":[],"tasks":[],"metadata":{},"created_at":null,"checkpoint":`)
	if h := th.rt.rec.Head; h != "" {
		rest = append(rest, `{"thread_id":`...)
		rest = appendString(rest, th.id)
		rest = append(rest, `,"checkpoint_ns":"","checkpoint_id":`...)
		rest = appendString(rest, h)
		rest = append(rest, '}')
	} else {
		rest = append(rest, "null"...)
	}
	rest = append(rest, `,"interrupts":`...)
	rest = append(appendInterrupts(rest, th.rt.rec.Interrupts), '}')
	b := make([]byte, 0, len(`{"values":`)+stateBytes(th.rt.rec.Values)+len(rest)+1) // +1: writeJSON's newline
	b = appendValuesJSON(append(b, `{"values":`...), th.rt.rec.Values, nil)
	th.mu.Unlock()
	writeJSON(w, append(b, rest...))
}

func appendInterrupts(b []byte, in []interruptRec) []byte {
	b = append(b, '[')
	for i, x := range in {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, x.ID)
		b = append(b, `,"value":`...)
		b = append(b, x.Payload...)
		b = append(b, '}')
	}
	return append(b, ']')
}

// serveCancel is LangGraph's POST /threads/{id}/runs/{run_id}/cancel: it
// cancels the run if it is active or queued. The run ends with a failed
// lifecycle event whose error starts "cancelled: ".
func (f *Frontend) serveCancel(w http.ResponseWriter, r *http.Request) {
	th, err := f.thread(r.Context(), r.PathValue("thread_id"), false)
	if err != nil {
		canonicalHTTPError(w, err)
		return
	}
	run := r.PathValue("run_id")
	if th != nil {
		if th.cancelRun(run) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		// The run may be on another instance.
		cmd := append([]byte(`{"id":0,"method":"`+cancelMethod+`","params":{"run_id":`), appendString(nil, run)...)
		if _, _, pe, ok := f.forward(th, append(cmd, "}}"...), canonical.PrincipalFrom(r.Context())); ok {
			if pe == nil {
				w.WriteHeader(http.StatusNoContent)
			} else {
				httpError(w, http.StatusNotFound, pe.Code, pe.Message)
			}
			return
		}
	}
	httpError(w, http.StatusNotFound, errNoSuchRun, "no active or queued run "+strconv.Quote(run))
}

// cancelRun cancels run if it is the thread's active run, or removes it
// from the queue; false when it is neither.
func (t *Thread) cancelRun(run string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a := t.rt.active; a != nil && a.pr.id == run {
		a.cancel()
		return true
	}
	for i, q := range t.rt.queue {
		if q.id == run {
			t.rt.queue = append(t.rt.queue[:i], t.rt.queue[i+1:]...)
			t.ownLocked()
			return true
		}
	}
	return false
}

// streamThread is the thread of a stream request (SSE or WebSocket),
// created if new; while shutting down, or when the thread cannot be had,
// it answers the request itself and returns false.
func (f *Frontend) streamThread(w http.ResponseWriter, r *http.Request) (*Thread, bool) {
	select {
	case <-f.closing:
		httpError(w, http.StatusServiceUnavailable, errUnknownError, "server is shutting down")
		return nil, false
	default:
	}
	th, err := f.thread(r.Context(), r.PathValue("thread_id"), true)
	if err != nil {
		canonicalHTTPError(w, err)
		return nil, false
	}
	return th, true
}

// sseBatch is how many events an SSE stream takes from the buffer at once.
const sseBatch = 256

// streamSince reads an SSE stream request's since: the request's own, or
// else Last-Event-ID; bad names the rule broken.
func streamSince(p params, r *http.Request) (since uint64, has bool, bad string) {
	if p.has("since") {
		s, ok := uintParam(p["since"])
		if !ok {
			return 0, false, "event stream request: since must be a non-negative integer"
		}
		return s, true, ""
	}
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		s, ok := seqText(h)
		if !ok {
			return 0, false, "Last-Event-ID must be a decimal seq below 2^53"
		}
		return s, true, ""
	}
	return 0, false, ""
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
	since, hasSince, bad := streamSince(p, r)
	if bad != "" {
		httpError(w, http.StatusBadRequest, errInvalidArgument, bad)
		return
	}
	th, ok := f.streamThread(w, r)
	if !ok {
		return
	}
	if !f.track() {
		httpError(w, http.StatusServiceUnavailable, errUnknownError, "server is shutting down")
		return
	}
	th.connOpen()
	s := &sseStream{f: f, th: th, flt: flt, ended: make(chan struct{})}
	s.state.Store(writerRunning) // the handler is the first writer
	var first []record
	var g *gap
	s.rd, first, g = th.attach(since, hasSince, s.kick)
	// The pinned states attach returns are not filtered; what read
	// returns is.
	first = slices.DeleteFunc(first, func(rec record) bool { return !flt.match(&rec) })
	s.hb = time.AfterFunc(f.cfg.Heartbeat, s.heartbeat)
	if !s.open(w, r) {
		s.close()
		return
	}
	if !s.write(first, g) {
		s.close()
		return
	}
	s.run()
	if s.conn == nil {
		<-s.ended // the writes go through w: the handler stays
	}
}
