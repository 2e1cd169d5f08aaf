package glide

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// FrontendConfig configures the chatStream frontend. Zero fields take the
// documented defaults; no setting disables a limit.
type FrontendConfig struct {
	// Runner runs the requests; required.
	Runner canonical.Runner
	// Logger receives connection records (never payloads). Default discards.
	Logger *slog.Logger
	// MaxMessageBytes bounds one request frame; a larger one closes the
	// connection with 1009 (checked from the frame header). Default 1 MiB.
	MaxMessageBytes int64
	// MaxInFlight bounds the requests running at once on one connection;
	// one more is refused with an error reply. Default 64.
	MaxInFlight int
	// MaxConnections bounds the open chatStream connections; an upgrade
	// beyond it gets 503. Default 1024.
	MaxConnections int
	// MaxConnectionsPerKey bounds one API key's open connections, so that
	// one key cannot take every connection from the others; an upgrade
	// beyond it gets 503. Default MaxConnections/4.
	MaxConnectionsPerKey int
	// SendQueue is how many frames may wait for a connection's writer; a
	// client that lets it fill is cut off with 1008 (internal/wsconn).
	// Default 1024.
	SendQueue int
	// WriteTimeout bounds each frame write. Default 10s.
	WriteTimeout time.Duration
	// PingInterval is how often the server pings; a client that answers
	// neither pings nor sends anything for twice this is cut off. Default 30s.
	PingInterval time.Duration
	// CloseGrace is how long Close lets draining connections send their
	// last frames before it closes them. Default 2s.
	CloseGrace time.Duration
	// SlowConsumers counts the clients cut off for not reading; nil
	// counts nothing.
	SlowConsumers wsconn.Counter
	// Now stamps created_at. Default time.Now.
	Now func() time.Time
}

func (c FrontendConfig) withDefaults() FrontendConfig {
	c.CloseGrace = cmp.Or(c.CloseGrace, 2*time.Second)
	c.MaxMessageBytes = cmp.Or(c.MaxMessageBytes, 1<<20)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, 64)
	c.MaxConnections = cmp.Or(c.MaxConnections, 1024)
	c.MaxConnectionsPerKey = cmp.Or(c.MaxConnectionsPerKey, max(c.MaxConnections/4, 1))
	c.SendQueue = cmp.Or(c.SendQueue, 1024)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Frontend serves Glide's chatStream WebSocket API. See the package
// documentation for the protocol and the shutdown sequence.
type Frontend struct {
	cfg FrontendConfig
	up  websocket.Upgrader

	mu       sync.Mutex
	conns    map[*conn]struct{}
	keyConns map[string]int // open connections per API key name (auth on)
	shutdown bool
	handlers sync.WaitGroup // one per admitted connection
}

// NewFrontend returns the frontend.
func NewFrontend(cfg FrontendConfig) *Frontend {
	return &Frontend{cfg: cfg.withDefaults(), conns: map[*conn]struct{}{}, keyConns: map[string]int{}}
}

// Mount registers GET /v1/language/{router}/chatStream on mux.
func (f *Frontend) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/language/{router}/chatStream", f.serveChatStream)
}

