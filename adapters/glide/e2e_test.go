package glide_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	glidepeer "github.com/interlingua-dev/interlingua/conformance/peers/glide"
)

// End-to-end tests through a whole instance. Golden transcripts are per
// connection; created_at comes from the daemon's real clock and is
// normalized to 0 (the only variable part of a frame).

const timeout = 10 * time.Second

var createdAt = regexp.MustCompile(`"created_at":\d+`)

func goldenE2E(t *testing.T, file string, got []byte) {
	t.Helper()
	got = createdAt.ReplaceAll(got, []byte(`"created_at":0`))
	if flag.Lookup("update").Value.String() == "true" {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Fatalf("%s differs (run with -update to accept):\n%s", file, d)
	}
}

type wsClient struct {
	t  *testing.T
	ws *websocket.Conn
	tr bytes.Buffer
}

func dialWS(t *testing.T, base, router string) *wsClient {
	t.Helper()
	u := "ws" + strings.TrimPrefix(base, "http") + "/v1/language/" + router + "/chatStream"
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	c := &wsClient{t: t, ws: ws}
	fmt.Fprintf(&c.tr, "x connect %s\n", router)
	return c
}

func (c *wsClient) send(frame string) {
	c.t.Helper()
	c.tr.WriteString("> " + frame + "\n")
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		c.t.Fatal(err)
	}
}

// recvUntil reads frames until one contains stop (or the close frame, when
// stop is ""), recording them.
func (c *wsClient) recvUntil(stop string) {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(timeout))
	for {
		_, p, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if stop == "" && errors.As(err, &ce) {
				fmt.Fprintf(&c.tr, "x close %d %q\n", ce.Code, ce.Text)
				return
			}
			c.t.Fatalf("read: %v (waiting for %q)", err, stop)
		}
		c.tr.WriteString("< ")
		c.tr.Write(p)
		if stop != "" && bytes.Contains(p, []byte(stop)) {
			return
		}
	}
}

// peerBackend starts the reference Glide peer and returns the YAML options
// of a glide backend pointing at its router.
func startPeer(t *testing.T, routers map[string]glidepeer.Router) (*glidepeer.Peer, func(router string) yaml.Node) {
	p := glidepeer.New(glidepeer.Config{Routers: routers})
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		p.Close()
		srv.Close()
	})
	opts := func(router string) yaml.Node {
		var n yaml.Node
		u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/language/" + router + "/chatStream"
		if err := yaml.Unmarshal([]byte("url: "+u+"\nidle_timeout: 1m\n"), &n); err != nil {
			t.Fatal(err)
		}
		return *n.Content[0]
	}
	return p, opts
}

// TestE2EEcho: a Glide client of the daemon's scripted echo target.
func TestE2EEcho(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := dialWS(t, inst.URL, "echo")
	c.send(`{"id":"req-1","message":{"role":"user","content":"tell me a dad joke"},"metadata":{"user_id":42}}`)
	c.recvUntil(`"finish_reason"`)
	goldenE2E(t, "testdata/e2e/echo.golden", c.tr.Bytes())

	resp, err := http.Get(inst.URL + "/v1/language/nope/chatStream")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("GET without upgrade: %d, want 426", resp.StatusCode)
	}
	_, resp, err = websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(inst.URL, "http")+"/v1/language/nope/chatStream", nil)
	if err == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown router: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `{"name":"router_not_found","message":"router is not found"}` {
		t.Fatalf("unknown router body %s", body)
	}
}

