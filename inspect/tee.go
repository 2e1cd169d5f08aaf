package inspect

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/interlingua-dev/interlingua/canonical"
)

// HeaderCapture is the request header that asks for a run's capture.
const HeaderCapture = "X-Interlingua-Inspect"

// exchange is one client request's wire, recorded until a run binds it
// (or dropped with the request).
type exchange struct {
	optIn bool
	w     *wire
}

type exchangeKey struct{}

// optedIn reports whether r asks for its runs' capture.
func optedIn(r *http.Request) bool {
	v, ok := r.Header[HeaderCapture]
	if !ok || len(v) == 0 {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(v[0])) {
	case "0", "off", "false", "no":
		return false
	}
	return true
}

// ownPath reports whether p is the inspector's or a probe's, never recorded.
func ownPath(p string) bool {
	return p == "/inspect" || strings.HasPrefix(p, "/inspect/") || strings.HasPrefix(p, "/v1/inspect/") ||
		p == "/healthz" || p == "/readyz" || p == "/metrics"
}

// Tee records the client wire of the requests whose runs may be captured:
// those asking for it (HeaderCapture), and every request while a target
// is armed (its run's target is not known yet). It wraps the frontends'
// mux, inside auth: the bytes are those the frontend read and wrote.
func (in *Inspector) Tee(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		optIn := optedIn(r)
		if ownPath(r.URL.Path) || (!optIn && !in.anyArmed()) {
			next.ServeHTTP(w, r)
			return
		}
		ex := &exchange{optIn: optIn, w: newWire(in, in.now())}
		ex.w.record(dirIn, true, requestHead(r))
		r = r.WithContext(contextWithExchange(r, ex))
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &teeReadCloser{ReadCloser: r.Body, w: ex.w}
		}
		tw := &teeWriter{ResponseWriter: w, w: ex.w}
		defer func() {
			if tw.conn == nil { // a hijacked exchange ends when its connection closes
				ex.w.finish()
			}
		}()
		next.ServeHTTP(tw, r)
	})
}

func contextWithExchange(r *http.Request, ex *exchange) context.Context {
	return context.WithValue(r.Context(), exchangeKey{}, ex)
}

// teeReadCloser records the request body as the frontend reads it.
type teeReadCloser struct {
	io.ReadCloser
	w *wire
}

func (t *teeReadCloser) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.w.record(dirIn, false, p[:n])
	return n, err
}

// teeWriter records the response as the frontend writes it. It flushes,
// hijacks (recording the connection) and unwraps like the writer it wraps.
type teeWriter struct {
	http.ResponseWriter
	w           *wire
	wroteHeader bool
	conn        *teeConn // the connection Hijack handed out, recorded
}

func (t *teeWriter) WriteHeader(status int) {
	if !t.wroteHeader && status >= 200 {
		t.wroteHeader = true
		t.w.record(dirOut, true, responseHead(status, t.Header()))
	}
	t.ResponseWriter.WriteHeader(status)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if !t.wroteHeader {
		t.WriteHeader(http.StatusOK)
	}
	n, err := t.ResponseWriter.Write(p)
	t.w.record(dirOut, false, p[:n])
	return n, err
}

// Flush implements http.Flusher.
func (t *teeWriter) Flush() { _ = t.FlushError() }

// FlushError is what http.ResponseController calls to flush.
func (t *teeWriter) FlushError() error {
	return http.NewResponseController(t.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the writer's other methods
// (deadlines, full duplex).
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Hijack implements http.Hijacker: the connection handed out records what
// passes through it (a WebSocket's frames). A connection whose reader
// already holds bytes is handed out unrecorded, as it is.
func (t *teeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(t.ResponseWriter).Hijack()
	if err != nil || brw.Reader.Buffered() > 0 {
		return conn, brw, err
	}
	t.w.record(dirOut, true, responseHead(http.StatusSwitchingProtocols, t.Header()))
	t.conn = &teeConn{Conn: conn, w: t.w}
	return t.conn, bufio.NewReadWriter(bufio.NewReader(t.conn), bufio.NewWriter(t.conn)), nil
}

// teeConn records a hijacked connection's bytes; its exchange ends when it
// is closed (a WebSocket outlives the handler that upgraded it).
type teeConn struct {
	net.Conn
	w    *wire
	once sync.Once
}

// Close closes the connection and ends its exchange.
func (c *teeConn) Close() error {
	c.once.Do(c.w.finish)
	return c.Conn.Close()
}

func (c *teeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.w.record(dirIn, false, p[:n])
	return n, err
}

func (c *teeConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.w.record(dirOut, false, p[:n])
	return n, err
}

// tapped is a captured run's stream: each event the frontend receives is
// recorded.
type tapped struct {
	canonical.Stream
	r *Run
}

// Wrap returns s recording into r; s itself when r is nil.
func (r *Run) Wrap(s canonical.Stream) canonical.Stream {
	if r == nil {
		return s
	}
	return &tapped{Stream: s, r: r}
}

func (t *tapped) Recv() (*canonical.Event, error) {
	ev, err := t.Stream.Recv()
	if err == nil {
		t.r.event(ev)
	}
	return ev, err
}

// Buffered forwards the wrapped stream's count (canonical.Buffered).
func (t *tapped) Buffered() int {
	if b, ok := t.Stream.(canonical.Buffered); ok {
		return b.Buffered()
	}
	return 0
}

func (t *tapped) Close() error {
	t.r.closed()
	return t.Stream.Close()
}
