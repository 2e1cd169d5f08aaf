package bridge_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
)

// A backend whose upstream stops sending, its connection open, fails the
// run with deadline_exceeded after stall_timeout, naming the option, and
// its upstream request is closed; one whose events keep coming, each
// within the timeout, runs to the end however long the whole run takes.
func TestStallTimeoutEndsSilentUpstream(t *testing.T) {
	hang := tritonpeer.New(tritonpeer.Model{Name: "m", Chunks: []string{"a", "b"}, Hang: true})
	released := make(chan struct{}, 1)
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hang.ServeHTTP(w, r) // returns when the bridge closes the request
		released <- struct{}{}
	}))
	defer silent.Close()
	defer silent.CloseClientConnections() // a run left open (the test failing) lets Close return
	slow := httptest.NewServer(tritonpeer.New(tritonpeer.Model{Name: "m", Chunks: []string{"1", "2", "3", "4", "5", "6"}, Delay: 100 * time.Millisecond}))
	defer slow.Close()

	cfg := bridge.DefaultConfig()
	tritonBackend(t, &cfg, "silent", silent.URL)
	tritonBackend(t, &cfg, "slow", slow.URL)
	for _, name := range []string{"silent", "slow"} {
		bc := cfg.Backends[name]
		bc.StallTimeout = 300 * time.Millisecond
		cfg.Backends[name] = bc
	}
	inst := bridgetest.Start(t, &cfg)
	body := func(target string) string {
		return `{"target":"` + target + `","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`
	}

	start := time.Now()
	type result struct {
		evs    []*canonical.Event
		status int
	}
	done := make(chan result, 1)
	go func() {
		evs, status := bridgetest.PostRun(t, inst.URL, body("silent"))
		done <- result{evs, status}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the run of a silent upstream is still open after 10 s")
	}
	took := time.Since(start)
	evs, status := res.evs, res.status
	if status != 200 || len(evs) == 0 {
		t.Fatalf("status %d, %d events", status, len(evs))
	}
	var text strings.Builder
	for _, ev := range evs {
		text.WriteString(ev.GetBlockDelta().GetText())
	}
	end := evs[len(evs)-1]
	st, _ := canonical.TerminalOf(end)
	e := end.GetLifecycle().GetError()
	if text.String() != "ab" || st != canonical.StatusFailed || canonical.Code(e.GetCode()) != canonical.CodeDeadlineExceeded ||
		e.GetMessage() != `backend "silent" sent no event for 300ms (backends.silent.stall_timeout)` {
		t.Fatalf("text %q, end %v", text.String(), end)
	}
	if took < 300*time.Millisecond {
		t.Errorf("the run failed after %v, before its stall_timeout", took)
	}
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("the silent upstream's request is still open 5 s after the run failed")
	}

	evs, status = bridgetest.PostRun(t, inst.URL, body("slow"))
	if status != 200 || len(evs) == 0 {
		t.Fatalf("slow: status %d, %d events", status, len(evs))
	}
	if st, ok := canonical.TerminalOf(evs[len(evs)-1]); !ok || st != canonical.StatusCompleted {
		t.Fatalf("an upstream sending an event every 100 ms for 600 ms: %v", evs[len(evs)-1])
	}
}

// The option is read from the config file; a negative value is kept (it
// turns the bound off).
func TestStallTimeoutParsed(t *testing.T) {
	c, err := bridge.ParseConfig("t.yaml", []byte("backends:\n  a:\n    type: scripted\n    stall_timeout: 90s\n  b:\n    type: scripted\n    stall_timeout: -1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := c.Backends["a"].StallTimeout, c.Backends["b"].StallTimeout; a != 90*time.Second || b != -time.Second {
		t.Fatalf("stall_timeout a %v, b %v", a, b)
	}
}
