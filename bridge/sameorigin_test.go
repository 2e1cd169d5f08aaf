package bridge_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// What a page on another site could make a browser send is refused in the
// path's protocol's form: a foreign Origin (on a POST, a GET replay or a
// WebSocket upgrade), a Host that is not loopback on a loopback listener
// (DNS rebinding), a text/plain POST; the daemon's own origin and the
// allowed ones pass, the allowed ones with CORS headers and preflights.
func TestOriginPolicy(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.AllowedOrigins = []string{"https://app.example.com"}
	inst := bridgetest.Start(t, &cfg)
	host := strings.TrimPrefix(inst.URL, "http://")
	run := `{"target":"echo","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`
	ws := map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			out[a] = b
		}
		return out
	}
	tests := []struct {
		name, method, path, body, host string
		header                         map[string]string
		status                         int
		bodyHas, acao                  string
	}{
		{"no origin", "POST", "/v1/runs", run, "", nil, 200, "RUN_STATUS_COMPLETED", ""},
		{"own origin", "POST", "/v1/runs", run, "", map[string]string{"Origin": "http://" + host}, 200, "RUN_STATUS_COMPLETED", ""},
		{"foreign origin", "POST", "/v1/runs", run, "", map[string]string{"Origin": "https://evil.example"}, 403, `"code":"permission_denied"`, ""},
		{"null origin", "POST", "/v1/runs", run, "", map[string]string{"Origin": "null"}, 403, "cross-origin", ""},
		{"foreign origin, triton form", "POST", "/v2/models/echo/generate", `{"text_input":"x"}`, "", map[string]string{"Origin": "https://evil.example"}, 403, `{"error":"cross-origin`, ""},
		{"foreign origin, agent replay upgrade", "GET", "/threads/t1/stream/events", "", "", with(ws, "Origin", "https://evil.example"), 403, `"error":"permission_denied"`, ""},
		{"foreign origin, glide upgrade", "GET", "/v1/language/echo/chatStream", "", "", with(ws, "Origin", "https://evil.example"), 403, `"name":"permission_denied"`, ""},
		{"rebound host", "POST", "/v1/runs", run, "attacker.example:8080", nil, 403, "not a loopback name", ""},
		{"localhost host", "POST", "/v1/runs", run, "localhost", nil, 200, "RUN_STATUS_COMPLETED", ""},
		{"text/plain", "POST", "/v1/runs", run, "", map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, 415, "application/json", ""},
		{"allowed origin", "POST", "/v1/runs", run, "", map[string]string{"Origin": "https://app.example.com"}, 200, "RUN_STATUS_COMPLETED", "https://app.example.com"},
		{"allowed origin preflight", "OPTIONS", "/v1/runs", "", "", map[string]string{"Origin": "https://app.example.com",
			"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}, 204, "", "https://app.example.com"},
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, inst.URL+tt.path, strings.NewReader(tt.body))
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.bodyHas) {
				t.Fatalf("got %d %s, want %d containing %q", resp.StatusCode, body, tt.status, tt.bodyHas)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tt.acao {
				t.Fatalf("Access-Control-Allow-Origin %q, want %q", got, tt.acao)
			}
		})
	}
}
