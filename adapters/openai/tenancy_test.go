package openai_test

import (
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// TestTenancyEveryPath: Chat Completions keeps nothing a client can
// name later, so with auth on, key B holding key A's completion id gets,
// on every path that takes an id (OpenAI's stored-completion paths
// included), what it gets for an id that names nothing, without a word
// of A's answer.
func TestTenancyEveryPath(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a")}, {Name: "bob", Hash: bridge.KeyDigest("key-b")}}
	inst := bridgetest.Start(t, &cfg)

	status, body := bridgetest.Call(t, inst.URL, "key-a", "POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"alice's secret words"}]}`)
	var c struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &c); status != 200 || err != nil || !strings.HasPrefix(c.ID, "chatcmpl-") {
		t.Fatalf("A's completion: %d %s", status, body)
	}
	const nobody = "chatcmpl-aaaaaaaaaaaaaaaaaaaaaaaa"
	for _, pr := range []struct{ method, path string }{
		{"GET", "/v1/chat/completions/ID"},
		{"POST", "/v1/chat/completions/ID"},
		{"DELETE", "/v1/chat/completions/ID"},
		{"GET", "/v1/chat/completions/ID/messages"},
		{"GET", "/v1/models/ID"},
		{"GET", "/v1/responses/ID"},
	} {
		for _, key := range []string{"key-b", "key-a"} {
			status, body := bridgetest.Call(t, inst.URL, key, pr.method, strings.ReplaceAll(pr.path, "ID", c.ID), "")
			wantStatus, wantBody := bridgetest.Call(t, inst.URL, key, pr.method, strings.ReplaceAll(pr.path, "ID", nobody), "")
			if status != wantStatus || strings.ReplaceAll(body, c.ID, nobody) != wantBody || strings.Contains(body, "secret") {
				t.Errorf("%s's %s %s: %d %s\nfor an id naming nothing: %d %s", key, pr.method, pr.path, status, body, wantStatus, wantBody)
			}
		}
	}
}
