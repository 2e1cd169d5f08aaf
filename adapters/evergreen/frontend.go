package evergreen

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// WebSocketPath is where the proto3-JSON WebSocket transport is served.
const WebSocketPath = "/evergreen/ws"

// Frontend serves evergreen.v2.EvergreenService/StartSession: over gRPC,
// gRPC-Web and Connect (one connect-go handler; bidi needs HTTP/2, h2c or
// TLS) and as proto3-JSON SessionMessages over a WebSocket at
// WebSocketPath. It implements evergreenv2connect.EvergreenServiceHandler.
type Frontend struct {
	cfg  FrontendConfig
	refs *refPolicy

	mu       sync.Mutex
	sessions map[*session]struct{}
	draining bool
}

// NewFrontend returns a frontend; cfg is validated and its zero fields
// take their defaults.
func NewFrontend(cfg FrontendConfig) (*Frontend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Frontend{cfg: cfg, refs: newRefPolicy(cfg.FetchRefs), sessions: map[*session]struct{}{}}, nil
}

// Mount registers the gRPC/Connect handler and the WebSocket endpoint.
func (f *Frontend) Mount(mux *http.ServeMux) {
	path, h := evergreenv2connect.NewEvergreenServiceHandler(f,
		connect.WithReadMaxBytes(f.cfg.MaxMessageBytes),
		connect.WithCompressMinBytes(compressMinBytes))
	mux.Handle(path, withTransport(h))
	mux.HandleFunc("GET "+WebSocketPath, f.serveWebSocket)
}

// Shutdown refuses new actions in every session and ends each session, with
// UNAVAILABLE (WebSocket: close 1001), once its running actions finish.
// Register it with http.Server.RegisterOnShutdown.
func (f *Frontend) Shutdown() {
	f.mu.Lock()
	f.draining = true
	ss := make([]*session, 0, len(f.sessions))
	for s := range f.sessions {
		ss = append(ss, s)
	}
	f.mu.Unlock()
	for _, s := range ss {
		s.drain()
	}
}

func (f *Frontend) track(s *session) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	f.sessions[s] = struct{}{}
	return true
}

func (f *Frontend) forget(s *session) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, s)
}

// transport is what the gRPC handler needs from under connect-go: the
// request body, to unblock a Receive when the session aborts, and the
// response controller, to fail a write blocked on a client that does not
// read.
type transport struct {
	body *closeOnce
	rc   *http.ResponseController
	w    *holdWriter
}

// holdWriter is the ResponseWriter connect-go writes to. While hold is set
// (a send whose action has its next event at hand) the flush connect-go
// makes after each message is held back, so a burst of messages shares
// HTTP/2 DATA frames (up to the server's 4 KiB write buffer) and writes;
// flushHeld does the flush held back. Both run under the session's send
// lock.
type holdWriter struct {
	http.ResponseWriter
	hold, held bool
}

// Flush implements http.Flusher (connect-go requires it of a streaming
// handler's writer).
func (w *holdWriter) Flush() {
	if w.hold {
		w.held = true
		return
	}
	w.held = false
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *holdWriter) flushHeld() {
	if w.held {
		w.hold = false
		w.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *holdWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type transportKey struct{}

// closeOnce is a request body that may be closed from another goroutine
// (the session's abort) and again by connect-go.
type closeOnce struct {
	io.ReadCloser
	once sync.Once
	err  error
}

func (b *closeOnce) Close() error {
	b.once.Do(func() { b.err = b.ReadCloser.Close() })
	return b.err
}

func withTransport(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := &transport{body: &closeOnce{ReadCloser: r.Body}, rc: http.NewResponseController(w), w: &holdWriter{ResponseWriter: w}}
		r.Body = t.body
		h.ServeHTTP(t.w, r.WithContext(context.WithValue(r.Context(), transportKey{}, t)))
	})
}

// StartSession serves one session over gRPC, gRPC-Web or Connect. The
// client's half-close ends its input, not the session: running actions
// finish and stream their outputs, then the stream ends with OK. An abort
// ends it at once with the status of the abort table (errors.go).
func (f *Frontend) StartSession(ctx context.Context, stream *connect.BidiStream[ev.SessionMessage, ev.SessionMessage]) error {
	s := f.newSession(ctx, false)
	var sendMu sync.Mutex
	t, _ := ctx.Value(transportKey{}).(*transport)
	s.out = func(m *ev.SessionMessage, hold bool) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if t == nil {
			return stream.Send(m)
		}
		t.w.hold = hold
		err := stream.Send(m)
		t.w.hold = false
		return err
	}
	if t != nil {
		s.flush = func() {
			sendMu.Lock()
			defer sendMu.Unlock()
			t.w.flushHeld()
		}
	}
	s.interrupt = func(*canonical.Error, bool) {
		if t != nil {
			_ = t.body.Close()
		}
	}
	s.unblock = func() {
		if t != nil {
			_ = t.rc.SetWriteDeadline(time.Now())
		}
	}
	if !f.track(s) {
		s.stop()
		return connect.NewError(connect.CodeUnavailable, errors.New("server is shutting down"))
	}
	defer f.forget(s)
	s.watchIdle()
	s.log.Debug("session start", "transport", stream.Peer().Protocol)
	for {
		m, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			s.endInput()
			break
		}
		if err != nil {
			s.abort(receiveError(err))
			break
		}
		s.handle(m)
	}
	if e := s.wait(); e != nil {
		return connectError(e)
	}
	s.log.Debug("session end")
	return nil
}

