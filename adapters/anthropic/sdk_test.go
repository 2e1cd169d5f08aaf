package anthropic_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	peer "github.com/interlingua-dev/interlingua/conformance/peers/anthropic"
)

// peerModels are the reference peer's models behind the anthropic
// backend: parallel tool calls, thinking with a signature (and a
// signature-only block), usage with cache counts, a ToolSearch call, an
// error event after the first block.
var peerModels = []peer.Model{
	{Name: "peer-tools", Blocks: []peer.Block{
		{Type: "text", Deltas: []string{"Checking", " both."}},
		{Type: "tool_use", ID: "toolu_A", Name: "get_weather", Deltas: []string{`{"city": "Par`, `is"}`}},
		{Type: "tool_use", ID: "toolu_B", Name: "get_time", Deltas: []string{`{"tz": "CET"}`}},
	}, Usage: peer.Usage{Input: 472, Output: 89}},
	{Name: "peer-thinking", Blocks: []peer.Block{
		{Type: "thinking", Deltas: []string{"Let me solve this step by step:", "\n\n1. First break down 27 * 453"}, Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
		{Type: "thinking", Signature: "EsigOnly=="},
		{Type: "redacted_thinking", Data: "EmwKAhgBEgy3va3pzix"},
		{Type: "text", Deltas: []string{"12,231"}},
	}, Usage: peer.Usage{Input: 30, Output: 120}},
	{Name: "peer-usage", Blocks: []peer.Block{{Type: "text", Deltas: []string{"ok"}}},
		Usage: peer.Usage{Input: 10, CacheRead: 1000, CacheCreation: 200, Output: 3}, StopReason: "stop_sequence", StopSequence: "END"},
	{Name: "peer-toolsearch", Blocks: []peer.Block{ // Claude Code's client-side tool search (claudecode_test.go)
		{Type: "tool_use", ID: "toolu_S", Name: "ToolSearch", Deltas: []string{`{"query": "select:WebFetch"}`}},
	}, Usage: peer.Usage{Input: 200, Output: 20}},
	{Name: "peer-error", Blocks: []peer.Block{{Type: "text", Deltas: []string{"partial"}}},
		ErrorEvent: "overloaded_error", ErrorMessage: "Overloaded", ErrorEventAt: 1},
}

// startWithPeer starts an instance whose targets are the scripted ones
// plus the peer's models through a backend of type anthropic, with an
// API key required.
func startWithPeer(t *testing.T, key string) (*bridgetest.Instance, *peer.Peer) {
	t.Helper()
	p := peer.New("upstream-key", peerModels...)
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		p.Close()
		srv.Close()
	})
	t.Setenv("ANTHROPIC_TEST_UPSTREAM_KEY", "upstream-key")
	var opts yaml.Node
	if err := yaml.Unmarshal([]byte("base_url: "+srv.URL+"\napi_key:\n  env: ANTHROPIC_TEST_UPSTREAM_KEY\n"), &opts); err != nil {
		t.Fatal(err)
	}
	cfg := bridge.DefaultConfig()
	cfg.Backends["upstream"] = bridge.BackendConfig{Type: "anthropic", Options: *opts.Content[0]}
	for _, m := range peerModels {
		cfg.Routes = append(cfg.Routes, bridge.Route{Target: m.Name, Backend: "upstream"})
	}
	if key != "" {
		cfg.Auth.Keys = []bridge.APIKey{{Name: "test", Hash: bridge.KeyDigest(key)}}
	}
	return bridgetest.Start(t, &cfg), p
}

// clientDir is the npm client's folder, installed by make node-deps.
func clientDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "conformance", "clients", "anthropic"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@anthropic-ai", "sdk")); err != nil {
		t.Fatalf("%s: @anthropic-ai/sdk is not installed (run make node-deps): %v", dir, err)
	}
	return dir
}

// TestNodeSDK drives the official @anthropic-ai/sdk (pinned in
// conformance/clients/anthropic) against a whole instance: scripted
// targets and the reference peer behind the anthropic backend. The
// client's view of every scenario is a golden file.
func TestNodeSDK(t *testing.T) {
	dir := clientDir(t)
	inst, _ := startWithPeer(t, "client-key")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "sdk.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "INTERLINGUA_URL="+inst.URL, "INTERLINGUA_KEY=client-key")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node sdk.mjs: %v\n%s\n%s", err, out, stderr)
	}
	golden(t, "sdk/node_sdk.golden", out)
}