// Shutdown begins a graceful shutdown (GEP-8's rollout rules): upgrades
// are refused from now on, idle connections are closed with 1001 at once,
// and busy ones stop taking requests and close with 1001 when their last
// request has sent its terminal frame. It does not wait; runs still going
// when the daemon's shutdown timeout ends are cancelled by the bridge, and
// each sends its error reply before its connection closes. It is meant for
// http.Server.RegisterOnShutdown and may be called more than once.
func (f *Frontend) Shutdown() {
	f.mu.Lock()
	f.shutdown = true
	conns := make([]*conn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
}

// Close refuses upgrades, lets connections that are draining send their
// last frames (their requests' terminal replies) for up to CloseGrace,
// then closes every connection left with 1001, which cancels its runs,
// and waits for their handlers to return.
func (f *Frontend) Close() {
	f.mu.Lock()
	f.shutdown = true
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.handlers.Wait(); close(done) }()
	t := time.NewTimer(f.cfg.CloseGrace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	f.mu.Lock()
	conns := make([]*conn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
	<-done
}

// Errors of the HTTP exchange before the upgrade.
var (
	errRouterNotFound = &canonical.Error{Code: canonical.CodeNotFound, Message: "router is not found"}
	errShuttingDown   = &canonical.Error{Code: canonical.CodeUnavailable, Message: "server is shutting down"}
)

func (f *Frontend) serveChatStream(w http.ResponseWriter, r *http.Request) {
	router := r.PathValue("router")
	if !websocket.IsWebSocketUpgrade(r) {
		// As Glide (fiber.ErrUpgradeRequired), checked before the router.
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUpgradeRequired)
		_, _ = io.WriteString(w, "Upgrade Required")
		return
	}
	info, ok := canonical.VisibleTarget(f.cfg.Runner, canonical.PrincipalFrom(r.Context()), router)
	if !ok {
		writeHTTPError(w, http.StatusNotFound, errRouterNotFound)
		return
	}
	c, err := f.admit(r.Context(), router, info)
	if err != nil {
		writeHTTPError(w, http.StatusServiceUnavailable, err)
		return
	}
	wc, uerr := wsconn.Upgrade(&f.up, w, r, nil, wsconn.Config{
		MaxMessageBytes: f.cfg.MaxMessageBytes,
		SendQueue:       f.cfg.SendQueue,
		WriteTimeout:    f.cfg.WriteTimeout,
		PingInterval:    f.cfg.PingInterval,
		Logger:          f.cfg.Logger,
		SlowConsumers:   f.cfg.SlowConsumers,
	})
	if uerr != nil {
		f.forget(c)
		return // the Upgrader has replied with the HTTP error
	}
	go func() { // past the handler: see wsconn.Upgrade
		defer f.forget(c)
		c.serve(wc)
	}()
}

// admit registers a connection unless shutting down or at MaxConnections.
// The connection's runs start under reqCtx's values (the caller's API key,
// which the bridge checks, claims and counts each run for; the trace) and
// end with the connection, not with the upgrade request.
func (f *Frontend) admit(reqCtx context.Context, router string, info canonical.TargetInfo) (*conn, *canonical.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return nil, errShuttingDown
	}
	if len(f.conns) >= f.cfg.MaxConnections {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "too many chatStream connections (MaxConnections %d)", f.cfg.MaxConnections)
	}
	var key string
	if p := canonical.PrincipalFrom(reqCtx); p != nil {
		key = p.Name
	}
	if key != "" && f.keyConns[key] >= f.cfg.MaxConnectionsPerKey {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "too many chatStream connections for this API key (MaxConnectionsPerKey %d)", f.cfg.MaxConnectionsPerKey)
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(reqCtx))
	c := &conn{
		f: f, router: router, key: key, ctx: ctx, cancel: cancel,
		model:    model{ID: info.Backend, Provider: "interlingua", Name: router},
		inflight: map[string]*request{},
		log:      f.cfg.Logger.With("protocol", "glide", "router", router),
	}
	f.conns[c] = struct{}{}
	if key != "" {
		f.keyConns[key]++
	}
	f.handlers.Add(1)
	return c, nil
}

func (f *Frontend) forget(c *conn) {
	f.mu.Lock()
	delete(f.conns, c)
	if c.key != "" {
		if f.keyConns[c.key]--; f.keyConns[c.key] == 0 {
			delete(f.keyConns, c.key)
		}
	}
	f.mu.Unlock()
	f.handlers.Done()
}

