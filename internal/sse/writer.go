package sse

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
)

// maxKeptBuffer is the largest event buffer a Writer keeps for the next
// event; a larger one (after one big event) is dropped.
const maxKeptBuffer = 64 << 10

// BatchBytes bounds what a Writer holds back: queued events that reach it
// are written and flushed at once.
const BatchBytes = 32 << 10

// Writer writes server-sent events to an http.ResponseWriter, each as one
// Write followed at once by a flush. A caller that has further events
// ready to write at once may queue an event instead (QueueData,
// QueueEvent): it waits in the Writer's buffer and goes out, in one Write
// and one flush, with the next event written by Data, Event or Comment, at
// Flush, or when the queue reaches BatchBytes. A caller queues an event
// only when the next one is ready, and flushes before it waits for
// anything: no event is held back waiting for another.
//
// The Writer does not set headers (see SetHeaders). After a failed write
// or flush every later call returns the same error: the stream may hold
// half an event and must be abandoned.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	w     io.Writer
	flush func() error // nil: each Write is on the wire (a Conn)
	buf   []byte       // queued events, then the event being written
	err   error
}

// NewWriter returns a Writer on w. It fails with a canonical Internal error
// if neither w nor any ResponseWriter it unwraps to can flush (implements
// http.Flusher or FlushError), as connect-go's checkServerStreamsCanFlush
// refuses such writers: a server stream that cannot flush is buffered.
// NewWriter writes nothing, so the caller may still set headers.
func NewWriter(w http.ResponseWriter) (*Writer, error) {
	if !canFlush(w) {
		return nil, canonical.Errorf(canonical.CodeInternal, "sse: %T cannot flush", w)
	}
	return &Writer{w: w, flush: http.NewResponseController(w).Flush}, nil
}

// NewConnWriter returns a Writer on a Conn taken over by Hijack; the
// caller has set the headers before Hijack wrote them.
func NewConnWriter(c *Conn) *Writer { return &Writer{w: c} }

// canFlush reports whether http.ResponseController.Flush would find a
// flusher in w's Unwrap chain, without flushing (which would send headers).
func canFlush(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case interface{ FlushError() error }, http.Flusher:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

// SetHeaders sets the response headers an event stream needs:
// Content-Type: text/event-stream, Cache-Control: no-cache, and
// X-Accel-Buffering: no (so nginx-style proxies do not buffer it). Callers
// that need another content type set it afterwards.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// Event writes one event: an "id:" line if id is not empty, an "event:" line
// if event is not empty, data split on LF, CRLF and CR into one "data:" line
// per line (empty data is one empty data line, which a reader dispatches as
// an event with empty data), and the blank line that ends the event. A
// reader gets data back with its line ends turned into LF. Events queued
// before it are written with it.
//
// An id or event containing CR or LF, or an id containing NUL (which
// readers ignore), is rejected with a canonical InvalidArgument error
// before anything is written.
func (w *Writer) Event(id, event string, data []byte) error {
	b, err := w.appendEvent(id, event, data)
	if err != nil {
		return err
	}
	return w.send(b)
}

// QueueEvent is Event for a caller with another event ready at once: the
// event is queued, and written only when the queue reaches BatchBytes.
func (w *Writer) QueueEvent(id, event string, data []byte) error {
	b, err := w.appendEvent(id, event, data)
	if err != nil {
		return err
	}
	return w.queue(b)
}

// QueueSeqEvent is QueueEvent with the decimal seq as the id, written
// without making a string of it (the agent protocol's ids are seqs: a
// string per event was an allocation per delta).
func (w *Writer) QueueSeqEvent(seq uint64, event string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if strings.ContainsAny(event, "\r\n") {
		return eventNameError(event)
	}
	b := strconv.AppendUint(append(w.buf, "id: "...), seq, 10)
	return w.queue(appendEventRest(append(b, '\n'), event, data))
}

func eventNameError(event string) error {
	return canonical.Errorf(canonical.CodeInvalidArgument, "sse: event name %q contains CR or LF", event)
}

func (w *Writer) appendEvent(id, event string, data []byte) ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	if strings.ContainsAny(id, "\r\n\x00") {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "sse: event id %q contains CR, LF or NUL", id)
	}
	if strings.ContainsAny(event, "\r\n") {
		return nil, eventNameError(event)
	}
	b := w.buf
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	return appendEventRest(b, event, data), nil
}

