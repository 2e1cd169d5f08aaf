// Package ssetest has what tests and benchmarks of SSE writers share, as
// net/http/httptest does for handlers.
package ssetest

import "net/http"

// Discard is an http.ResponseWriter that flushes and keeps nothing: the
// sink of an sse.Writer whose output a benchmark does not read.
type Discard struct {
	h     http.Header
	Bytes int64 // written so far
}

// NewDiscard returns a Discard with an empty header.
func NewDiscard() *Discard { return &Discard{h: http.Header{}} }

func (d *Discard) Header() http.Header { return d.h }

func (d *Discard) Write(b []byte) (int, error) {
	d.Bytes += int64(len(b))
	return len(b), nil
}

func (d *Discard) WriteHeader(int) {}

func (d *Discard) Flush() {}
