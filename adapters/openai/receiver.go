package openai

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/burst"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// streamRun writes the run as chunks, with a keepalive comment after each
// Keepalive without one (which commits the 200 if nothing did yet).
func (f *Frontend) streamRun(w http.ResponseWriter, stream canonical.Stream, d *decoded) {
	sw, err := sse.NewWriter(w)
	if err != nil {
		f.log.Error("chat completions: response cannot stream", "err", err)
		fromCanonical(canonical.AsError(err)).write(w)
		return
	}
	out := newStreamWriter(w, sw, d.model, f.cfg.ReasoningField, time.Now().Unix(), d.includeUsage)
	rd := newReader(out)
	rc := burst.New(stream)
	defer rc.Close()
	tick := time.NewTimer(f.cfg.Keepalive)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			out.start()
			if err := sw.Comment("keepalive"); err != nil {
				return
			}
			tick.Reset(f.cfg.Keepalive)
		case b := <-rc.C():
			if f.writeBatch(rd, out, b, d.model) {
				return
			}
			tick.Reset(f.cfg.Keepalive)
		}
	}
}

// writeBatch writes a batch's chunks and flushes them; it reports whether
// the response has ended (the run's end, a failure, a client gone).
func (f *Frontend) writeBatch(rd *reader, out *streamWriter, b burst.Batch, model string) bool {
	for _, ev := range b.Events {
		done, err := rd.event(ev)
		if err != nil {
			f.log.Debug("chat completions: client gone", "model", model, "run", ev.GetRunId(), "err", err)
			return true
		}
		if done {
			_ = out.sw.Flush()
			return true
		}
	}
	if b.Err != nil {
		err := b.Err
		if errors.Is(err, io.EOF) {
			err = canonical.Errorf(canonical.CodeInternal, "the run ended without a terminal event")
		}
		_ = out.fail(canonical.AsError(err))
		return true
	}
	if err := out.sw.Flush(); err != nil {
		f.log.Debug("chat completions: client gone", "model", model, "err", err)
		return true
	}
	return false
}
