package responses

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// upgrader accepts any origin: a socket carries no cookies (the API key
// comes in the Authorization header, checked before the upgrade).
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// sockets are a frontend's open WebSockets (WebSocket mode,
// https://developers.openai.com/api/docs/guides/websocket-mode).
type sockets struct {
	mu     sync.Mutex
	open   map[*wsSession]struct{}
	closed bool
	wg     sync.WaitGroup
}

// wsSession is one WebSocket of OpenAI's WebSocket mode: the client sends
// response.create messages, each the body of a POST /v1/responses, and
// the responses are answered one at a time, each as its stream's events,
// one message each. A request refused before its response begins is an
// error message (wsError); the socket stays open.
type wsSession struct {
	f    *Frontend
	conn *wsconn.Conn
	// ctx keeps the upgrade request's values (the caller's API key); it
	// ends when the socket does or the frontend closes, cancelling the
	// response under way.
	ctx    context.Context
	cancel context.CancelFunc
	// last is the response this socket answered last: previous_response_id
	// naming it continues it even with store false, as OpenAI keeps the
	// latest response of a socket in the socket's memory.
	last *record
}

// serveWebSocket answers GET /v1/responses that asks for a WebSocket.
func (f *Frontend) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	s, e := f.admitSocket(r.Context())
	if e != nil {
		e.write(w)
		return
	}
	conn, err := wsconn.Upgrade(&upgrader, w, r, nil, wsconn.Config{MaxMessageBytes: f.cfg.MaxInputBytes, Logger: f.log})
	if err != nil {
		f.sockets.leave(s) // the upgrader has answered
		return
	}
	s.conn = conn
	go s.serve() // past the handler: see wsconn.Upgrade
}

// admitSocket registers a socket unless the frontend is closed or has
// MaxWebSockets open.
func (f *Frontend) admitSocket(reqCtx context.Context) (*wsSession, *apiError) {
	ss := &f.sockets
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch {
	case ss.closed:
		return nil, &apiError{status: http.StatusServiceUnavailable, msg: "The server is shutting down."}
	case len(ss.open) >= f.cfg.MaxWebSockets:
		return nil, &apiError{status: http.StatusTooManyRequests, code: "websocket_connection_limit_reached",
			msg: fmt.Sprintf("Too many open WebSockets (max_websockets %d).", f.cfg.MaxWebSockets)}
	}
	s := &wsSession{f: f}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(reqCtx))
	if ss.open == nil {
		ss.open = map[*wsSession]struct{}{}
	}
	ss.open[s] = struct{}{}
	ss.wg.Add(1)
	return s, nil
}

// leave forgets s.
func (ss *sockets) leave(s *wsSession) {
	s.cancel()
	ss.mu.Lock()
	delete(ss.open, s)
	ss.mu.Unlock()
	ss.wg.Done()
}

// close ends every socket (the response under way is cancelled, and
// recorded so) and waits for them.
func (ss *sockets) close() {
	ss.mu.Lock()
	ss.closed = true
	for s := range ss.open {
		s.cancel()
	}
	ss.mu.Unlock()
	ss.wg.Wait()
}