// TestE2EGlideToGlide: a Glide client, the daemon's Glide frontend, the
// bridge, the Glide backend and the reference Glide router, through the
// fallback sequence: the client sees what the upstream router said,
// model names included.
func TestE2EGlideToGlide(t *testing.T) {
	_, opts := startPeer(t, map[string]glidepeer.Router{
		"my-router": {Models: []glidepeer.Model{
			{ID: "openai-gpt", Steps: []glidepeer.Step{{Text: "Bill"}, {Text: " Ga"}, {Unavailable: "provider is not available"}}},
			{ID: "cohere", Provider: "cohere", Name: "command-light", Role: "model", Steps: []glidepeer.Step{{Echo: true}}, Finish: "max_tokens"},
		}},
		"down": {Models: []glidepeer.Model{{ID: "a", Steps: []glidepeer.Step{{Unavailable: "provider is not available"}}}}},
	})
	cfg := bridge.DefaultConfig()
	cfg.Backends["upstream"] = bridge.BackendConfig{Type: "glide", Options: opts("my-router")}
	cfg.Backends["upstream-down"] = bridge.BackendConfig{Type: "glide", Options: opts("down")}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "jokes", Backend: "upstream"}, bridge.Route{Target: "down", Backend: "upstream-down"})
	inst := bridgetest.Start(t, &cfg)

	c := dialWS(t, inst.URL, "jokes")
	c.send(`{"id":"req-1","message":{"role":"user","content":"Bill Gates entered the bar"},"metadata":{"user_id":42}}`)
	c.recvUntil(`"finish_reason"`)
	c.send(`{"id":"req-2","message":{"role":"user","content":"again"}}`)
	c.recvUntil(`"finish_reason"`)
	goldenE2E(t, "testdata/e2e/glide_to_glide.golden", c.tr.Bytes())

	d := dialWS(t, inst.URL, "down")
	d.send(`{"id":"req-3","message":{"role":"user","content":"x"}}`)
	d.recvUntil(`"finish_reason"`)
	goldenE2E(t, "testdata/e2e/glide_to_glide_down.golden", d.tr.Bytes())
}

// TestE2EShutdown drives the daemon's real shutdown (bridge.Server.Serve:
// http.Server.Shutdown with the frontend's OnShutdown hook, then
// bridge.Drain) with three connections: an idle one is closed with 1001
// at once and the listener refuses new connections; a busy one finishes
// its request during the drain, then closes with 1001; a request still
// running at the shutdown timeout is cancelled by the bridge, its error
// reply is sent, then its connection closes with 1001.
func TestE2EShutdown(t *testing.T) {
	peer, opts := startPeer(t, map[string]glidepeer.Router{
		"gated": {Models: []glidepeer.Model{{ID: "m", Steps: []glidepeer.Step{{Text: "before"}, {Wait: "go"}, {Text: " after"}}}}},
		"hang":  {Models: []glidepeer.Model{{ID: "m", Steps: []glidepeer.Step{{Text: "first"}, {Wait: "never"}}}}},
	})
	cfg := bridge.DefaultConfig()
	cfg.Backends["gated"] = bridge.BackendConfig{Type: "glide", Options: opts("gated")}
	cfg.Backends["hang"] = bridge.BackendConfig{Type: "glide", Options: opts("hang")}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "gated", Backend: "gated"}, bridge.Route{Target: "hang", Backend: "hang"})
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.ShutdownTimeout = time.Second
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := bridge.NewServer(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	base := "http://" + srv.Addr()

	idle := dialWS(t, base, "gated")
	busy := dialWS(t, base, "gated")
	busy.send(`{"id":"g1","message":{"role":"user","content":"x"},"metadata":{"conn":"busy"}}`)
	busy.recvUntil(`"before"`)
	hang := dialWS(t, base, "hang")
	hang.send(`{"id":"h1","message":{"role":"user","content":"x"},"metadata":{"conn":"hang"}}`)
	hang.recvUntil(`"first"`)

	cancel() // SIGTERM
	idle.recvUntil("")
	// The listener closed before the hook ran.
	if ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/v1/language/gated/chatStream", nil); err == nil {
		ws.Close()
		t.Fatal("a new connection was accepted during shutdown")
	}
	peer.Release("go")
	busy.recvUntil("") // the rest of g1, then the close
	hang.recvUntil("") // h1's error reply at the timeout, then the close
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(timeout):
		t.Fatal("Serve did not return")
	}
	var all bytes.Buffer
	for _, c := range []*wsClient{idle, busy, hang} {
		all.Write(c.tr.Bytes())
	}
	goldenE2E(t, "testdata/e2e/shutdown.golden", all.Bytes())
}

// TestE2EStalledClientCounted: a client that stops reading is cut off
// (once the send queue stays full for half the write timeout) and counted
// in interlingua_slow_consumer_cutoffs_total as every other WebSocket's
// (audit: Glide's cut-offs were never counted).
func TestE2EStalledClientCounted(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := dialWS(t, inst.URL, "echo")
	prompt := strings.Repeat("w ", 200_000) // 200,000 deltas: more than socket buffers and the queue hold
	c.send(`{"id":"req-1","message":{"role":"user","content":"` + prompt + `"}}`)
	want := `interlingua_slow_consumer_cutoffs_total{protocol="websocket"} 1`
	deadline := time.Now().Add(30 * time.Second)
	for len(bridgetest.MetricLines(t, inst.URL, want)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 30 s", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	inst.WaitNoRuns(t)
}
