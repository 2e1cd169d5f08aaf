package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestConformanceUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--mode", "server"},
		{"--mode", "server", "--protocol", "triton"},
		{"--report", "yaml"},
		{"--bogus"},
		{"extra"},
		{"--known-failing", "/no/such/file"},
		{"--mode", "nope"},
	} {
		var out, errb bytes.Buffer
		if code := conformanceMain(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := conformanceMain([]string{"--help"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "--mode server") {
		t.Errorf("--help: exit %d, %q", code, errb.String())
	}
}

// One pair of the bridge matrix through the CLI, as JSON; a known-failing
// case that passes fails the run.
func TestConformanceBridgePair(t *testing.T) {
	var out, errb bytes.Buffer
	code := conformanceMain([]string{"--run", "bridge/frontend:native/backend:canonical", "--report", "json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	var rep struct {
		Passed  int `json:"passed"`
		Results []struct{ Name, Outcome string }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Passed < 10 {
		t.Fatalf("report: %v, %+v", err, rep)
	}
	known := filepath.Join(t.TempDir(), "known")
	if err := os.WriteFile(known, []byte("# passes, so it is reported\nbridge/**/text-stream\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	code = conformanceMain([]string{"--run", "bridge/frontend:native/backend:canonical/text-stream", "--known-failing", known}, &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "UNEXPECTED-PASS") {
		t.Fatalf("exit %d, want 1 with an unexpected pass:\n%s", code, out.String())
	}
}

// --mode server passes our own frontends when pointed at `interlingua
// serve` (its default, scripted targets).
func TestConformanceServerModeAgainstServe(t *testing.T) {
	bin := buildBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", t.TempDir())
	var log syncBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	base := "http://" + addr
	waitReady(t, base)
	for _, p := range []string{"native", "triton", "evergreen", "glide", "xml"} {
		t.Run(p, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := conformanceMain([]string{"--mode", "server", "--protocol", p, "--target", base}, &out, &errb); code != 0 {
				t.Fatalf("exit %d:\n%s%s\ndaemon log:\n%s", code, out.String(), errb.String(), log.String())
			}
		})
	}
}
