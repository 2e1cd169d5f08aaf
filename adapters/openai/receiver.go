package openai

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// batch is what the receiving goroutine hands the writer: the events Recv
// returned without waiting, or the error that ended them.
type batch struct {
	evs []*canonical.Event
	err error
}

// receiver reads a stream on its own goroutine (recvLoop), so the writer
// can write keepalives while Recv waits. close stops it and waits for it.
type receiver struct {
	stream canonical.Stream
	out    chan batch
	quit   chan struct{}
	done   chan struct{}
}

func newReceiver(stream canonical.Stream) *receiver {
	r := &receiver{stream: stream, out: make(chan batch), quit: make(chan struct{}), done: make(chan struct{})}
	go r.recvLoop()
	return r
}

// recvLoop receives events, a burst at a time (what Buffered says is at
// hand, at most 256), until the stream ends or the writer quits.
func (r *receiver) recvLoop() {
	defer close(r.done)
	ready, _ := r.stream.(canonical.Buffered)
	for {
		var b batch
		ev, err := r.stream.Recv()
		if err != nil {
			b.err = err
		} else {
			b.evs = append(b.evs, ev)
			for ready != nil && ready.Buffered() > 0 && len(b.evs) < 256 {
				ev, err := r.stream.Recv()
				if err != nil {
					b.err = err
					break
				}
				b.evs = append(b.evs, ev)
			}
		}
		select {
		case r.out <- b:
		case <-r.quit:
			return
		}
		if b.err != nil {
			return
		}
	}
}

// close stops the receiver: the stream is closed (unblocking Recv, and
// cancelling the run if it has not ended) and the goroutine waited for.
func (r *receiver) close() {
	close(r.quit)
	_ = r.stream.Close()
	<-r.done
}

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
	rc := newReceiver(stream)
	defer rc.close()
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
		case b := <-rc.out:
			if f.writeBatch(rd, out, b, d.model) {
				return
			}
			tick.Reset(f.cfg.Keepalive)
		}
	}
}

// writeBatch writes a batch's chunks and flushes them; it reports whether
// the response has ended (the run's end, a failure, a client gone).
func (f *Frontend) writeBatch(rd *reader, out *streamWriter, b batch, model string) bool {
	for _, ev := range b.evs {
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
	if b.err != nil {
		err := b.err
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
