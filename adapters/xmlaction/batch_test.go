package xmlaction_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/adapters/xmlaction"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/canonical/canonicaltest"
)

// serveScript serves a run of s's events to rec, as SSE when accept says so.
func serveScript(t *testing.T, s canonical.Stream, accept string, rec *canonicaltest.FlushRecorder) {
	t.Helper()
	mux := http.NewServeMux()
	xmlaction.NewFrontend(xmlaction.Config{Runner: canonicaltest.Runner{Stream: s}}).Mount(mux)
	req, err := http.NewRequest(http.MethodPost, "http://bridge/v1/xml/stream", strings.NewReader(`{"target":"m","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	mux.ServeHTTP(rec, req)
	if rec.Status != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Status, rec.Body.String())
	}
}

// A run whose events are all at hand is written in one flush, byte for
// byte what is written piece by piece; a run that cannot say gets a flush
// per piece. Both as text and as SSE.
func TestStreamBatchesPiecesAtHand(t *testing.T) {
	const n = 50
	for _, accept := range []string{"text/plain", "text/event-stream"} {
		t.Run(accept, func(t *testing.T) {
			perPiece := &canonicaltest.FlushRecorder{}
			serveScript(t, &canonicaltest.Script{Events: canonicaltest.TextRun(n)}, accept, perPiece)
			if len(perPiece.Flushed) < n || !strings.Contains(perPiece.Body.String(), " t49") {
				t.Fatalf("unbuffered: %d flushes, want one per piece (at least %d): %s", len(perPiece.Flushed), n, perPiece.Body.String())
			}
			atHand := &canonicaltest.FlushRecorder{}
			serveScript(t, canonicaltest.Buffered(&canonicaltest.Script{Events: canonicaltest.TextRun(n)}), accept, atHand)
			if got, want := atHand.Body.String(), perPiece.Body.String(); got != want {
				t.Fatalf("buffered body\n%s\nwant\n%s", got, want)
			}
			if len(atHand.Flushed) != 1 {
				t.Fatalf("buffered: %d flushes, want 1", len(atHand.Flushed))
			}
		})
	}
}

// A piece is never held for a later one: when the run's next event is not
// at hand, everything written is flushed before the frontend waits for it.
func TestStreamFlushesBeforeWaiting(t *testing.T) {
	for _, accept := range []string{"text/plain", "text/event-stream"} {
		t.Run(accept, func(t *testing.T) {
			rec := &canonicaltest.FlushRecorder{}
			s := canonicaltest.Waiting(12, rec)
			serveScript(t, canonicaltest.Buffered(s), accept, rec)
			if !strings.Contains(rec.Body.String(), " t11") {
				t.Fatalf("body misses the last delta: %s", rec.Body.String())
			}
			s.CheckWaits(t, rec)
		})
	}
}
