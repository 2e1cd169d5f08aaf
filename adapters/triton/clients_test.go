package triton_test

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// need skips the test when a client program is missing (CI has both).
func need(t *testing.T, prog string, check ...string) string {
	t.Helper()
	path, err := exec.LookPath(prog)
	if err != nil {
		t.Skipf("%s is not installed (CI has it): %v", prog, err)
	}
	if len(check) > 0 {
		if out, err := exec.Command(path, check...).CombinedOutput(); err != nil {
			t.Skipf("%s %v fails (CI has it): %v %s", prog, check, err, out)
		}
	}
	return path
}

// runClient runs a real client program and returns its stdout.
func runClient(t *testing.T, prog string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(cmd.Environ(), "PYTHONIOENCODING=utf-8", "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", prog, args, err, stderr.Bytes())
	}
	return out
}

// TestCurl: curl -N streams from the embedded default, and reads every
// reply as the goldens say (the "done when" command).
func TestCurl(t *testing.T) {
	curl := need(t, "curl")
	inst := bridgetest.Start(t, nil)
	for _, tc := range []struct{ name, path, body string }{
		{"curl_stream", "/v2/models/echo/generate_stream", `{"text_input":"hello world","stream":true}`},
		{"curl_generate", "/v2/models/echo/generate", `{"text_input":"hello world"}`},
		{"curl_error_mid_stream", "/v2/models/echo/generate_stream", `{"text_input":"a b c","stream":true,"fail_after":1,"fail_message":"boom"}`},
		{"curl_unknown_model", "/v2/models/nope/generate_stream", `{"text_input":"x","stream":true}`},
		{"curl_split_rune", "/v2/models/echo/generate_stream", `{"text_input":"hi","stream":true,"split_rune":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runClient(t, curl, "-sS", "-N", "-d", tc.body, "-w", "\n-- %{http_code} %{content_type}\n", inst.URL+tc.path)
			golden(t, "clients", tc.name, out)
		})
	}
}

// TestPythonRequests reads the stream with python requests, as users do,
// from the embedded default and through the Triton backend.
func TestPythonRequests(t *testing.T) {
	py := need(t, "python3", "-c", "import requests")
	_, _, inst := startChain(t)
	script := "testdata/clients/triton_client.py"
	for _, tc := range []struct{ name, mode, path, body string }{
		{"python_stream", "generate_stream", "/v2/models/echo/generate_stream", `{"text_input":"hello world","stream":true}`},
		{"python_stream_unicode", "generate_stream", "/v2/models/echo/generate_stream", `{"text_input":"héllo wörld 😀","stream":true,"split_rune":true}`},
		{"python_stream_error", "generate_stream", "/v2/models/echo/generate_stream", `{"text_input":"a b c","stream":true,"fail_after":2,"fail_message":"boom"}`},
		{"python_stream_refused", "generate_stream", "/v2/models/echo/generate_stream", `{"text_input":"x","stream":"yes"}`},
		{"python_generate", "generate", "/v2/models/demo-agent/generate", `{"id":"1","text_input":"6 * 7?"}`},
		{"python_chain_stream", "generate_stream", "/v2/models/chunks/generate_stream", `{"text_input":"x","stream":true}`},
		{"python_chain_generate", "generate", "/v2/models/ensemble/generate", `{"text_input":"hello world","max_tokens":4}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, "clients", tc.name, runClient(t, py, script, tc.mode, inst.URL+tc.path, tc.body))
		})
	}
	t.Run("python_health", func(t *testing.T) {
		golden(t, "clients", "python_health", runClient(t, py, script, "health", inst.URL, "echo"))
	})
}
