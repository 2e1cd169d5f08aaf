package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/conformance/clients/agent/sdksuite"
)

// nodeSuite and run drive the Node SDK suite (conformance/clients/agent).
var (
	nodeSuite = func(t *testing.T) string { return sdksuite.Dir(t) }
	run       = sdksuite.Run
)

// TestSDK runs @langchain/langgraph-sdk 1.15.0's ThreadStream over SSE and
// WebSocket against a whole instance (the embedded default: scripted
// targets, embedded NATS with the thread KV bucket), then type-checks every
// event and response the suite received against @langchain/protocol 0.0.21
// with tsc --strict.
func TestSDK(t *testing.T) {
	dir := nodeSuite(t)
	inst := bridgetest.Start(t, nil)
	capture := t.TempDir()
	out := run(t, dir, 3*time.Minute, []string{"INTERLINGUA_URL=" + inst.URL, "CAPTURE_DIR=" + capture}, "node", "--test", "test/")
	t.Logf("node --test:\n%s", tail(out, 12))
	typecheck(t, dir, capture, true)
}

// TestTypecheckCatchesDrift shows the schema check can fail: payloads with a
// renamed key, a mistyped field and an unknown delta field are rejected.
func TestTypecheckCatchesDrift(t *testing.T) {
	dir := nodeSuite(t)
	capture := t.TempDir()
	bad := `{"kind":"event","payload":{"type":"event","eventId":"1","seq":1,"method":"lifecycle","params":{"namespace":[],"timestamp":1,"data":{"event":"running"}}}}
{"kind":"event","payload":{"type":"event","event_id":"2","seq":"2","method":"lifecycle","params":{"namespace":[],"timestamp":1,"data":{"event":"completed"}}}}
{"kind":"event","payload":{"type":"event","event_id":"3","seq":3,"method":"messages","params":{"namespace":[],"timestamp":1,"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","txt":"x"}}}}}
{"kind":"response","method":"run.start","payload":{"type":"success","id":1,"result":{"runId":"r"}}}
`
	if err := os.WriteFile(filepath.Join(capture, "capture-1.jsonl"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out := typecheck(t, dir, capture, false)
	// captured.ts holds the four payloads on lines 6 to 9: each must fail.
	for line, why := range map[int]string{6: "eventId for event_id", 7: "seq as a string", 8: "txt for text", 9: "runId for run_id"} {
		if !strings.Contains(out, fmt.Sprintf("captured.ts(%d,", line)) {
			t.Errorf("tsc accepted the payload with %s:\n%s", why, out)
		}
	}
}

// typecheck generates captured.ts from a capture folder and runs
// tsc --strict --noEmit on it; it returns tsc's output.
func typecheck(t *testing.T, dir, capture string, wantOK bool) string {
	t.Helper()
	out := t.TempDir()
	run(t, dir, time.Minute, nil, "node", "typecheck/generate.mjs", capture, out)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "tsc"), "--strict", "--noEmit", "-p", out)
	cmd.Dir = dir
	res, err := cmd.CombinedOutput()
	if wantOK && err != nil {
		gen, _ := os.ReadFile(filepath.Join(out, "captured.ts"))
		t.Fatalf("captured payloads do not type-check against @langchain/protocol: %v\n%s\n--- captured.ts (head)\n%s", err, res, tail(string(gen), 0))
	}
	if !wantOK && err == nil {
		t.Fatalf("tsc accepted drifted payloads:\n%s", res)
	}
	return string(res)
}

// tail returns the last n lines of s (all of it when n is 0, up to 200).
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if n == 0 {
		n = 200
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
