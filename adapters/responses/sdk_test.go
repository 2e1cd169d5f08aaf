package responses_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// nodeSuite is conformance/clients/responses with its packages installed
// (make node-deps, or npm ci here when they are missing); the test is
// skipped only without node (or, to install, npm).
func nodeSuite(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: the openai npm client suite needs Node >= 18 (CI has it)")
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "conformance", "clients", "responses")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skip("node_modules is missing and npm is not on PATH: run make node-deps")
		}
		runIn(t, dir, 5*time.Minute, nil, "npm", "ci", "--no-audit", "--no-fund")
	}
	return dir
}

func runIn(t *testing.T, dir string, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// TestNodeSDK runs the official openai npm client (6.49.0) against a
// whole instance: responses.create streamed and not, the responses.stream
// helper, retrieve, inputItems.list, delete, multi-turn with
// previous_response_id, a function call round trip, store:false, a second
// API key refused, errors; and its WebSocket mode client (ResponsesWS).
func TestNodeSDK(t *testing.T) {
	dir := nodeSuite(t)
	p := startPeer(t)
	cfg := peerConfig(t, p)
	cfg.Auth.Keys = aliceAndBob()
	inst := bridgetest.Start(t, &cfg)
	out := runIn(t, dir, 3*time.Minute, []string{"INTERLINGUA_URL=" + inst.URL, "INTERLINGUA_KEY=key-a", "INTERLINGUA_OTHER_KEY=key-b"}, "node", "--test", "test/")
	t.Logf("node --test:\n%s", out)
}
