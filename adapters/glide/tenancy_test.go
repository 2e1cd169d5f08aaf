package glide_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestTenancyKeyTargets: a chatStream connection is its API key's. A key
// limited to the echo target gets echo's answer on the echo router, and
// its upgrade to the stream router is refused exactly as one to a router
// that does not exist (a key cannot probe for the targets it may not use).
// Before, the connection's runs carried no key at all: the stream router
// streamed its deltas to this key. (conformance/runner's
// TestKeyMaxRunsEveryFrontend holds the runs to the key's max_runs.)
func TestTenancyKeyTargets(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a"), Targets: []string{"echo"}}}
	inst := bridgetest.Start(t, &cfg)
	auth := http.Header{"Authorization": {"Bearer key-a"}}
	dial := func(router string) (*websocket.Conn, int, string) {
		t.Helper()
		u := "ws" + strings.TrimPrefix(inst.URL, "http") + "/v1/language/" + router + "/chatStream"
		ws, resp, err := websocket.DefaultDialer.Dial(u, auth)
		if err != nil {
			if resp == nil {
				t.Fatalf("dial %s: %v", router, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return nil, resp.StatusCode, string(body)
		}
		t.Cleanup(func() { ws.Close() })
		return ws, http.StatusSwitchingProtocols, ""
	}
	ws, _, _ := dial("echo")
	if ws == nil {
		t.Fatal("echo, an allowed router, was refused")
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"id":"r1","message":{"role":"user","content":"secret words"}}`)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(timeout))
	var all []string
	for !strings.Contains(strings.Join(all, ""), `"finish_reason"`) {
		_, p, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("echo: %v after %q", err, all)
		}
		all = append(all, string(p))
	}
	if got := strings.Join(all, "\n"); !strings.Contains(got, `"content":"secret"`) || !strings.Contains(got, `"finish_reason":"complete"`) {
		t.Errorf("echo: %s", got)
	}
	_, status, body := dial("stream")
	_, wantStatus, wantBody := dial("nope")
	if status != wantStatus || body != wantBody || status != http.StatusNotFound {
		t.Errorf("stream, a router the key may not use: %d %s\nan unknown router: %d %s", status, body, wantStatus, wantBody)
	}
}

// TestConnectionsPerKey: one API key holds at most a quarter of the
// chatStream connections (MaxConnectionsPerKey, 256 of 1,024), so it
// cannot lock the other keys out: its next upgrade is refused 503 in
// Glide's error form while another key still connects, and a connection
// it closes gives its place back.
func TestConnectionsPerKey(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "a", Hash: bridge.KeyDigest("key-a")}, {Name: "b", Hash: bridge.KeyDigest("key-b")}}
	inst := bridgetest.Start(t, &cfg)
	u := "ws" + strings.TrimPrefix(inst.URL, "http") + "/v1/language/echo/chatStream"
	dial := func(key string) (*websocket.Conn, int, string) {
		t.Helper()
		ws, resp, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer " + key}})
		if err != nil {
			if resp == nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return nil, resp.StatusCode, string(body)
		}
		t.Cleanup(func() { ws.Close() })
		return ws, http.StatusSwitchingProtocols, ""
	}
	var held []*websocket.Conn
	for i := range 256 {
		ws, status, body := dial("key-a")
		if ws == nil {
			t.Fatalf("key a's connection %d: %d %s", i+1, status, body)
		}
		held = append(held, ws)
	}
	// Glide's form for resource_exhausted, as for MaxConnections.
	const want = `{"name":"unknown_error","message":"resource_exhausted: too many chatStream connections for this API key (MaxConnectionsPerKey 256)"}`
	if ws, status, body := dial("key-a"); ws != nil || status != http.StatusServiceUnavailable || body != want {
		t.Fatalf("key a's connection 257: %d %s, want 503 %s", status, body, want)
	}
	if ws, status, body := dial("key-b"); ws == nil {
		t.Fatalf("key b, while a holds its share: %d %s", status, body)
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ws, status, body := dial("key-a")
		if ws != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("key a after closing one: %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
