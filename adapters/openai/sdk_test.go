package openai_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	peer "github.com/interlingua-dev/interlingua/conformance/peers/openai"
)

// nodeSuite is conformance/clients/openai with its packages installed by
// make node-deps; the test is skipped only when node or node_modules is
// missing (CI installs them).
func nodeSuite(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: the openai npm client suite needs Node >= 18 (CI has it)")
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "conformance", "clients", "openai")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		t.Skip("conformance/clients/openai/node_modules is missing: run make node-deps")
	}
	return dir
}

// TestNodeSDK runs the official openai npm client (6.49.0) against a whole
// instance: streamed text with the usage chunk, not streamed, the stream
// helper over parallel tool calls and reasoning, a tool round trip,
// errors before and after the first chunk, unknown model, bad input, a
// wrong key, models list and retrieve, cancel.
func TestNodeSDK(t *testing.T) {
	dir := nodeSuite(t)
	p, srv := startPeer(t, append(peerModels, peer.Model{Name: "hang", Content: []string{"first"}, Hang: true})...)
	cfg := peerConfig(t, srv.URL)
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "hang", Backend: "up"})
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a")}}
	inst := bridgetest.Start(t, &cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "test/")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "INTERLINGUA_URL="+inst.URL, "INTERLINGUA_KEY=key-a")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)
	select {
	case name := <-p.Cancelled():
		if name != "hang" {
			t.Fatalf("cancelled %q", name)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the aborted stream did not close the upstream request")
	}
}
