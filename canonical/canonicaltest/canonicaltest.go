// Package canonicaltest holds test doubles for a frontend's side of the
// canonical ports: a scripted run that says which of its events are at
// hand (canonical.Buffered) and which Recv waits for, the Runner that
// serves it, and a ResponseWriter that records what each flush sent. With
// them a frontend's test checks that a burst is one write and that no
// event is held back while the frontend waits for the next.
package canonicaltest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Script is a run that replays Events. Before returning an event whose
// index Wait marks, Recv "waits": it counts the wait and calls BeforeWait
// (when set), whose error it returns instead of the event. A Script is not
// a canonical.Buffered stream; Buffered makes one.
type Script struct {
	Events     []*canonical.Event
	Wait       map[int]bool
	BeforeWait func() error
	// Waits counts the Recvs that waited.
	Waits int
	// Closed tells that Close was called.
	Closed bool
	next   int
}

// Recv returns the next event, then io.EOF.
func (s *Script) Recv() (*canonical.Event, error) {
	if s.next == len(s.Events) {
		return nil, io.EOF
	}
	if s.Wait[s.next] {
		s.Waits++
		if s.BeforeWait != nil {
			if err := s.BeforeWait(); err != nil {
				return nil, err
			}
		}
	}
	ev := s.Events[s.next]
	s.next++
	return ev, nil
}

// Close records that it was called.
func (s *Script) Close() error { s.Closed = true; return nil }

// Taken is how many events Recv has returned.
func (s *Script) Taken() int { return s.next }

// Buffered returns s as a stream that says how many events Recv returns
// without waiting, as the bridge's runs do.
func Buffered(s *Script) canonical.Stream { return buffered{s} }

type buffered struct{ *Script }

// Buffered counts the events before the next one Recv waits for.
func (b buffered) Buffered() int {
	n := 0
	for i := b.next; i < len(b.Events) && !b.Wait[i]; i++ {
		n++
	}
	return n
}

// Runner serves Stream for every request and every target name.
type Runner struct{ Stream canonical.Stream }

// Run returns r.Stream.
func (r Runner) Run(context.Context, *canonical.Request) (canonical.Stream, error) {
	return r.Stream, nil
}

// Target resolves every name, to a backend named "script".
func (Runner) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name, Backend: "script"}, true
}

// Targets lists none.
func (Runner) Targets() []canonical.TargetInfo { return nil }

// FlushRecorder is an http.ResponseWriter and http.Flusher that records
// the status, the body, and the body as it stood at each flush that sent
// some of it: what had reached the client by then. (A flush with nothing
// written since the last one sends nothing.)
type FlushRecorder struct {
	Status  int
	Body    bytes.Buffer
	Flushed []string
	header  http.Header
}

// Header returns the response headers.
func (r *FlushRecorder) Header() http.Header {
	if r.header == nil {
		r.header = http.Header{}
	}
	return r.header
}

// WriteHeader records the first status.
func (r *FlushRecorder) WriteHeader(status int) {
	if r.Status == 0 {
		r.Status = status
	}
}

// Write appends to the body (a status of 200 unless one was written).
func (r *FlushRecorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.Body.Write(p)
}

// Flush records the body written so far, unless it has been already.
func (r *FlushRecorder) Flush() {
	r.WriteHeader(http.StatusOK)
	if r.Unflushed() != "" {
		r.Flushed = append(r.Flushed, r.Body.String())
	}
}

// Unflushed is what was written after the last flush: what has not
// reached the client.
func (r *FlushRecorder) Unflushed() string {
	sent := ""
	if len(r.Flushed) > 0 {
		sent = r.Flushed[len(r.Flushed)-1]
	}
	return strings.TrimPrefix(r.Body.String(), sent)
}

// HeldBack is a Script's BeforeWait for a frontend writing to r: it fails
// when anything written has not been flushed, or nothing has been written
// at all, when the run makes the frontend wait.
func (r *FlushRecorder) HeldBack() error {
	if u := r.Unflushed(); u != "" {
		return canonical.Errorf(canonical.CodeInternal, "test: waiting for the next event with %q held back", u)
	}
	if r.Body.Len() == 0 {
		return canonical.Errorf(canonical.CodeInternal, "test: nothing written before the first wait")
	}
	return nil
}

// TextRun returns the events of a run that answers n text deltas, " t0"
// to " t<n-1>", in one assistant message, and completes.
func TextRun(n int) []*canonical.Event {
	b := canonical.NewBuilder()
	out := b.Lifecycle(nil, canonical.StatusRunning)
	out = b.StartMessage(out, "m", "assistant")
	for i := range n {
		out = b.Text(out, " t"+strconv.Itoa(i))
	}
	return b.End(out, canonical.StatusCompleted, nil)
}

// Waiting returns a run of TextRun(n) whose Recv waits before every fourth
// event that is a delta, checking with rec.HeldBack that the frontend
// writing to rec held nothing back.
func Waiting(n int, rec *FlushRecorder) *Script {
	evs := TextRun(n)
	wait := map[int]bool{}
	for i, ev := range evs {
		if ev.GetBlockDelta() != nil && i%4 == 0 {
			wait[i] = true
		}
	}
	return &Script{Events: evs, Wait: wait, BeforeWait: rec.HeldBack}
}

// CheckWaits fails t unless s waited every time it was to (more than once)
// and rec saw a flush before each wait and one at the end.
func (s *Script) CheckWaits(t testing.TB, rec *FlushRecorder) {
	t.Helper()
	if s.Waits != len(s.Wait) || len(s.Wait) < 2 {
		t.Fatalf("%d Recvs waited, want %d", s.Waits, len(s.Wait))
	}
	if len(rec.Flushed) != len(s.Wait)+1 {
		t.Errorf("%d flushes, want one before each wait and one at the end", len(rec.Flushed))
	}
}
