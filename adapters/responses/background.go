package responses

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// backgroundRuns are the frontend's background runs on this instance, by
// response id: each one's cancel and its end, for cancel requests and
// Close.
type backgroundRuns struct {
	mu     sync.Mutex
	runs   map[string]*bgRun
	wg     sync.WaitGroup
	closed bool
}

type bgRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// add registers a run; false once the frontend is closing.
func (b *backgroundRuns) add(id string, cancel context.CancelFunc) (*bgRun, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false
	}
	if b.runs == nil {
		b.runs = map[string]*bgRun{}
	}
	run := &bgRun{cancel: cancel, done: make(chan struct{})}
	b.runs[id] = run
	b.wg.Add(1)
	return run, true
}

// remove ends a run's registration.
func (b *backgroundRuns) remove(id string, run *bgRun) {
	b.mu.Lock()
	delete(b.runs, id)
	b.mu.Unlock()
	close(run.done)
	b.wg.Done()
}

func (b *backgroundRuns) get(id string) *bgRun {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[id]
}

// Close cancels the frontend's background runs and waits for them to be
// recorded, ends its WebSockets (their responses recorded cancelled), and
// stops its settlers.
func (f *Frontend) Close() {
	b := &f.bg
	b.mu.Lock()
	b.closed = true
	for _, r := range b.runs {
		r.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
	f.sockets.close()
	f.settling.close()
}

// runBackground starts a background response: the run outlives the
// client's request (its context keeps the caller's values, not its
// cancellation). Not streamed, the queued response is answered at once;
// streamed, the events are written while the client reads, and the run
// goes on when it leaves. The record is written at the end.
func (f *Frontend) runBackground(w http.ResponseWriter, r *http.Request, c *createRequest, p *prepared) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stream, err := f.cfg.Runner.Run(ctx, p.req)
	if err != nil {
		cancel()
		f.forget(r.Context(), p)
		fromCanonical(canonical.AsError(err)).write(w)
		return
	}
	stream = canonical.AnswerStream(stream, f.cfg.MaxOutputBytes) // an agent's answer, on the root (doc.go)
	run, ok := f.bg.add(p.r.ID, cancel)
	if !ok {
		cancel()
		_ = stream.Close()
		f.forget(r.Context(), p)
		fromCanonical(canonical.Errorf(canonical.CodeUnavailable, "the server is shutting down")).write(w)
		return
	}
	summary := c.Reasoning != nil && c.Reasoning.Summary != nil
	out := &writer{}
	if c.Stream == nil || !*c.Stream {
		writeJSON(w, http.StatusOK, p.r) // queued
		enc := newEncoder(p.r, summary, f.cfg.MaxOutputBytes, out.event)
		go f.finishBackground(ctx, stream, enc, p, run, out)
		return
	}
	sw, serr := sse.NewWriter(w)
	if serr != nil {
		cancel()
		_ = stream.Close()
		f.bg.remove(p.r.ID, run)
		fromCanonical(canonical.Errorf(canonical.CodeInternal, "the response cannot stream")).write(w)
		return
	}
	out.sw = sw
	sse.SetHeaders(w.Header())
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	enc := newEncoder(p.r, summary, f.cfg.MaxOutputBytes, out.event)
	stop := out.keepalive(f.cfg.KeepAlive)
	gone := f.pump(stream, enc, out)
	stop()
	if gone && !enc.done { // the client left: the run goes on
		go f.finishBackground(ctx, stream, enc, p, run, &writer{})
		return
	}
	f.finishBackground(ctx, stream, enc, p, run, nil)
	out.end(f.cfg.NoDone)
}

// finishBackground reads the run to its end (out nil: it has ended) and
// records it.
func (f *Frontend) finishBackground(ctx context.Context, stream canonical.Stream, enc *encoder, p *prepared, run *bgRun, out *writer) {
	defer f.bg.remove(p.r.ID, run)
	defer run.cancel()
	defer stream.Close()
	if out != nil {
		f.pump(stream, enc, out)
	}
	f.finish(ctx, p, enc)
}

// cancel answers POST /v1/responses/{id}/cancel: a background response
// still running is cancelled, on this instance or, through the bridge, on
// the one that started it, and its record returned once it has recorded
// the end (or store_timeout passed); one that has ended is returned as it
// is (cancel is idempotent).
func (f *Frontend) cancel(w http.ResponseWriter, r *http.Request, id string) {
	rec, _, e := f.load(r.Context(), id)
	if e != nil {
		e.write(w)
		return
	}
	if !rec.Response.Background {
		invalid("", "Only responses created with background=true can be cancelled.").write(w)
		return
	}
	switch run := f.bg.get(id); {
	case run != nil:
		run.cancel()
		select {
		case <-run.done:
		case <-time.After(f.cfg.StoreTimeout):
		}
		rec, _, e = f.load(r.Context(), id)
	case unfinished(rec) && f.cfg.CancelThread != nil:
		f.cfg.CancelThread(id) // the response's thread is its id
		rec, e = f.awaitEnd(r.Context(), id)
	case unfinished(rec): // no bridge to reach the instance running it
		e = &apiError{status: http.StatusConflict, msg: fmt.Sprintf("Response with id '%s' is running on another instance of this server: cancel it there.", id)}
	}
	if e != nil {
		e.write(w)
		return
	}
	writeJSON(w, http.StatusOK, &rec.Response)
}

// awaitEnd reads a response's record until it is no longer unfinished (the
// instance running it records its end) or store_timeout passes; it
// returns the record as it then is.
func (f *Frontend) awaitEnd(ctx context.Context, id string) (*record, *apiError) {
	deadline := time.Now().Add(f.cfg.StoreTimeout)
	for {
		rec, _, e := f.load(ctx, id)
		if e != nil || !unfinished(rec) || time.Now().After(deadline) {
			return rec, e
		}
		select {
		case <-ctx.Done():
			return rec, nil
		case <-time.After(awaitEndPoll):
		}
	}
}

// awaitEndPoll is how often awaitEnd reads the record.
const awaitEndPoll = 20 * time.Millisecond
