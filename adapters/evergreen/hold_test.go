package evergreen

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

type countFlushes struct {
	*httptest.ResponseRecorder
	n int
}

func (c *countFlushes) Flush() { c.n++ }

// connect-go's flush after a message is held back while hold is set and
// done by flushHeld; without hold every flush goes through.
func TestHoldWriter(t *testing.T) {
	inner := &countFlushes{ResponseRecorder: httptest.NewRecorder()}
	w := &holdWriter{ResponseWriter: inner}
	var _ http.Flusher = w
	w.flushHeld()
	if inner.n != 0 {
		t.Fatal("flushHeld flushed with nothing held")
	}
	w.hold = true
	for range 3 {
		w.Flush()
	}
	w.hold = false
	if inner.n != 0 {
		t.Fatalf("%d flushes while holding", inner.n)
	}
	w.flushHeld()
	w.flushHeld()
	if inner.n != 1 {
		t.Fatalf("%d flushes after flushHeld, want 1", inner.n)
	}
	w.Flush()
	if inner.n != 2 {
		t.Fatalf("%d flushes, want a flush without hold to go through", inner.n)
	}
	if http.NewResponseController(w).Flush() != nil || inner.n != 3 {
		t.Fatal("ResponseController does not reach the server's writer")
	}
}