// writeHTTPError writes Glide's HTTP error body {"name","message"}.
func writeHTTPError(w http.ResponseWriter, status int, err *canonical.Error) {
	name := errorName(err.Code)
	b, _ := json.Marshal(wireError{Name: name, Message: errorMessage(name, err.Code, err.Message)}, writeOptions...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Causes of cancellation, reported in the cancelled request's error reply.
var (
	errCancelledByClient = errors.New("cancelled by the client")
	errConnectionClosed  = errors.New("connection closed")
)

// conn is one chatStream connection. Its handler goroutine reads frames
// and starts a goroutine per request (serveRequest); all of them queue
// frames on the one wsconn.Conn, whose writer goroutine is the only one
// writing to the socket. The handler returns after every request goroutine
// has.
type conn struct {
	f      *Frontend
	router string
	key    string // the API key's name; "" with auth off
	model  model  // named in chunks when the run names none
	log    *slog.Logger
	ctx    context.Context // cancelled when the connection ends: cancels every run
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // request goroutines and closeAway

	mu       sync.Mutex
	ws       *wsconn.Conn        // set by serve
	inflight map[string]*request // ids whose terminal frame is not yet queued
	busy     int                 // request goroutines not yet past their terminal frame
	draining bool                // shutting down: no new requests; close when idle
	closing  bool                // a close has been started
	ended    bool                // the read loop has ended; no more goroutines start
}

// request is one request in flight.
type request struct {
	cancel context.CancelCauseFunc
}

// serve runs the connection until it ends.
func (c *conn) serve(ws *wsconn.Conn) {
	c.log.Debug("chatStream connection open")
	c.mu.Lock()
	c.ws = ws
	c.mu.Unlock()
	c.closeIfDrained()
	var err error
	for {
		var data []byte
		if _, data, err = ws.Read(c.ctx); err != nil {
			break
		}
		c.handle(data)
	}
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	c.cancel(errConnectionClosed)
	c.wg.Wait()
	_ = ws.Close(wsconn.CloseGoingAway, "")
	c.log.Debug("chatStream connection closed", "close_code", wsconn.CloseCode(err), "err", err)
}

// handle dispatches one request frame.
func (c *conn) handle(data []byte) {
	rf, fe := decodeRequest(data)
	if fe != nil {
		c.reject(fe.ID, fe.Metadata, fe.Err)
		return
	}
	if rf.Cancel {
		c.mu.Lock()
		if rq := c.inflight[rf.ID]; rq != nil {
			rq.cancel(errCancelledByClient)
		}
		c.mu.Unlock()
		return // an id not in flight has ended already: nothing to do
	}
	c.mu.Lock()
	var refuse *canonical.Error
	switch {
	case c.draining:
		refuse = errShuttingDown
	case c.inflight[rf.ID] != nil:
		c.mu.Unlock()
		c.refuseDuplicate(rf.ID, rf.Metadata)
		return
	case c.busy >= c.f.cfg.MaxInFlight:
		refuse = canonical.Errorf(canonical.CodeResourceExhausted, "too many requests in flight on this connection (MaxInFlight %d)", c.f.cfg.MaxInFlight)
	}
	if refuse != nil {
		c.mu.Unlock()
		c.reject(rf.ID, rf.Metadata, refuse)
		return
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	rq := &request{cancel: cancel}
	c.inflight[rf.ID] = rq
	c.busy++
	c.wg.Add(1)
	c.mu.Unlock()
	go c.serveRequest(ctx, rf, rq)
}

// refuseDuplicate answers a request whose id is in flight already: it is
// not run, and the error frame says so without a finish_reason, so it is
// not the in-flight request's terminal frame (which always has one) and
// that request's stream goes on. Glide itself runs both, with frames no
// client can tell apart (its chat_stream.go keys nothing by id; issue 36 #5).
func (c *conn) refuseDuplicate(id string, metadata json.Value) {
	e := newReplyEncoder(c.f.cfg.Now, id, c.router, metadata, c.model)
	c.send(e.errorFrame("payload_parse_error", "request id already in flight: this request was not run; the one in flight goes on", false))
}

// reject replies to a refused frame with a terminal error.
func (c *conn) reject(id string, metadata json.Value, err *canonical.Error) {
	c.send(newReplyEncoder(c.f.cfg.Now, id, c.router, metadata, c.model).fail(err))
}

// send queues a frame, waiting (up to half the write timeout) while the queue
// is full: a request producing faster than the socket drains is held back,
// and only a peer that stops reading is cut off. False when the connection
// has ended.
func (c *conn) send(frame []byte) bool {
	return c.ws.SendWait(context.Background(), websocket.TextMessage, frame) == nil
}

// serveRequest runs one request and sends its frames, ending with exactly
// one terminal frame (unless the connection ends first). The id is free
// for reuse before the terminal frame is queued, so a client that reuses
// it as soon as it has read that frame is not refused.
func (c *conn) serveRequest(ctx context.Context, rf *requestFrame, rq *request) {
	defer c.wg.Done()
	defer c.release(rf.ID, rq)
	enc := newReplyEncoder(c.f.cfg.Now, rf.ID, c.router, rf.Metadata, c.model)
	stream, err := c.f.cfg.Runner.Run(ctx, rf.canonical(c.router, c.model.ID))
	if err != nil {
		ce := canonical.AsError(err)
		if ctx.Err() != nil {
			ce = canonical.Errorf(canonical.CodeCanceled, "%s", c.cancelMessage(ctx))
		}
		c.forget(rf.ID, rq)
		c.send(enc.fail(ce))
		return
	}
	stream = canonical.AnswerStream(stream, 0) // the agent's answer, on the root (doc.go)
	defer stream.Close()
	for {
		ev, err := stream.Recv()
		if err != nil {
			if !enc.done {
				if errors.Is(err, io.EOF) {
					err = canonical.Errorf(canonical.CodeInternal, "run ended without a terminal event")
				}
				c.forget(rf.ID, rq)
				c.send(enc.fail(canonical.AsError(err)))
			}
			return
		}
		if st, ok := canonical.TerminalOf(ev); ok && st == canonical.StatusCancelled {
			enc.cancelMsg = c.cancelMessage(ctx)
		}
		frame := enc.event(ev)
		if enc.done {
			c.forget(rf.ID, rq)
		}
		if frame != nil && !c.send(frame) {
			return // the connection has ended: Close cancels the run
		}
	}
}

// cancelMessage says why a request's run was cancelled.
func (c *conn) cancelMessage(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil {
		return cause.Error()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return errShuttingDown.Message
	}
	return ""
}

// forget frees a request's id.
func (c *conn) forget(id string, rq *request) {
	c.mu.Lock()
	if c.inflight[id] == rq {
		delete(c.inflight, id)
	}
	c.mu.Unlock()
}

// release ends a request goroutine's claim on the connection; the last
// one of a draining connection closes it, after its terminal frame.
func (c *conn) release(id string, rq *request) {
	rq.cancel(nil)
	c.forget(id, rq)
	c.mu.Lock()
	c.busy--
	c.mu.Unlock()
	c.closeIfDrained()
}

// drain stops the connection taking requests and closes it once idle.
func (c *conn) drain() {
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
	c.closeIfDrained()
}

// closeIfDrained closes a draining connection with no request in flight
// with 1001, once. The close runs in its own goroutine, owned by the
// connection, so that neither Shutdown nor a request goroutine waits for
// a slow client's close handshake.
func (c *conn) closeIfDrained() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.draining || c.closing || c.ended || c.ws == nil || c.busy > 0 {
		return
	}
	c.closing = true
	c.wg.Add(1)
	go c.closeAway(c.ws)
}

func (c *conn) closeAway(ws *wsconn.Conn) {
	defer c.wg.Done()
	_ = ws.Close(wsconn.CloseGoingAway, errShuttingDown.Message)
}

// abort ends the connection now, cancelling its runs.
func (c *conn) abort() {
	c.mu.Lock()
	c.draining = true
	ws := c.ws
	c.mu.Unlock()
	c.cancel(errShuttingDown)
	if ws != nil {
		_ = ws.Close(wsconn.CloseGoingAway, errShuttingDown.Message)
	}
}
