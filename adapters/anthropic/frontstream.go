package anthropic

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/burst"
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
	if err := json.MarshalWrite(&s.data, v); err != nil {
		return canonical.Errorf(canonical.CodeInternal, "encoding %s: %v", name, err)
	}
	s.start()
	return s.sw.QueueEvent("", name, s.data.Bytes())
}

// streamRun writes the run as a Messages event stream, with a ping after
// each PingInterval without an event.
func (f *Frontend) streamRun(w http.ResponseWriter, stream canonical.Stream, model, rid string) {
	sw, err := sse.NewWriter(w)
	if err != nil {
		f.log.Error("messages: response cannot stream", "err", err)
		writeCanonicalError(w, canonical.AsError(err), rid)
		return
	}
	out := &sseSink{w: w, sw: sw, rid: rid}
	enc := newEncoder(out, model)
	rc := burst.New(stream)
	defer rc.Close()
	ping := time.NewTimer(f.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ping.C:
			if err := f.ping(enc, out); err != nil {
				return
			}
			ping.Reset(f.cfg.PingInterval)
			continue
		case b := <-rc.C():
			if f.writeBatch(enc, out, b, model) {
				return
			}
			ping.Reset(f.cfg.PingInterval)
		}
	}
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

// writeBatch writes a batch's events and flushes them; it reports whether
// the response has ended (the run's end, a failure, a client gone).
func (f *Frontend) writeBatch(enc *encoder, out *sseSink, b burst.Batch, model string) bool {
	for _, ev := range b.Events {
		done, fail, err := enc.event(ev)
		if err != nil {
			f.log.Debug("messages: client gone", "model", model, "run", ev.GetRunId(), "err", err)
			return true
		}
		if done {
			if fail != nil {
				f.fail(out, fail)
				return true
			}
			_ = out.sw.Flush()
			return true
		}
	}
	if b.Err != nil {
		err := b.Err
		if errors.Is(err, io.EOF) {
			err = canonical.Errorf(canonical.CodeInternal, "the run ended without a terminal event")
		}
		f.fail(out, canonical.AsError(err))
		return true
	}
	if err := out.sw.Flush(); err != nil {
		f.log.Debug("messages: client gone", "model", model, "err", err)
		return true
	}
	return false
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
