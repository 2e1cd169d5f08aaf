package bridge

import (
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// writeDeadline cuts off a client that stops reading a streamed response
// (the write_timeout setting), on every HTTP path, as one mechanism: each
// write and flush must reach the client's socket within the timeout, or
// it fails, the frontend sees its client gone, and the run is cancelled.
// Without it a client that stopped reading a Triton generate_stream, an
// XML stream or an Evergreen gRPC/Connect stream held its run for ever,
// with megabytes queued. WebSocket upgrades are left to internal/wsconn,
// which has its own write deadlines. A cut-off is counted in
// slow_consumer_cutoffs{protocol="http"}.
func writeDeadline(next http.Handler, limit time.Duration, cutoffs prometheus.Counter) http.Handler {
	if limit <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWebSocketUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), limit: limit, cutoffs: cutoffs}, r)
	})
}

// deadlineWriter arms the connection's write deadline before writes. It
// re-arms only once a quarter of the timeout has passed since it last did
// (a deadline is a timer reset in the runtime; a Triton stream writes
// thousands of deltas a second), so a blocked write fails after between
// three quarters of the timeout and the whole of it.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	limit   time.Duration
	cutoffs prometheus.Counter
	armed   time.Time
	cut     atomic.Bool
}

func (w *deadlineWriter) arm() {
	if now := time.Now(); now.Sub(w.armed) > w.limit/4 {
		if w.rc.SetWriteDeadline(now.Add(w.limit)) == nil {
			w.armed = now
		}
	}
}

// check counts the first write the deadline cut.
func (w *deadlineWriter) check(err error) error {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && w.cut.CompareAndSwap(false, true) {
		w.cutoffs.Inc()
	}
	return err
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	n, err := w.ResponseWriter.Write(p)
	return n, w.check(err)
}

// Flush implements http.Flusher (frontends type-assert it).
func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// FlushError is what http.ResponseController's Flush calls.
func (w *deadlineWriter) FlushError() error {
	w.arm()
	return w.check(w.rc.Flush())
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
