package responses

import (
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// replay answers GET /v1/responses/{id}?stream=true: the response's run
// read again from the bridge's replay log (the log every frontend replays
// from; then live while it runs) and rendered by the same deterministic
// encoder, so the events, ids and sequence numbers are those the client
// was sent; only events after starting_after are written. A finished
// response whose events have left the log is rendered from the stored
// response instead (its sequence numbers then count that rendering's
// events: one delta per part).
func (f *Frontend) replay(w http.ResponseWriter, r *http.Request, rec *record, after int64) {
	if f.cfg.Observer == nil {
		invalid("stream", "This server cannot stream a stored response again.").write(w)
		return
	}
	obs, err := f.cfg.Observer.Observe(r.Context(), rec.Response.ID, 0)
	if err != nil {
		fromCanonical(canonical.AsError(err)).write(w)
		return
	}
	src := &replaySource{obs: obs, rec: rec}
	defer src.Close()
	if src.finished() {
		// A finished response's events may have left the log.
		t := time.AfterFunc(f.cfg.ReplayWait, src.expire)
		defer t.Stop()
	}
	sw, serr := sse.NewWriter(w)
	if serr != nil {
		fromCanonical(canonical.Errorf(canonical.CodeInternal, "the response cannot stream")).write(w)
		return
	}
	sse.SetHeaders(w.Header())
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	out := &writer{sw: sw}
	resp := replayResponse(&rec.Response)
	enc := newEncoder(resp, resp.Reasoning.Summary != nil, f.cfg.MaxOutputBytes, func(ev *streamEvent) error {
		if ev.SequenceNumber <= after {
			return nil
		}
		return out.event(ev)
	})
	enc.completedAt = rec.Response.CompletedAt
	stop := out.keepalive(f.cfg.KeepAlive)
	gone := f.pump(src, enc, out)
	stop()
	if !gone {
		out.end(f.cfg.NoDone)
	}
}

// replayResponse is a stored response as its stream began.
func replayResponse(stored *response) *response {
	r := *stored
	r.Status, r.CompletedAt, r.Error, r.IncompleteDetails, r.Usage, r.Output = "in_progress", nil, nil, nil, nil, []item{}
	if r.Background {
		r.Status = "queued"
	}
	return &r
}

// replaySource is the run's events from the replay log, or, once expire
// has found none in time or the log's first is not the run's first (the
// log let go of the oldest), the finished response's stored rendering.
type replaySource struct {
	obs canonical.Stream
	rec *record

	mu      sync.Mutex
	got     bool // an event came from the log
	expired bool
	stored  []*canonical.Event
}

// expire gives up on the log when it has sent nothing yet.
func (s *replaySource) expire() {
	s.mu.Lock()
	if s.got {
		s.mu.Unlock()
		return
	}
	s.expired = true
	s.mu.Unlock()
	_ = s.obs.Close() // aborts the waiting Recv
}

// Recv implements canonical.Stream.
func (s *replaySource) Recv() (*canonical.Event, error) {
	s.mu.Lock()
	expired := s.expired
	s.mu.Unlock()
	if !expired {
		ev, err := s.obs.Recv()
		s.mu.Lock()
		expired = s.expired && !s.got
		if err == nil && !expired && (s.got || canonical.Follows(ev, 0)) {
			s.got = true
			s.mu.Unlock()
			return ev, nil
		}
		if err == nil && !expired { // the log has let go of the run's first events
			if !s.finished() {
				s.mu.Unlock()
				return nil, canonical.Errorf(canonical.CodeDataLoss, "the replay log no longer holds the response's first events (its oldest is event %d)", ev.GetSeq())
			}
			s.expired, expired = true, true
		}
		s.mu.Unlock()
		if !expired {
			return nil, err
		}
		_ = s.obs.Close()
		s.stored = storedEvents(&s.rec.Response)
	}
	if len(s.stored) == 0 {
		return nil, io.EOF
	}
	ev := s.stored[0]
	s.stored = s.stored[1:]
	return ev, nil
}

// Close implements canonical.Stream.
func (s *replaySource) Close() error { return s.obs.Close() }

// finished reports whether the stored response is final, so its rendering
// can stand in for the log's events.
func (s *replaySource) finished() bool {
	st := s.rec.Response.Status
	return st != "in_progress" && st != "queued"
}

// storedEvents renders a finished response as canonical events: each
// item's content as one block, then its outcome.
func storedEvents(r *response) []*canonical.Event {
	b := canonical.NewBuilder()
	var out []*canonical.Event
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, p := range it.Content {
				if p.Text != nil {
					out = b.StartBlock(out, canonical.BlockText, "", "", "", "")
					out = b.Text(out, *p.Text)
				}
			}
		case "reasoning":
			text := ""
			for _, p := range append(append([]part{}, it.Summary...), it.Content...) {
				if p.Text != nil {
					text += *p.Text
				}
			}
			out = b.StartBlock(out, canonical.BlockReasoning, "", "", "", "")
			out = b.Reasoning(out, text)
		case "function_call", "custom_tool_call":
			out = b.ToolCall(out, it.CallID, it.Name)
			if it.Arguments != nil {
				out = b.ToolArgs(out, *it.Arguments)
			}
			if it.Input != nil {
				out = b.ToolArgs(out, customArguments(*it.Input))
			}
		}
	}
	reason := canonical.FinishStop
	if r.IncompleteDetails != nil {
		reason = canonical.FinishLength
		if r.IncompleteDetails.Reason == "content_filter" {
			reason = canonical.FinishContentFilter
		}
	}
	out = b.FinishMessage(out, reason, canonicalUsage(r.Usage))
	switch {
	case r.Status == "cancelled":
		return b.End(out, canonical.StatusCancelled, canonical.Errorf(canonical.CodeCanceled, "the response was cancelled"))
	case r.Error != nil:
		return b.End(out, canonical.StatusFailed, canonical.Errorf(codeOfFailure(r.Error.Code), "%s", r.Error.Message))
	}
	return b.End(out, canonical.StatusCompleted, nil)
}