// appendEventRest appends an event's lines after its id.
func appendEventRest(b []byte, event string, data []byte) []byte {
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	b = appendLines(b, "data: ", data)
	return append(b, '\n')
}

// Data writes an event with data only, like Event("", "", data). Data
// without CR or LF is written as exactly "data: " + data + "\n\n".
func (w *Writer) Data(data []byte) error {
	b, err := w.appendData(data)
	if err != nil {
		return err
	}
	return w.send(b)
}

// QueueData is Data for a caller with another event ready at once: the
// event is queued, and written only when the queue reaches BatchBytes.
func (w *Writer) QueueData(data []byte) error {
	b, err := w.appendData(data)
	if err != nil {
		return err
	}
	return w.queue(b)
}

func (w *Writer) appendData(data []byte) ([]byte, error) {
	if indexLineEnd(data) >= 0 {
		return w.appendEvent("", "", data)
	}
	if w.err != nil {
		return nil, w.err
	}
	b := append(w.buf, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...), nil
}

// Comment writes a comment, ": " + text + "\n\n", and flushes it (with
// the events queued before it); readers ignore it, so it serves as a
// heartbeat that keeps idle connections and proxies alive. Text with line
// ends becomes one comment line per line.
func (w *Writer) Comment(text string) error {
	if w.err != nil {
		return w.err
	}
	b := appendLines(w.buf, ": ", text)
	b = append(b, '\n')
	return w.send(b)
}

// Flush writes and flushes the queued events; with none queued it does
// nothing.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	return w.send(w.buf)
}

// Queued returns the number of bytes queued.
func (w *Writer) Queued() int { return len(w.buf) }

// appendLines appends prefix+line+"\n" for each line of s, split on LF,
// CRLF and CR as a reader splits them; empty s is one empty line.
func appendLines[S string | []byte](b []byte, prefix string, s S) []byte {
	for {
		i := indexLineEnd(s)
		if i < 0 {
			b = append(b, prefix...)
			b = append(b, s...)
			return append(b, '\n')
		}
		b = append(b, prefix...)
		b = append(b, s[:i]...)
		b = append(b, '\n')
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
}

// indexLineEnd returns the index of the first CR or LF in s, or -1. Data
// seldom holds either, and two vectorized searches for them beat one pass
// comparing each byte: that pass was 6% of the CPU of an unpaced
// agent-to-agent run, whose frames are a few hundred bytes each.
func indexLineEnd[S string | []byte](s S) int {
	lf := indexByte(s, '\n')
	end := lf
	if lf < 0 {
		end = len(s)
	}
	if cr := indexByte(s[:end], '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// indexByte is strings.IndexByte or bytes.IndexByte.
func indexByte[S string | []byte](s S, c byte) int {
	switch v := any(s).(type) {
	case string:
		return strings.IndexByte(v, c)
	case []byte:
		return bytes.IndexByte(v, c)
	}
	return -1 // no other type satisfies S
}

// queue keeps b (queued events) for the next write, or sends it once it
// reaches BatchBytes.
func (w *Writer) queue(b []byte) error {
	if len(b) >= BatchBytes {
		return w.send(b)
	}
	w.buf = b
	return nil
}

// send writes b in one Write, flushes, and keeps b's array for the next
// event.
func (w *Writer) send(b []byte) error {
	if cap(b) <= maxKeptBuffer {
		w.buf = b[:0]
	} else {
		w.buf = nil
	}
	n, err := w.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("sse: write event: %w", err)
		return w.err
	}
	if w.flush == nil {
		return nil
	}
	if err := w.flush(); err != nil {
		w.err = fmt.Errorf("sse: flush event: %w", err)
		return w.err
	}
	return nil
}