// serve answers the socket's messages until it ends. A reader goroutine
// keeps reading while a response is written, so that a client that
// leaves cancels it at once; it holds at most one message for the next.
func (s *wsSession) serve() {
	defer s.f.sockets.leave(s)
	msgs, reading := make(chan []byte), make(chan struct{})
	defer func() { <-reading }() // after the Close below, which ends its Read
	go func() {
		defer close(reading)
		defer s.cancel()
		for {
			typ, data, err := s.conn.Read(s.ctx)
			if err != nil {
				return
			}
			if typ != websocket.TextMessage {
				data = nil // refused below
			}
			select {
			case msgs <- data:
			case <-s.ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case data := <-msgs:
			s.handle(data)
		case <-s.ctx.Done():
			_ = s.conn.Close(websocket.CloseGoingAway, "server closing")
			return
		}
	}
}

// handle answers one message.
func (s *wsSession) handle(data []byte) {
	if data == nil {
		s.refuse(invalid("", "Messages must be JSON text."))
		return
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		s.refuse(invalid("", "We could not parse the JSON of your message: "+jsonErrorText(err)))
		return
	}
	switch head.Type {
	case "response.create":
		s.create(data)
	case "response.processed":
		// Codex's note that it has read a response: nothing to answer.
	default:
		s.refuse(invalid("type", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'response.create'.", head.Type)))
	}
}

// refuse sends e as an error message.
func (s *wsSession) refuse(e *apiError) {
	_ = s.conn.SendWait(s.ctx, websocket.TextMessage, e.socketMessage())
}

// create answers a response.create: the response streamed as messages,
// or an error message when it is refused before it begins.
func (s *wsSession) create(data []byte) {
	f := s.f
	c, e := decodeCreate(data)
	if e == nil {
		e = c.validate()
	}
	switch {
	case e != nil:
	case c.Background != nil && *c.Background:
		e = &apiError{status: http.StatusBadRequest, param: "background", code: "unsupported_parameter",
			msg: "Unsupported parameter: 'background' is not supported over a WebSocket."}
	default:
		if _, ok := canonical.VisibleTarget(f.cfg.Runner, canonical.PrincipalFrom(s.ctx), c.Model); !ok {
			e = modelNotFound(c.Model)
		}
	}
	var p *prepared
	if e == nil {
		p, e = f.prepare(s.ctx, c, s.last)
	}
	if e != nil {
		s.refuse(e)
		return
	}
	out := &writer{sw: &wsEvents{conn: s.conn, ctx: s.ctx}}
	enc := newEncoder(p.r, c.Reasoning != nil && c.Reasoning.Summary != nil, f.cfg.MaxOutputBytes, out.event)
	if c.Generate != nil && !*c.Generate {
		s.warmUp(p, enc, out)
		return
	}
	stream, err := f.cfg.Runner.Run(s.ctx, p.req)
	if err != nil {
		f.forget(s.ctx, p)
		s.refuse(fromCanonical(canonical.AsError(err)))
		return
	}
	stream = canonical.AnswerStream(stream, f.cfg.MaxOutputBytes) // an agent's answer, on the root (doc.go)
	gone := f.pump(stream, enc, out)
	_ = stream.Close() // cancels the run if the client left
	s.done(p, enc, out, gone)
}

// warmUp answers a response.create with generate false: the response
// begins and completes with no output and no run, and the socket keeps its
// input for the next response to continue.
func (s *wsSession) warmUp(p *prepared, enc *encoder, out *writer) {
	gone := enc.start() != nil || enc.end(canonical.StatusCompleted, nil, time.Now()) != nil || out.isGone()
	s.done(p, enc, out, gone)
}

// done records the ended response, keeps it as the socket's last, and
// sends the events that end it.
func (s *wsSession) done(p *prepared, enc *encoder, out *writer, gone bool) {
	s.f.finish(s.ctx, p, enc)
	p.conv.Response = *enc.r
	s.last = p.conv
	if !gone {
		out.end(true)
	}
}

// wsEvents writes a response's events as a WebSocket's text messages, one
// event each, as the SSE stream's data; there is no [DONE], and the
// socket's own pings keep it alive.
type wsEvents struct {
	conn   *wsconn.Conn
	ctx    context.Context
	queued [][]byte
}

// QueueEvent implements eventWire.
func (q *wsEvents) QueueEvent(_, _ string, data []byte) error {
	q.queued = append(q.queued, bytes.Clone(data)) // the writer reuses data
	return nil
}

// Queued implements eventWire.
func (q *wsEvents) Queued() int { return len(q.queued) }

// Flush implements eventWire: it waits for room in the socket's queue
// (wsconn.Conn.SendWait), so a slow reader slows the response.
func (q *wsEvents) Flush() error {
	defer func() {
		clear(q.queued)
		q.queued = q.queued[:0]
	}()
	for _, m := range q.queued {
		if err := q.conn.SendWait(q.ctx, websocket.TextMessage, m); err != nil {
			return err
		}
	}
	return nil
}

// Comment implements eventWire: nothing (the socket pings).
func (q *wsEvents) Comment(string) error { return nil }

// Data implements eventWire: nothing (no [DONE] on a socket).
func (q *wsEvents) Data([]byte) error { return nil }
