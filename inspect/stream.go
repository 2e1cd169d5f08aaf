package inspect

import (
	"net/http"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// Timings of the page's live stream: updates are sent at most every
// streamBatch (a token stream would otherwise be one SSE event per
// recorded write), and a comment every streamKeepalive keeps proxies from
// closing a quiet stream.
const (
	streamBatch     = 25 * time.Millisecond
	streamKeepalive = 15 * time.Second
)

// serveStream sends a capture as SSE: an "update" event with everything
// so far (the shape of GET /v1/inspect/runs/{id}), then an "update" with
// what was recorded since whenever something is, and "end" once the run
// has ended and its client's request is over, or the capture's
// max_duration has passed. The stream ends when the inspector closes.
func (in *Inspector) serveStream(w http.ResponseWriter, r *http.Request) {
	run := in.lookup(w, r)
	if run == nil {
		return
	}
	sw, err := sse.NewWriter(w)
	if err != nil {
		refuse(w, r, http.StatusInternalServerError, canonical.CodeInternal, err.Error())
		return
	}
	keepalive := time.NewTicker(streamKeepalive)
	defer keepalive.Stop()
	batch := time.NewTimer(0)
	defer batch.Stop()
	stop := time.NewTimer(time.Until(run.start.Add(in.cfg.MaxDuration)))
	defer stop.Stop()
	var c cursor
	last := ""
	for first := true; ; first = false {
		changed, closing := in.changes()
		d, next := run.detail(c)
		if first {
			d.Request, d.Degradations = run.request, run.notes()
		}
		state := d.Run.Status + "/" + itoa(d.Run.Events)
		if first || next != c || state != last {
			data, err := json.Marshal(d)
			if err != nil || sw.Event("", "update", data) != nil {
				return
			}
			c, last = next, state
		}
		if run.over() {
			_ = sw.Event("", "end", []byte("{}"))
			return
		}
		if !in.waitChange(r, sw, changed, closing, keepalive.C, stop.C, batch) {
			_ = sw.Event("", "end", []byte("{}"))
			return
		}
	}
}

// waitChange waits for the next recording (then streamBatch more, to send
// a burst as one update), writing keepalives; false when the stream is
// to end.
func (in *Inspector) waitChange(r *http.Request, sw *sse.Writer, changed, closing <-chan struct{}, keepalive, stop <-chan time.Time, batch *time.Timer) bool {
	for {
		select {
		case <-changed:
			batch.Reset(streamBatch)
			select {
			case <-batch.C:
				return true
			case <-closing:
				return false
			case <-r.Context().Done():
				return false
			}
		case <-keepalive:
			if sw.Comment("keepalive") != nil {
				return false
			}
		case <-stop:
			return false
		case <-closing:
			return false
		case <-r.Context().Done():
			return false
		}
	}
}

// over reports that nothing more will be recorded: the run has ended and
// its client's request is over (or it had none).
func (r *Run) over() bool {
	r.mu.Lock()
	running := r.status == "running"
	r.mu.Unlock()
	if running {
		return false
	}
	if r.client == nil {
		return true
	}
	r.client.mu.Lock()
	defer r.client.mu.Unlock()
	return r.client.done
}
