package openai_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/adapters/openai"
	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestKeepalive: a run slower than the keepalive interval gets ": keepalive"
// comments, the first before its first chunk (committing the 200), and
// its chunks whole and in order between them, ending with [DONE].
func TestKeepalive(t *testing.T) {
	cfg := bridge.DefaultConfig()
	inst := bridgetest.Start(t, &cfg)
	mux := http.NewServeMux()
	openai.NewFrontend(openai.FrontendConfig{Runner: inst.Bridge(), Keepalive: 20 * time.Millisecond}).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"echo","stream":true,"messages":[{"role":"user","content":"a b c"}],"delay_ms":120}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	s := string(data)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(s, ": keepalive\n\n") || !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Fatalf("status %d, body:\n%s", resp.StatusCode, s)
	}
	var content []string
	for _, ev := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		switch {
		case ev == ": keepalive":
		case strings.HasPrefix(ev, "data: {"):
			if i := strings.Index(ev, `"content":"`); i >= 0 {
				content = append(content, ev[i+len(`"content":"`):][:strings.IndexByte(ev[i+len(`"content":"`):], '"')])
			}
		case ev == "data: [DONE]":
		default:
			t.Fatalf("event %q in:\n%s", ev, s)
		}
	}
	if got := strings.Join(content, ""); got != "a b c" {
		t.Fatalf("content %q (chunks %q), want \"a b c\"", got, content)
	}
	if n := strings.Count(s, ": keepalive\n\n"); n < 3 {
		t.Fatalf("%d keepalives in a run of about 360 ms at 20 ms, want several:\n%s", n, s)
	}
}
