package glide_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestTenancyKeyTargets: a chatStream connection's runs are its API key's.
// A key limited to the echo target gets echo's answer on the echo router
// and Glide's permission error on the stream router, whose text it never
// sees; the run is refused, not started. Before, the connection's runs
// carried no key at all: any key reached every target on this path.
func TestTenancyKeyTargets(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a"), Targets: []string{"echo"}}}
	inst := bridgetest.Start(t, &cfg)
	ask := func(router string) string {
		t.Helper()
		u := "ws" + strings.TrimPrefix(inst.URL, "http") + "/v1/language/" + router + "/chatStream"
		ws, _, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer key-a"}})
		if err != nil {
			t.Fatalf("dial %s: %v", router, err)
		}
		defer ws.Close()
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"id":"r1","message":{"role":"user","content":"secret words"}}`)); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(timeout))
		var all []string
		for {
			_, p, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("%s: %v after %q", router, err, all)
			}
			all = append(all, string(p))
			if strings.Contains(string(p), `"finish_reason"`) || strings.Contains(string(p), `"err"`) {
				return strings.Join(all, "\n")
			}
		}
	}
	if got := ask("echo"); !strings.Contains(got, `"content":"secret"`) || !strings.Contains(got, `"finish_reason":"complete"`) {
		t.Errorf("echo, an allowed target: %s", got)
	}
	got := ask("stream")
	if !strings.Contains(got, `"name":"permission_denied"`) && !strings.Contains(got, "may not use target") || strings.Contains(got, `"content":"tok`) {
		t.Errorf("stream, a target the key may not use: %s", got)
	}
}
