package inspect_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/inspect"
)

// The upstream wire of an HTTP backend (Triton's, on internal/bodystream),
// of the Glide backend (its frames on a shared WebSocket) and of the
// Evergreen backend (a binary session) is recorded: the request sent and the response read, with the run's deltas
// in order, and the upstream's credentials never.
func TestUpstreamWire(t *testing.T) {
	for _, target := range []string{"echo", "echo-glide", "echo-evergreen"} {
		t.Run(target, func(t *testing.T) { upstreamWire(t, target) })
	}
}

func upstreamWire(t *testing.T, target string) {
	d := startDaemon(t, inspect.Config{}, true)
	want := deltas(runTriton(t, d, userKey, target, true, nil))
	var list apiList
	apiDo(t, d, http.MethodGet, "/v1/inspect/runs", adminKey, "", &list)
	var got apiDetail
	if st := apiDo(t, d, http.MethodGet, "/v1/inspect/runs/"+list.Runs[0].ID, adminKey, "", &got); st != 200 || !got.Run.UpstreamRecorded {
		t.Fatalf("open: %d upstream recorded %v", st, got.Run.UpstreamRecorded)
	}
	if len(want) < 3 {
		t.Fatalf("deltas %q", want)
	}
	if miss := inOrder(bodyText(got.Upstream, "in"), want); miss != "" {
		t.Errorf("upstream wire lacks delta %q in order: %s", miss, bodyText(got.Upstream, "in"))
	}
	if !strings.Contains(bodyText(got.Upstream, "out"), "what is 6 times 7?") {
		t.Errorf("upstream request body: %s", bodyText(got.Upstream, "out"))
	}
	for _, c := range append(got.Client, got.Upstream...) {
		if c.Text != nil && strings.Contains(*c.Text, userKey) {
			t.Errorf("a key was recorded: %q", *c.Text)
		}
	}
	checkOffsets(t, got)
}

// Each column of a capture keeps at most max_bytes and says what it did
// not keep; a capture keeps nothing after max_duration; at most max_runs
// captures are kept, the oldest going first.
func TestCaptureLimits(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		const limit = 4096
		d := startDaemon(t, inspect.Config{MaxBytes: limit}, false)
		if n := len(runTriton(t, d, "", "stream", true, map[string]any{"deltas": 400})); n < 400 {
			t.Fatalf("the client read %d events", n)
		}
		got := openOnly(t, d, "")
		client := 0
		for _, c := range got.Client {
			client += c.Len + 64
		}
		events := 0
		for _, e := range got.Events {
			events += len(e.Event) + 64
		}
		if client > limit || events > limit || got.Run.Events < 400 {
			t.Errorf("kept %d client bytes, %d event bytes over max_bytes %d (%d events counted)", client, events, limit, got.Run.Events)
		}
		joined := strings.Join(got.Run.Truncated, "; ")
		if !strings.Contains(joined, "client: ") || !strings.Contains(joined, "events: ") || !strings.Contains(joined, "(max_bytes)") {
			t.Errorf("truncated %q", joined)
		}
	})
	t.Run("duration", func(t *testing.T) {
		d := startDaemon(t, inspect.Config{MaxDuration: time.Nanosecond}, false)
		runTriton(t, d, "", "stream", true, nil)
		got := openOnly(t, d, "")
		if len(got.Events) != 0 || len(got.Client) != 0 || got.Run.Events == 0 || !strings.Contains(strings.Join(got.Run.Truncated, ";"), "(max_duration)") {
			t.Errorf("kept %d events, %d client chunks past max_duration; truncated %q", len(got.Events), len(got.Client), got.Run.Truncated)
		}
	})
	t.Run("runs", func(t *testing.T) {
		d := startDaemon(t, inspect.Config{MaxRuns: 2}, false)
		for range 3 {
			runTriton(t, d, "", "stream", true, nil)
		}
		var list apiList
		if apiDo(t, d, http.MethodGet, "/v1/inspect/runs", "", "", &list); len(list.Runs) != 2 {
			t.Errorf("kept %d runs, max_runs 2", len(list.Runs))
		}
	})
}

// openOnly opens the only captured run.
func openOnly(t *testing.T, d *daemon, key string) apiDetail {
	t.Helper()
	var list apiList
	if st := apiDo(t, d, http.MethodGet, "/v1/inspect/runs", key, "", &list); st != 200 || len(list.Runs) != 1 {
		t.Fatalf("list: %d %+v", st, list)
	}
	var got apiDetail
	if st := apiDo(t, d, http.MethodGet, "/v1/inspect/runs/"+list.Runs[0].ID, key, "", &got); st != 200 {
		t.Fatalf("open: %d", st)
	}
	return got
}

// A capture replayed as every other frontend protocol: each protocol's
// client reads the run's deltas back from what that frontend wrote, and
// the wire it wrote is returned.
func TestReplayAs(t *testing.T) {
	d := startDaemon(t, inspect.Config{}, false)
	want := deltas(runTriton(t, d, "", "stream", true, map[string]any{"deltas": 3, "delta_text": "tok "}))
	got := openOnly(t, d, "")
	var protos struct {
		Replay []string `json:"replay"`
	}
	apiDo(t, d, http.MethodGet, "/v1/inspect/protocols", "", "", &protos)
	if len(protos.Replay) < 5 {
		t.Fatalf("replayable %v", protos.Replay)
	}
	joined := strings.Join(want, "")
	for _, p := range protos.Replay {
		var r struct {
			Protocol string     `json:"protocol"`
			Wire     []apiChunk `json:"wire"`
			Events   []apiEvent `json:"events"`
			Error    string     `json:"error"`
		}
		if st := apiDo(t, d, http.MethodPost, "/v1/inspect/runs/"+got.Run.ID+"/replay?as="+p, "", "", &r); st != 200 || r.Error != "" || r.Protocol != p {
			t.Errorf("%s: %d %q", p, st, r.Error)
			continue
		}
		var text strings.Builder
		for _, e := range r.Events {
			text.WriteString(e.Text)
		}
		if !strings.Contains(text.String(), joined) || len(r.Wire) == 0 {
			t.Errorf("%s: the client read %q (want %q), %d wire chunks", p, text.String(), joined, len(r.Wire))
		}
	}
	var e apiError
	if st := apiDo(t, d, http.MethodPost, "/v1/inspect/runs/"+got.Run.ID+"/replay?as=scripted", "", "", &e); st != 400 || e.Code != "invalid_argument" {
		t.Errorf("replay as a backend-only protocol: %d %+v", st, e)
	}
}
