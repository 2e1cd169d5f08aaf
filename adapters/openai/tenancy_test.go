package openai_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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

	status, body := call(t, inst.URL, "key-a", "POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"alice's secret words"}]}`)
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
			status, body := call(t, inst.URL, key, pr.method, strings.ReplaceAll(pr.path, "ID", c.ID), "")
			wantStatus, wantBody := call(t, inst.URL, key, pr.method, strings.ReplaceAll(pr.path, "ID", nobody), "")
			if status != wantStatus || strings.ReplaceAll(body, c.ID, nobody) != wantBody || strings.Contains(body, "secret") {
				t.Errorf("%s's %s %s: %d %s\nfor an id naming nothing: %d %s", key, pr.method, pr.path, status, body, wantStatus, wantBody)
			}
		}
	}
}

// noKeepAlive is the tests' client: it keeps no connection (and no
// goroutine) open between requests.
var noKeepAlive = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// call sends a request with key and returns the status and the body.
func call(t *testing.T, base, key, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
