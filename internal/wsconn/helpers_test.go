package wsconn_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// timeout bounds the wait for anything that must happen.
const timeout = 5 * time.Second

// pair serves one WebSocket on loopback with wsconn.Upgrade, as the
// frontends do, and returns the server's Conn with the dialled client. The
// handler returns when the Conn is done; cleanup closes both ends and the
// server.
func pair(tb testing.TB, cfg wsconn.Config) (*wsconn.Conn, *websocket.Conn) {
	c, client, _ := serve(tb, cfg, true)
	return c, client
}

// plainPair is pair with gorilla's own Upgrade and wsconn.New, as the
// backends' dialled connections are wrapped: no held writes.
func plainPair(tb testing.TB, cfg wsconn.Config) (*wsconn.Conn, *websocket.Conn) {
	c, client, _ := serve(tb, cfg, false)
	return c, client
}

// serve is pair (upgrade true) or plainPair, which also returns the server
// side's network connection as accepted, under any wrapping.
func serve(tb testing.TB, cfg wsconn.Config, upgrade bool) (*wsconn.Conn, *websocket.Conn, *gatedConn) {
	tb.Helper()
	conns := make(chan *wsconn.Conn, 1)
	var up websocket.Upgrader
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c *wsconn.Conn
		if upgrade {
			var err error
			if c, err = wsconn.Upgrade(&up, w, r, nil, cfg); err != nil {
				return // Upgrade has replied with the HTTP error
			}
		} else {
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			c = wsconn.New(ws, cfg)
		}
		conns <- c
		<-c.Done()
	}))
	ln := &gatedListener{Listener: srv.Listener, accepted: make(chan *gatedConn, 1)}
	srv.Listener = ln
	srv.Start()
	tb.Cleanup(srv.Close)
	client, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = client.Close() })
	select {
	case c := <-conns:
		tb.Cleanup(func() { _ = c.Close(wsconn.CloseNormal, "") })
		return c, client, <-ln.accepted
	case <-time.After(timeout):
		tb.Fatal("server never wrapped the connection")
		return nil, nil, nil
	}
}

// gatedListener wraps each accepted connection in a gatedConn.
type gatedListener struct {
	net.Listener
	accepted chan *gatedConn
}

func (l *gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	g := &gatedConn{Conn: c}
	select {
	case l.accepted <- g:
	default: // one connection per test
	}
	return g, nil
}

// gatedConn counts the writes made to it and can stall them: while a gate
// is set, each write waits for it to be closed.
type gatedConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
	gate   chan struct{}
}

func (g *gatedConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.writes++
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.Conn.Write(p)
}

// stall makes writes wait until the returned function is called.
func (g *gatedConn) stall() (open func()) {
	gate := make(chan struct{})
	g.mu.Lock()
	g.gate = gate
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.gate = nil
		g.mu.Unlock()
		close(gate)
	}
}

// writeCount is how many writes were made so far.
func (g *gatedConn) writeCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes
}

// readToClose reads the client until the server's close frame and returns
// the messages before it and the close error.
func readToClose(t *testing.T, client *websocket.Conn) ([]string, *websocket.CloseError) {
	t.Helper()
	_ = client.SetReadDeadline(time.Now().Add(timeout))
	var msgs []string
	for {
		_, p, err := client.ReadMessage()
		if err != nil {
			ce, ok := errors.AsType[*websocket.CloseError](err)
			if !ok {
				t.Fatalf("client read after %d messages: %v, want a close frame", len(msgs), err)
			}
			return msgs, ce
		}
		msgs = append(msgs, string(p))
	}
}

// waitDone fails t unless c ends within timeout.
func waitDone(t *testing.T, c *wsconn.Conn) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(timeout):
		t.Fatal("Conn not done")
	}
}

// readResult is what a Read in a goroutine returned.
type readResult struct {
	typ  int
	data []byte
	err  error
}

// readAsync runs c.Read(ctx) once in a goroutine and delivers the result;
// the goroutine ends when Read returns, at the latest when c ends.
func readAsync(ctx context.Context, c *wsconn.Conn) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		typ, data, err := c.Read(ctx)
		ch <- readResult{typ, data, err}
	}()
	return ch
}
