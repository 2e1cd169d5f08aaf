package wsconn_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// timeout bounds the wait for anything that must happen.
const timeout = 5 * time.Second

// pair serves one WebSocket on loopback, wraps the server side with
// wsconn.New(cfg) and returns it with the dialled client. The handler
// returns when the Conn is done; cleanup closes both ends and the server.
func pair(tb testing.TB, cfg wsconn.Config) (*wsconn.Conn, *websocket.Conn) {
	tb.Helper()
	conns := make(chan *wsconn.Conn, 1)
	var up websocket.Upgrader
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return // Upgrade has replied with the HTTP error
		}
		c := wsconn.New(ws, cfg)
		conns <- c
		<-c.Done()
	}))
	tb.Cleanup(srv.Close)
	client, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = client.Close() })
	select {
	case c := <-conns:
		tb.Cleanup(func() { _ = c.Close(wsconn.CloseNormal, "") })
		return c, client
	case <-time.After(timeout):
		tb.Fatal("server never wrapped the connection")
		return nil, nil
	}
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
