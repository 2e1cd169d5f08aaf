package native_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/adapters/native"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/canonical/canonicaltest"
)

// serveScript serves a run of s's events to rec.
func serveScript(t *testing.T, s canonical.Stream, rec *canonicaltest.FlushRecorder) {
	t.Helper()
	mux := http.NewServeMux()
	native.NewFrontend(native.Config{Runner: canonicaltest.Runner{Stream: s}}).Mount(mux)
	req, err := http.NewRequest(http.MethodPost, "http://bridge/v1/runs", strings.NewReader(`{"target":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	mux.ServeHTTP(rec, req)
	if rec.Status != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Status, rec.Body.String())
	}
}

// A run whose events are all at hand is written in one flush, byte for
// byte what is written event by event; a run that cannot say gets a flush
// per event.
func TestStreamBatchesEventsAtHand(t *testing.T) {
	const n = 50
	evs := canonicaltest.TextRun(n)
	perEvent := &canonicaltest.FlushRecorder{}
	serveScript(t, &canonicaltest.Script{Events: evs}, perEvent)
	if len(perEvent.Flushed) != len(evs) {
		t.Fatalf("unbuffered: %d flushes, want one per event (%d)", len(perEvent.Flushed), len(evs))
	}
	if lines := strings.Count(perEvent.Body.String(), "\n"); lines != len(evs) {
		t.Fatalf("unbuffered: %d lines, want %d", lines, len(evs))
	}
	atHand := &canonicaltest.FlushRecorder{}
	serveScript(t, canonicaltest.Buffered(&canonicaltest.Script{Events: evs}), atHand)
	if got, want := atHand.Body.String(), perEvent.Body.String(); got != want {
		t.Fatalf("buffered body\n%s\nwant\n%s", got, want)
	}
	if len(atHand.Flushed) != 1 {
		t.Fatalf("buffered: %d flushes, want 1", len(atHand.Flushed))
	}
}

// An event is never held for a later one: when the run's next event is
// not at hand, everything written is flushed before the frontend waits for
// it.
func TestStreamFlushesBeforeWaiting(t *testing.T) {
	rec := &canonicaltest.FlushRecorder{}
	s := canonicaltest.Waiting(12, rec)
	serveScript(t, canonicaltest.Buffered(s), rec)
	if lines := strings.Count(rec.Body.String(), "\n"); lines != len(s.Events) {
		t.Fatalf("%d lines, want %d: %s", lines, len(s.Events), rec.Body.String())
	}
	s.CheckWaits(t, rec)
}
