package anthropic

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// sseSink writes wire events as SSE: "event: <type>" and the data, queued
// while the run has more events at hand. The headers (200) go out with
// the first event, so a run that fails before it gets an HTTP error.
type sseSink struct {
	w       http.ResponseWriter
	sw      *sse.Writer
	rid     string
	started bool
	data    bytes.Buffer // the event being queued, reused: QueueEvent copies it
	// deltas are the content_block_delta templates, by the delta's type:
	// marshalling every text delta was 0.4 µs of a delta's cost.
	deltas map[string]*json.Template
	buf    []byte // a delta's event, reused
}

func (s *sseSink) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	sse.SetHeaders(h)
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Request-Id", s.rid)
	s.w.WriteHeader(http.StatusOK)
}

func (s *sseSink) event(name string, v any) error {
	s.data.Reset()
	if ev, ok := v.(*blockDeltaEvent); ok {
		if b, ok := s.delta(ev); ok {
			s.start()
			return s.sw.QueueEvent("", name, b)
		}
	}
	if err := json.MarshalWrite(&s.data, v); err != nil {
		return canonical.Errorf(canonical.CodeInternal, "encoding %s: %v", name, err)
	}
	s.start()
	return s.sw.QueueEvent("", name, s.data.Bytes())
}

// delta writes a text, thinking or input JSON delta from its type's
// template; false for another delta (a signature, once a block) or a
// text the template leaves to Marshal.
func (s *sseSink) delta(ev *blockDeltaEvent) ([]byte, bool) {
	var kind, text string
	switch d := ev.Delta.(type) {
	case *textDelta:
		kind, text = d.Type, d.Text
	case *thinkingDelta:
		kind, text = d.Type, d.Thinking
	case *inputJSONDelta:
		kind, text = d.Type, d.PartialJSON
	default:
		return nil, false
	}
	t, ok := s.deltas[kind]
	if !ok {
		t, _ = json.NewTemplate(deltaFill(ev.Type, ev.Delta)) // nil: marshalled each time
		if s.deltas == nil {
			s.deltas = map[string]*json.Template{}
		}
		s.deltas[kind] = t
	}
	if t == nil {
		return nil, false
	}
	b, ok := t.Append(s.buf[:0], int64(ev.Index), text)
	s.buf = b
	return b, ok
}

// deltaFill makes the content_block_delta events of d's type with index
// n and text s, for its template.
func deltaFill(evType string, d any) func(n int64, s string) any {
	switch d := d.(type) {
	case *textDelta:
		return func(n int64, s string) any {
			return &blockDeltaEvent{Type: evType, Index: int(n), Delta: &textDelta{Type: d.Type, Text: s}}
		}
	case *thinkingDelta:
		return func(n int64, s string) any {
			return &blockDeltaEvent{Type: evType, Index: int(n), Delta: &thinkingDelta{Type: d.Type, Thinking: s}}
		}
	default:
		t := d.(*inputJSONDelta).Type
		return func(n int64, s string) any {
			return &blockDeltaEvent{Type: evType, Index: int(n), Delta: &inputJSONDelta{Type: t, PartialJSON: s}}
		}
	}
}

// streamRun writes the run as a Messages event stream, each event as it
// comes (a burst at once: flushed when the run holds no more), with a
// ping after each PingInterval without a write.
func (f *Frontend) streamRun(w http.ResponseWriter, stream canonical.Stream, d *decoded, rid string) {
	sw, err := sse.NewWriter(w)
	if err != nil {
		f.log.Error("messages: response cannot stream", "err", err)
		writeCanonicalError(w, canonical.AsError(err), rid)
		return
	}
	out := &sseSink{w: w, sw: sw, rid: rid}
	enc := newEncoder(out, d.model, d.clientTools, d.thinking)
	var mu sync.Mutex // the pings' and this loop's writes
	ping := sse.NewKeepalive(&mu, f.cfg.PingInterval, func() error { return f.ping(enc, out) })
	defer ping.Stop()
	ping.Relay(stream, func(ev *canonical.Event, err error, idle bool) bool {
		return f.write(enc, out, ev, err, idle)
	})
}

// ping writes a ping (after message_start, which it sends first when no
// event has been written yet: the stream is then committed to a 200).
func (f *Frontend) ping(enc *encoder, out *sseSink) error {
	if err := enc.begin(); err != nil {
		return err
	}
	if err := out.event("ping", typeOnly{Type: "ping"}); err != nil {
		return err
	}
	return out.sw.Flush()
}

// write writes the events of ev, or the error that ended the run, and
// flushes them when idle (nothing more is at hand); it reports whether
// the response has ended (the run's end, a failure, a client gone).
func (f *Frontend) write(enc *encoder, out *sseSink, ev *canonical.Event, err error, idle bool) bool {
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = canonical.Errorf(canonical.CodeInternal, "the run ended without a terminal event")
		}
		f.fail(out, canonical.AsError(err))
		return true
	}
	done, fail, err := enc.event(ev)
	if err != nil {
		f.log.Debug("messages: client gone", "model", enc.model, "run", ev.GetRunId(), "err", err)
		return true
	}
	if done && fail != nil {
		f.fail(out, fail)
		return true
	}
	if done || idle {
		if err := out.sw.Flush(); err != nil && !done {
			f.log.Debug("messages: client gone", "model", enc.model, "err", err)
			return true
		}
	}
	return done
}

// fail reports a run's failure: Anthropic's error object with its status
// before the first event, an error event after it (no message_stop).
func (f *Frontend) fail(out *sseSink, e *canonical.Error) {
	if !out.started {
		writeCanonicalError(out.w, e, out.rid)
		return
	}
	_ = out.sw.Event("", "error", appendError(nil, streamErrorTypeOf(e.Code), e.Message, ""))
}
