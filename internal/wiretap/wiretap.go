// Package wiretap lets the inspector (package inspect) record what an HTTP
// backend sends to its upstream and reads back, for the runs it captures:
// a backend's transport is wrapped once (Transport), and a run whose
// context carries a Recorder (WithRecorder) has its requests and responses
// teed into it. While no Recorder is armed in the process (Arm), the
// wrapper costs one atomic load per HTTP request.
package wiretap

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
)

// Recorder receives the bytes of a run's upstream exchanges. Its methods
// may be called from several goroutines and must not block.
type Recorder interface {
	// Request records a request's line and headers (secrets redacted),
	// before its body.
	Request(r *http.Request)
	// Response records a response's status line and headers.
	Response(resp *http.Response)
	// Sent records request body bytes as the transport reads them.
	Sent(p []byte)
	// Received records response body bytes as the backend reads them.
	Received(p []byte)
}

type recorderKey struct{}

// armed counts the recorders that may be in contexts: the inspectors
// enabled in the process.
var armed atomic.Int32

// Arm says a Recorder may be attached to contexts from now on; the
// returned function undoes it.
func Arm() (disarm func()) {
	armed.Add(1)
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			armed.Add(-1)
		}
	}
}

// WithRecorder returns ctx carrying rec: HTTP requests made with it
// through a wrapped transport are recorded.
func WithRecorder(ctx context.Context, rec Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, rec)
}

// RecorderFrom returns ctx's Recorder, or nil.
func RecorderFrom(ctx context.Context) Recorder {
	r, _ := ctx.Value(recorderKey{}).(Recorder)
	return r
}

// Tap is a run's Recorder as a backend holds it to record the frames it
// sends and reads itself (on a WebSocket, or a stream the run did not open,
// which no transport sees). The zero Tap, a run not captured, records
// nothing: a backend calls Sent and Received without checking.
type Tap struct{ rec Recorder }

// TapFrom returns ctx's Recorder as a Tap: the zero Tap when ctx carries
// none.
func TapFrom(ctx context.Context) Tap { return Tap{RecorderFrom(ctx)} }

// Sent records bytes sent to the upstream, if the run is captured.
func (t Tap) Sent(p []byte) {
	if t.rec != nil {
		t.rec.Sent(p)
	}
}

// Received records bytes read from the upstream, if the run is captured.
func (t Tap) Received(p []byte) {
	if t.rec != nil {
		t.rec.Received(p)
	}
}

// Transport wraps next so that requests whose context carries a Recorder
// are recorded.
func Transport(next http.RoundTripper) http.RoundTripper { return tap{next} }

type tap struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t tap) RoundTrip(r *http.Request) (*http.Response, error) {
	if armed.Load() == 0 {
		return t.next.RoundTrip(r)
	}
	rec := RecorderFrom(r.Context())
	if rec == nil {
		return t.next.RoundTrip(r)
	}
	rec.Request(r)
	if r.Body != nil && r.Body != http.NoBody {
		r2 := *r // a RoundTripper must not modify the request it was given
		r2.Body = &teeBody{ReadCloser: r.Body, rec: rec.Sent}
		r = &r2
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rec.Response(resp)
	resp.Body = &teeBody{ReadCloser: resp.Body, rec: rec.Received}
	return resp, nil
}

// teeBody records what is read through it.
type teeBody struct {
	io.ReadCloser
	rec func([]byte)
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.rec(p[:n])
	}
	return n, err
}
