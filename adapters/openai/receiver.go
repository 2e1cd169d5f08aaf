package openai

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// streamRun writes the run as chunks, each as its event comes (a burst at
// once: flushed when the run holds no more), with a keepalive comment
// after each Keepalive without a write (which commits the 200 if nothing
// did yet).
func (f *Frontend) streamRun(w http.ResponseWriter, stream canonical.Stream, d *decoded) {
	sw, err := sse.NewWriter(w)
	if err != nil {
		f.log.Error("chat completions: response cannot stream", "err", err)
		fromCanonical(canonical.AsError(err)).write(w)
		return
	}
	out := newStreamWriter(w, sw, d.model, f.cfg.ReasoningField, time.Now().Unix(), d.includeUsage)
	rd := newReader(out, d.clientTools)
	var mu sync.Mutex // the keepalive's and this loop's writes
	ka := sse.NewKeepalive(&mu, f.cfg.Keepalive, func() error {
		out.start()
		return sw.Comment("keepalive")
	})
	defer ka.Stop()
	ka.Relay(stream, func(ev *canonical.Event, err error, idle bool) bool {
		return f.write(rd, out, ev, err, d.model, idle)
	})
}

// write writes the chunks of ev, or the error that ended the run, and
// flushes them when idle (nothing more is at hand); it reports whether
// the response has ended (the run's end, a failure, a client gone).
func (f *Frontend) write(rd *reader, out *streamWriter, ev *canonical.Event, err error, model string, idle bool) bool {
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = canonical.Errorf(canonical.CodeInternal, "the run ended without a terminal event")
		}
		_ = out.fail(canonical.AsError(err))
		return true
	}
	done, err := rd.event(ev)
	if err != nil {
		f.log.Debug("chat completions: client gone", "model", model, "run", ev.GetRunId(), "err", err)
		return true
	}
	if done || idle {
		if err := out.sw.Flush(); err != nil && !done {
			f.log.Debug("chat completions: client gone", "model", model, "err", err)
			return true
		}
	}
	return done
}
