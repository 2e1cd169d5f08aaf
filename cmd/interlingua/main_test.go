package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/canonical"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if buildDir != "" {
			os.RemoveAll(buildDir)
		}
		os.Exit(code)
	}))
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

// buildBinary builds the daemon once per test binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "interlingua-test-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "interlingua")
		var out []byte
		if out, buildErr = exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); buildErr != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", buildErr, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := client.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("daemon not ready within 20s")
}

// SIGTERM during a run that hangs: once the shutdown timeout passes the
// run ends failed, unavailable, "the server is shutting down" (not
// cancelled: its client did not cancel it, and may run it elsewhere;
// TestSIGTERMDrainsEveryFrontend has each protocol's form); the process
// exits 0.
func TestSIGTERMCancelsHangingRun(t *testing.T) {
	bin := buildBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", t.TempDir(), "--shutdown-timeout", "300ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	base := "http://" + addr
	waitReady(t, base)

	resp, err := client.Post(base+"/v1/runs", "application/json",
		strings.NewReader(`{"target":"echo","parameters":{"hang":true},"inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no first event")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var evs []*canonical.Event
	first := &canonical.Event{}
	if err := protojson.Unmarshal(sc.Bytes(), first); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, first)
	for sc.Scan() {
		ev := &canonical.Event{}
		if err := protojson.Unmarshal(sc.Bytes(), ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1].GetLifecycle()
	if last.GetStatus() != canonical.StatusFailed || canonical.Code(last.GetError().GetCode()) != canonical.CodeUnavailable ||
		last.GetError().GetMessage() != "the server is shutting down" {
		t.Fatalf("last event %v, want failed: the server is shutting down", evs[len(evs)-1])
	}

	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "cancelling runs") {
		t.Fatalf("log lacks the cancel line:\n%s", stderr.String())
	}
}

// A run that finishes within the shutdown timeout is not cancelled.
func TestSIGTERMLetsRunsFinish(t *testing.T) {
	bin := buildBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", t.TempDir(), "--shutdown-timeout", "20s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	base := "http://" + addr
	waitReady(t, base)
	resp, err := client.Post(base+"/v1/runs", "application/json",
		strings.NewReader(`{"target":"echo","parameters":{"delay_ms":100},"inputs":[{"name":"prompt","node":{"data":"YSBiIGM="}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Scan()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	var ev map[string]any
	_ = json.Unmarshal([]byte(last), &ev)
	if fmt.Sprint(ev["lifecycle"]) != "map[status:RUN_STATUS_COMPLETED]" {
		t.Fatalf("last event %s, want completed", last)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func TestBadConfigRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, yaml, want string }{
		{"unknown key", "listen: 127.0.0.1:0\nlisen: x\n", `line 2: unknown key "lisen" (did you mean "listen"?)`},
		{"unknown backend", "backends:\n  s:\n    type: scripted\nroutes:\n  - target: echo\n    backend: typo\n", `line 6: routes[0].backend: unknown backend "typo"`},
		{"unknown backend type", "backends:\n  s:\n    type: nope\nroutes:\n  - target: echo\n    backend: s\n", `backends.s.type: unknown type "nope"`},
		{"bad yaml", "routes: [\n", "line"},
	}
	var stderr bytes.Buffer
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".yaml")
			if err := os.WriteFile(f, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			stderr.Reset()
			code := run([]string{"serve", "--config", f, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, &stderr, &stderr)
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr %q does not contain %q", stderr.String(), tt.want)
			}
		})
	}
}

func TestCommandLine(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "interlingua ") {
		t.Fatalf("version: %d %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"serve", "--help"}, &out, &out); code != 0 {
		t.Fatalf("serve --help exit %d", code)
	}
	for _, f := range []string{"-listen", "-data-dir", "-config", "-nats-url"} {
		if !strings.Contains(out.String(), f) {
			t.Fatalf("serve --help lacks %s:\n%s", f, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"frobnicate"}, &out, &out); code != 2 {
		t.Fatalf("unknown command exit %d", code)
	}
	if code := run([]string{"serve", "--set", "nope=1"}, &out, &out); code != 2 || !strings.Contains(out.String(), "unknown key") {
		t.Fatalf("--set unknown key: %q", out.String())
	}
	out.Reset()
	if code := run([]string{"serve", "--api-key", " ", "--data-dir", t.TempDir()}, &out, &out); code != 2 || !strings.Contains(out.String(), "empty key") {
		t.Fatalf("--api-key \" \": exit %d %q", code, out.String())
	}
}

func netDial(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) }

type execCmd = exec.Cmd

func newCmd(bin string, args ...string) *exec.Cmd { return exec.Command(bin, args...) }

// A container started without a config file turns auth on from the
// environment (INTERLINGUA_API_KEY, or INTERLINGUA_API_KEY_FILE naming a
// mounted secret), so it may listen on 0.0.0.0; clients need the key.
func TestEnvAPIKeys(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(secret, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--listen", "0.0.0.0:"+strings.Split(addr, ":")[1], "--data-dir", t.TempDir(), "--log-level", "error")
	cmd.Env = append(os.Environ(), "INTERLINGUA_API_KEY=from-env", "INTERLINGUA_API_KEY_FILE="+secret)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitReady(t, "http://"+addr)
	for key, want := range map[string]int{"": 401, "nope": 401, "from-env": 200, "from-file": 200} {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/runs", strings.NewReader(`{"target":"echo","inputs":[]}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("key %q: status %d, want %d (daemon: %s)", key, resp.StatusCode, want, stderr.String())
		}
	}
}

// A misspelt INTERLINGUA_* variable is named, not ignored in silence.
func TestUnknownEnv(t *testing.T) {
	got := unknownEnv([]string{"INTERLINGUA_NATS_URL=x", "INTERLINGUA_NATS_ULR=x", "INTERLINGUA_API_KEY=k", "HOME=/", "INTERLINGUA_LISTEN=:1", "INTERLINGUA_TEST_X=1"})
	if len(got) != 1 || got[0] != "INTERLINGUA_NATS_ULR" {
		t.Fatalf("unknownEnv = %v, want [INTERLINGUA_NATS_ULR]", got)
	}
}
