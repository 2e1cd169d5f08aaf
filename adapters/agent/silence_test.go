package agent_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	agentpeer "github.com/interlingua-dev/interlingua/conformance/peers/agent"
)

// An SSE upstream that has shown its heartbeat and then writes nothing,
// its connection open, is gone after three heartbeat intervals (at least
// 6 s), as @langchain/langgraph-sdk's idle watchdog takes it: the run
// fails unavailable and the upstream run is cancelled. While heartbeats
// come, a run with no event is not cut.
func TestBackendSilentUpstream(t *testing.T) {
	p, err := agentpeer.NewWithConfig(agentpeer.Config{Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(p.Handler())
	defer ts.Close()
	defer p.Close()
	b := newBackend(t, ts.URL, "sse")
	st, err := b.Start(context.Background(), request("silent", "hang-agent"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	done := make(chan []*canonical.Event, 1)
	go func() {
		evs, _ := canonical.Collect(st)
		done <- evs
	}()
	select {
	case evs := <-done:
		t.Fatalf("a run whose upstream heartbeats ended: %v", evs)
	case <-time.After(time.Second):
	}
	p.Hush()
	hushed := time.Now()
	var evs []*canonical.Event
	select {
	case evs = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the run of a silent upstream is still going 20 s after its last heartbeat")
	}
	if took := time.Since(hushed); took < 5*time.Second {
		t.Errorf("failed %v after the last heartbeat: before the watchdog's 6 s floor", took)
	}
	end := evs[len(evs)-1]
	st2, _ := canonical.TerminalOf(end)
	e := end.GetLifecycle().GetError()
	if st2 != canonical.StatusFailed || canonical.Code(e.GetCode()) != canonical.CodeUnavailable ||
		e.GetMessage() != "agent upstream: nothing, not even a heartbeat, for 6s (three of its heartbeat intervals)" {
		t.Fatalf("end %v", end)
	}
	if c := p.Cancels(); len(c) != 1 || !strings.HasPrefix(c[0], "peer-run-") {
		t.Errorf("upstream cancels %v, want the silent run's", c)
	}
}
