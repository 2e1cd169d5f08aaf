package responses_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// codexConfig makes the daemon Codex's model provider, as a user would
// (https://github.com/openai/codex/blob/main/docs/config.md, model
// providers): the Responses wire, the key from an environment variable,
// no retries (a refused request shows), nothing sent elsewhere.
const codexConfig = `model_provider = "interlingua"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.interlingua]
name = "Interlingua"
base_url = "BASE/v1"
env_key = "INTERLINGUA_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`

// runCodex runs `codex exec` against base with model in a clean home and
// returns its last message (--output-last-message); extra is more of
// the provider's config.
func runCodex(t *testing.T, bin, base, key, model, prompt string, extra ...string) string {
	t.Helper()
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(strings.Replace(codexConfig, "BASE", base, 1)+strings.Join(extra, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	last := filepath.Join(home, "last.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "exec", "--skip-git-repo-check", "-m", model, "--output-last-message", last, prompt)
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + codexHome, "INTERLINGUA_KEY=" + key}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("codex exec -m %s: %v\n%s", model, err, out.Bytes())
	}
	msg, err := os.ReadFile(last)
	if err != nil {
		t.Fatalf("codex exec -m %s wrote no last message: %v\n%s", model, err, out.Bytes())
	}
	return strings.TrimSpace(string(msg))
}

// TestCodex drives the real OpenAI Codex CLI (pinned in
// conformance/clients/codex) at a whole instance through its Responses
// frontend, with an API key: its first request, which lists namespace,
// custom (for a model of its catalog), web_search and tool_search tools,
// is taken; a call the bridge's
// agent runs itself is not handed to Codex, which ran into an endless
// loop of requests before.
func TestCodex(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join("..", "..", "conformance", "clients", "codex", "node_modules", ".bin", "codex"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: Codex is not installed (run make node-deps): %v", bin, err)
	}
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "codex", Hash: bridge.KeyDigest("codex-key")}}
	// A model of Codex's own catalog: for it Codex offers apply_patch as
	// a custom (free-form) tool, beside tool_search and web_search.
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "gpt-5.5", Backend: "scripted", Model: "echo"})
	inst := bridgetest.Start(t, &cfg)
	log := bridgetest.NewStatusLog(t, inst.URL)
	const ok = "POST /v1/responses 200 OK"

	if got := runCodex(t, bin, log.URL, "codex-key", "echo", "say hello"); !strings.HasSuffix(got, "say hello") {
		t.Fatalf("echo: last message %q, want the prompt echoed", got)
	}
	if got := log.Take(); !slices.Equal(got, []string{ok}) {
		t.Fatalf("echo: requests %q, want one taken", got)
	}
	if got := runCodex(t, bin, log.URL, "codex-key", "gpt-5.5", "say hello"); !strings.HasSuffix(got, "say hello") {
		t.Fatalf("gpt-5.5: last message %q, want the prompt echoed", got)
	}
	if got := log.Take(); !slices.Equal(got, []string{ok}) {
		t.Fatalf("gpt-5.5: requests %q, want one taken", got)
	}
	if got := runCodex(t, bin, log.URL, "codex-key", "demo-agent", "what is 6*7?"); got != "6 * 7 = 42." {
		t.Fatalf("demo-agent: last message %q", got)
	}
	if got := log.Take(); !slices.Equal(got, []string{ok}) {
		t.Fatalf("demo-agent: requests %q, want one taken", got)
	}
	// A provider that supports WebSocket mode, as OpenAI's own: Codex
	// keeps one socket, and never falls back to POST.
	if got := runCodex(t, bin, log.URL, "codex-key", "gpt-5.5", "say hello", "supports_websockets = true"); !strings.HasSuffix(got, "say hello") {
		t.Fatalf("gpt-5.5 over a WebSocket: last message %q, want the prompt echoed", got)
	}
	if got := log.Take(); !slices.Equal(got, []string{"GET /v1/responses 101 Switching Protocols"}) {
		t.Fatalf("gpt-5.5 over a WebSocket: requests %q, want one socket", got)
	}
}
