// Package sdksuite lets Go tests drive the Node suite beside it
// (conformance/clients/agent: @langchain/langgraph-sdk against an
// Interlingua instance): it finds the suite's folder, makes sure its npm
// packages are installed, and runs commands there.
package sdksuite

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Dir returns the suite's folder with its dependencies installed. They come
// from `make test` (npm ci --prefix conformance/clients/agent) or, when
// missing, from npm ci run here (it needs the npm registry). The test is
// skipped only when node (or, to install, npm) is not on PATH.
func Dir(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: the @langchain/langgraph-sdk suite needs Node >= 18 (CI has it)")
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("sdksuite: cannot locate its own source")
	}
	dir := filepath.Dir(filepath.Dir(file))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-sdk", "package.json")); err != nil {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skip("node_modules is missing and npm is not on PATH: run npm ci --prefix conformance/clients/agent")
		}
		Run(t, dir, 5*time.Minute, nil, "npm", "ci", "--no-audit", "--no-fund")
	}
	return dir
}

// Run runs a command in dir with env added, failing t with its output if
// it fails, and returns the output.
func Run(t testing.TB, dir string, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
