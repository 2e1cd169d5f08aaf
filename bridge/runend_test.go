package bridge_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// runEnds returns the "run end" log lines written so far, decoded.
func (l *lockedBuffer) runEnds(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(l.b.Bytes(), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["msg"] == "run end" {
			out = append(out, m)
		}
	}
	return out
}

func tritonBackend(t *testing.T, cfg *bridge.Config, name, url string) {
	var opts yaml.Node
	if err := yaml.Unmarshal([]byte("url: "+url+"\nmodel: m\nmetadata: off\n"), &opts); err != nil {
		t.Fatal(err)
	}
	cfg.Backends[name] = bridge.BackendConfig{Type: "triton", Options: *opts.Content[0]}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: name, Backend: name})
}

// Every run gets one run-end line and a count by outcome and code, however
// it ends: refused before it starts (unknown target), failed as its
// backend starts (upstream down), or completed; time to first delta counts
// from the request's arrival, so an upstream slow to answer at all (the
// Triton backend's Start waits for its first byte) shows in it; durations
// are milliseconds under keys that say so.
func TestRunEndLogged(t *testing.T) {
	peer := tritonpeer.New(tritonpeer.Model{Name: "m", Chunks: []string{"ok"}})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // before any byte of the answer
		peer.ServeHTTP(w, r)
	}))
	defer slow.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()
	cfg := bridge.DefaultConfig()
	tritonBackend(t, &cfg, "slow", slow.URL)
	tritonBackend(t, &cfg, "down", down)
	var logs lockedBuffer
	inst := bridgetest.StartLogged(t, &cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	run := func(target string) {
		bridgetest.PostRun(t, inst.URL, `{"target":"`+target+`","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`)
	}
	run("slow")
	run("down")
	run("nope")
	ends := logs.runEnds(t)
	if len(ends) != 3 {
		t.Fatalf("%d run-end lines, want 3: %v", len(ends), ends)
	}
	for i, want := range []struct{ target, outcome, code, errHas string }{
		{"slow", "completed", "ok", ""},
		{"down", "refused", "unavailable", "the upstream did not answer"},
		{"nope", "refused", "not_found", `unknown target "nope"`},
	} {
		e := ends[i]
		if e["target"] != want.target || e["outcome"] != want.outcome || e["code"] != want.code {
			t.Errorf("line %d: %v; want target %s outcome %s code %s", i, e, want.target, want.outcome, want.code)
		}
		if msg, _ := e["error"].(string); want.errHas != "" && !strings.Contains(msg, want.errHas) {
			t.Errorf("line %d: error %q lacks %q", i, msg, want.errHas)
		}
		if _, ok := e["duration_ms"].(float64); !ok {
			t.Errorf("line %d: duration_ms %v is not a number of milliseconds", i, e["duration_ms"])
		}
	}
	// The upstream's address is in the log's cause, not in what the client got.
	if c, _ := ends[1]["cause"].(string); !strings.Contains(c, "connection refused") || !strings.Contains(c, "127.0.0.1") {
		t.Errorf("refused run's cause %q lacks the upstream's address and error", ends[1]["cause"])
	}
	if msg, _ := ends[1]["error"].(string); strings.Contains(msg, "127.0.0.1") {
		t.Errorf("the client's message names the upstream: %q", msg)
	}
	if ttfd, _ := ends[0]["ttfd_ms"].(float64); ttfd < 300 {
		t.Errorf("ttfd_ms %v for an upstream that took 300 ms to answer", ends[0]["ttfd_ms"])
	}
	resp, err := http.Get(inst.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{
		`interlingua_runs_total{backend="none",code="not_found",frontend="native",outcome="refused",target="nope"} 1`,
		`interlingua_runs_total{backend="down",code="unavailable",frontend="native",outcome="refused",target="down"} 1`,
		`interlingua_runs_total{backend="slow",code="ok",frontend="native",outcome="completed",target="slow"} 1`,
	} {
		if !strings.Contains(string(m), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// No backend tells a client where its upstream is: an upstream that does
// not answer is "<type> backend: the upstream did not answer" to the
// client, and its address and dial error are in the run-end line's cause
// (issue 32 #9).
func TestUpstreamAddressHidden(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := bridge.DefaultConfig()
	for _, b := range []struct{ typ, options string }{
		{"triton", "url: http://" + addr + "\nmodel: secret-model\nmetadata: off\n"},
		{"glide", "url: ws://" + addr + "/v1/language/secret-router/chatStream\n"},
		{"evergreen", "url: http://" + addr + "\n"},
		{"agent", "url: http://" + addr + "\n"},
		{"agent-ws", "url: http://" + addr + "\ntransport: websocket\n"},
	} {
		var opts yaml.Node
		if err := yaml.Unmarshal([]byte(b.options), &opts); err != nil {
			t.Fatal(err)
		}
		cfg.Backends[b.typ] = bridge.BackendConfig{Type: strings.TrimSuffix(b.typ, "-ws"), Options: *opts.Content[0]}
		cfg.Routes = append(cfg.Routes, bridge.Route{Target: b.typ, Backend: b.typ})
	}
	var logs lockedBuffer
	inst := bridgetest.StartLogged(t, &cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	for _, typ := range []string{"triton", "glide", "evergreen", "agent", "agent-ws"} {
		resp, err := http.Post(inst.URL+"/v1/runs", "application/json", strings.NewReader(`{"target":"`+typ+`","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		want := `"message":"` + strings.TrimSuffix(typ, "-ws") + ` backend: the upstream did not answer"`
		if !strings.Contains(body, want) || strings.Contains(body, addr) || strings.Contains(body, "secret") {
			t.Errorf("%s: the client got %s, want %s and no address", typ, body, want)
		}
	}
	ends := logs.runEnds(t)
	if len(ends) != 5 {
		t.Fatalf("%d run-end lines, want 5", len(ends))
	}
	for _, e := range ends {
		if c, _ := e["cause"].(string); !strings.Contains(c, addr) {
			t.Errorf("%s: the run-end cause %q lacks the upstream's address", e["target"], c)
		}
	}
}

// A run its client closes before the terminal event is counted and logged
// with code canceled (an abandoned one was logged with code ok).
func TestRunEndAbandoned(t *testing.T) {
	cfg := bridge.DefaultConfig()
	var logs lockedBuffer
	inst := bridgetest.StartLogged(t, &cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	resp, err := http.Post(inst.URL+"/v1/runs", "application/json",
		strings.NewReader(`{"target":"echo","parameters":{"hang":true},"inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the client leaves mid-run
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.runEnds(t)) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// The client's leaving cancels the request's context too: the run may
	// end cancelled before the frontend closes it (abandoned). Either way
	// its code says so, never ok.
	ends := logs.runEnds(t)
	if len(ends) != 1 || (ends[0]["outcome"] != "abandoned" && ends[0]["outcome"] != "cancelled") || ends[0]["code"] != "canceled" {
		t.Fatalf("run-end lines %v, want one abandoned or cancelled, code canceled", ends)
	}
}
