package bridge

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
)

// bodyTimeout bounds the time a request's body may take to arrive (the
// body_timeout setting), on every path whose input is not a stream: the
// server's ReadHeaderTimeout closes a connection whose headers stall, but a
// chunked body that stops was held for ever, one goroutine and descriptor
// each. A body read that has not ended when the time is up fails with an
// error naming the setting, which the frontend answers in its protocol's
// form; a handler blocked in such a read is woken by a read deadline on
// the connection. A handler that has its body (or never reads it) is not
// affected: the deadline is set only while a read is blocked.
func bodyTimeout(next http.Handler, limit time.Duration) http.Handler {
	if limit <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || streamsInput(r) {
			next.ServeHTTP(w, r)
			return
		}
		b := &timedBody{ReadCloser: r.Body, limit: limit, deadline: time.Now().Add(limit), rc: http.NewResponseController(w)}
		b.timer = time.AfterFunc(limit, b.expire)
		defer b.stop()
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// streamsInput reports whether a request's body is a stream of messages
// that may pause for as long as its session lasts: WebSocket upgrades and
// gRPC or Connect streams (Evergreen's bidi), which have idle timeouts.
// What the headers say is believed only where such a stream is served (a
// WebSocket upgrade is a GET; gRPC's procedures are under their service's
// path): a slow body sent to any other path with them is timed as any.
func streamsInput(r *http.Request) bool {
	if isWebSocketUpgrade(r) {
		return r.Method == http.MethodGet
	}
	ct := r.Header.Get("Content-Type")
	return (strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+")) &&
		strings.HasPrefix(r.URL.Path, "/"+evergreenv2connect.EvergreenServiceName+"/")
}

// isWebSocketUpgrade reports whether r asks to become a WebSocket.
func isWebSocketUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// timedBody is a request body that must end by its deadline.
type timedBody struct {
	io.ReadCloser
	limit    time.Duration
	deadline time.Time
	rc       *http.ResponseController
	timer    *time.Timer

	mu      sync.Mutex
	reading bool // a Read is blocked on the connection
	ended   bool // EOF, an error, or the handler returned
	expired bool
}

// Read fails once the deadline has passed, and reports a read cut by it
// as the timeout rather than the connection's error.
func (b *timedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.expired || (!b.ended && time.Now().After(b.deadline)) {
		b.expired = true
		b.mu.Unlock()
		return 0, b.timeoutErr()
	}
	b.reading = true
	b.mu.Unlock()
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	b.reading = false
	if err != nil {
		b.ended = true
	}
	expired := b.expired
	b.mu.Unlock()
	if expired && err != nil && err != io.EOF {
		return n, b.timeoutErr()
	}
	if err != nil {
		b.stop()
	}
	return n, err
}

func (b *timedBody) timeoutErr() error {
	return fmt.Errorf("request body not received within body_timeout (%s)", b.limit)
}

// expire wakes a Read blocked past the deadline.
func (b *timedBody) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	b.expired = true
	if b.reading {
		_ = b.rc.SetReadDeadline(time.Now())
	}
}

// stop ends the timer: the body ended or the handler returned.
func (b *timedBody) stop() {
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
	b.timer.Stop()
}
