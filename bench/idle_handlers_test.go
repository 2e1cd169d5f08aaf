package bench

import (
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/protocols"
)

// TestIdleStreamsHoldNoHandler: an idle WebSocket or SSE stream of every
// frontend the idle benchmark opens (but the fallbacks) holds no net/http
// handler. The handler returns once the connection is upgraded or taken
// over (sse.Hijack), so the server keeps neither net/http's per-request
// buffers (8 KiB and more) nor the handler's stack for it; the
// connections stay open and served. Before, each held its handler for
// its whole life: 28.9 KiB of RSS an idle socket, 22.8 after (bench
// --idle 4000, half of them WebSockets); with the SSE streams' handlers
// gone too, 12.0 (20.2 before).
func TestIdleStreamsHoldNoHandler(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	u, err := url.Parse(inst.URL)
	if err != nil {
		t.Fatal(err)
	}
	const perKind = 20
	before := handlers()
	kinds := map[string]int{}
	for _, p := range protocols.All {
		if p.Load == nil || p.Load.Idle == nil || p.Load.Idle.Fallback {
			continue
		}
		idle := p.Load.Idle
		kinds[idle.Transport]++
		for i := range perKind {
			c, err := idle.Open(t.Context(), u.Host, i)
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}
	if kinds[load.WebSocket] < 2 || kinds[load.SSE] < 1 {
		t.Fatalf("kinds of idle connection by transport: %v", kinds)
	}
	all := (kinds[load.WebSocket] + kinds[load.SSE]) * perKind
	// The handlers return just after the upgrade's response is written.
	deadline := time.Now().Add(5 * time.Second)
	for handlers() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := handlers(); n > before {
		t.Fatalf("%d net/http handlers run for %d idle connections (%d before)", n, all, before)
	}
	if n := runtime.NumGoroutine(); n < all {
		t.Fatalf("%d goroutines for %d open connections: are they served?", n, all)
	}
}

// handlers counts the goroutines inside a net/http handler.
func handlers() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "net/http.serverHandler.ServeHTTP")
}