// receiveError is the abort for a failed Receive: connect-go's code (a
// message over MaxMessageBytes is RESOURCE_EXHAUSTED, an undecodable one
// INVALID_ARGUMENT), or CANCELED for a client gone.
func receiveError(err error) *canonical.Error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return canonical.Errorf(canonical.Code(ce.Code()), "receiving: %s", ce.Message())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return canonical.AsError(err)
	}
	return canonical.Errorf(canonical.CodeCanceled, "receiving: %v", err)
}

var (
	jsonIn  = protojson.UnmarshalOptions{DiscardUnknown: true}
	jsonOut = protojson.MarshalOptions{}
)

// serveWebSocket serves one session as proto3-JSON SessionMessages over a
// WebSocket (the actionengine-ts client's transport): text or binary frames
// of UTF-8 JSON in, text frames out. A close frame from the client ends the
// session at once; an abort closes with 4000 + the gRPC code.
func (f *Frontend) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	if len(f.cfg.Keys) > 0 && !f.validKey(r.URL.Query().Get("key")) {
		http.Error(w, "missing or unknown ?key=", http.StatusUnauthorized)
		return
	}
	up := websocket.Upgrader{
		// Browsers connect from any page; the API key, not cookies,
		// authenticates, so cross-origin requests are allowed.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	conn, err := wsconn.Upgrade(&up, w, r, nil, f.cfg.WebSocket)
	if err != nil {
		return // Upgrade has answered with an HTTP error
	}
	go f.serveWebSocketSession(context.WithoutCancel(r.Context()), conn) // past the handler: see wsconn.Upgrade
}

// serveWebSocketSession runs a session on an upgraded connection until it
// ends; readCtx keeps the upgrade request's values (the caller's key).
func (f *Frontend) serveWebSocketSession(readCtx context.Context, conn *wsconn.Conn) {
	s := f.newSession(readCtx, true)
	s.out = func(m *ev.SessionMessage, _ bool) error {
		b, err := jsonOut.Marshal(m)
		if err != nil {
			return canonical.Errorf(canonical.CodeInternal, "encoding a message: %v", err)
		}
		// Waits for room while the client reads slower than the run
		// makes messages (backpressure, as gRPC's flow control is), and
		// cuts off only a client that keeps it full: a burst longer than
		// the queue is not a slow consumer.
		return conn.SendWait(s.ctx, websocket.TextMessage, b)
	}
	s.interrupt = func(e *canonical.Error, shutdown bool) {
		code := closeCode(e.Code)
		if shutdown {
			code = wsconn.CloseGoingAway
		}
		_ = conn.Close(code, e.Message)
	}
	if !f.track(s) {
		_ = conn.Close(wsconn.CloseGoingAway, "server is shutting down")
		s.stop()
		return
	}
	defer f.forget(s)
	s.watchIdle()
	s.log.Debug("session start", "transport", "websocket")
	for {
		_, data, err := conn.Read(readCtx)
		if err != nil {
			s.abort(canonical.Errorf(canonical.CodeCanceled, "websocket closed: %v", err))
			break
		}
		m := &ev.SessionMessage{}
		if err := jsonIn.Unmarshal(data, m); err != nil {
			s.abort(invalid("frame is not a proto3-JSON SessionMessage: %v", err))
			break
		}
		s.handle(m)
	}
	s.wait()
	_ = conn.Close(websocket.CloseNormalClosure, "")
	s.log.Debug("session end")
}

func (f *Frontend) validKey(k string) bool {
	ok := false
	for _, want := range f.cfg.Keys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(want)) == 1 {
			ok = true
		}
	}
	return ok && k != ""
}

// fetchRefs inlines the refs of req whose origin is allowlisted
// (FetchRefs); every other ref stays a ref. Shared nodes are fetched once.
func (f *Frontend) fetchRefs(ctx context.Context, req *canonical.Request) error {
	if len(f.refs.fetch) == 0 {
		return nil
	}
	seen := map[*canonical.Node]bool{}
	var walk func(n *canonical.Node) error
	walk = func(n *canonical.Node) error {
		if n == nil || seen[n] {
			return nil
		}
		seen[n] = true
		for _, c := range n.GetChildren() {
			if err := walk(c); err != nil {
				return err
			}
		}
		if ref := n.GetRef(); ref != "" && f.refs.fetches(ref) {
			data, err := f.fetch(ctx, ref)
			if err != nil {
				return err
			}
			n.Payload = canonical.DataPayload(data)
		}
		return nil
	}
	for _, in := range req.GetInputs() {
		if err := walk(in.GetNode()); err != nil {
			return err
		}
	}
	return nil
}

func (f *Frontend) fetch(ctx context.Context, ref string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.RefTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, ref, nil)
	if err != nil {
		return nil, invalid("ref %q: %v", ref, err)
	}
	resp, err := f.cfg.RefClient.Do(hr)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "fetching ref %q: %v", ref, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "fetching ref %q: HTTP %d", ref, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxRefBytes+1))
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "fetching ref %q: %v", ref, err)
	}
	if int64(len(data)) > f.cfg.MaxRefBytes {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "ref %q is larger than %d bytes (MaxRefBytes)", ref, f.cfg.MaxRefBytes)
	}
	return data, nil
}

var _ evergreenv2connect.EvergreenServiceHandler = (*Frontend)(nil)
