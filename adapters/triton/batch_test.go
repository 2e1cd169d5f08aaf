package triton_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/adapters/triton"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/canonical/canonicaltest"
)

func wantBody(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "data: {\"model_name\":\"m\",\"model_version\":\"1\",\"text_output\":\" t%d\"}\n\n", i)
	}
	return b.String()
}

func serveScript(t *testing.T, s canonical.Stream, rec *canonicaltest.FlushRecorder) {
	t.Helper()
	f := triton.NewFrontend(triton.FrontendConfig{Runner: canonicaltest.Runner{Stream: s}})
	mux := http.NewServeMux()
	f.Mount(mux)
	mux.ServeHTTP(rec, newRequest(t, "/v2/models/m/generate_stream", strings.NewReader(`{"text_input":"hi","stream":true}`)))
	if rec.Status != 200 {
		t.Fatalf("status %d: %s", rec.Status, rec.Body.String())
	}
}

// A run whose events are all at hand is written in one flush, byte for
// byte what is written response by response; a run that cannot say gets a
// flush per response, as before.
func TestStreamBatchesResponsesAtHand(t *testing.T) {
	const n = 50
	for _, tc := range []struct {
		name    string
		stream  func(*canonicaltest.Script) canonical.Stream
		flushes int
	}{
		{"buffered", canonicaltest.Buffered, 1},
		{"unbuffered", func(s *canonicaltest.Script) canonical.Stream { return s }, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &canonicaltest.FlushRecorder{}
			serveScript(t, tc.stream(&canonicaltest.Script{Events: canonicaltest.TextRun(n)}), rec)
			if got := rec.Body.String(); got != wantBody(n) {
				t.Fatalf("body\n%s\nwant\n%s", got, wantBody(n))
			}
			if len(rec.Flushed) != tc.flushes || rec.Flushed[len(rec.Flushed)-1] != wantBody(n) {
				t.Fatalf("%d flushes, want %d ending with the whole body", len(rec.Flushed), tc.flushes)
			}
		})
	}
}

// A response is never held for a later one: when the run's next event is
// not at hand, everything queued is flushed before the frontend waits for
// it.
func TestStreamFlushesBeforeWaiting(t *testing.T) {
	const n = 12
	rec := &canonicaltest.FlushRecorder{}
	s := canonicaltest.Waiting(n, rec)
	serveScript(t, canonicaltest.Buffered(s), rec)
	if got := rec.Body.String(); got != wantBody(n) {
		t.Fatalf("body\n%s\nwant\n%s", got, wantBody(n))
	}
	s.CheckWaits(t, rec)
}
