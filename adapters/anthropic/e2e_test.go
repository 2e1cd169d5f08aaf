package anthropic_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/interlingua-dev/interlingua/adapters/anthropic"
	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// The variable parts of an answer: request and run ids.
var (
	reqID  = regexp.MustCompile(`req_[0-9a-f]{24}`)
	msgID  = regexp.MustCompile(`"msg_[^"]*"`)
	toolID = regexp.MustCompile(`"toolu_[^"]*"`)
)

func normalize(b []byte) []byte {
	b = reqID.ReplaceAll(b, []byte("req_X"))
	b = msgID.ReplaceAll(b, []byte(`"msg_X"`))
	return toolID.ReplaceAll(b, []byte(`"toolu_X"`))
}

// golden compares got with testdata/<name>, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	got = normalize(got)
	if anthropic.Update() {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Fatalf("%s differs (run with -update to accept):\n%s", file, d)
	}
}

// post sends body to path with headers and returns the status line,
// the headers that matter and the body, as one transcript.
func post(t *testing.T, base, path, body string, header ...string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var tr bytes.Buffer
	tr.WriteString("> POST " + path + "\n> " + body + "\n< " + resp.Status + "\n")
	for _, h := range []string{"Content-Type", "Request-Id", "X-Should-Retry", "Www-Authenticate"} {
		if v := resp.Header.Get(h); v != "" {
			tr.WriteString("< " + h + ": " + v + "\n")
		}
	}
	tr.WriteString("\n")
	tr.Write(data)
	return tr.Bytes()
}

func TestFrontendScripted(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	for _, tc := range []struct{ name, body string }{
		{"echo_stream", `{"model":"echo","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello there world"}]}`},
		{"echo_message", `{"model":"echo","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"hello there"}]}]}`},
		{"agent_stream", `{"model":"demo-agent","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"what is 6*7?"}]}`},
		{"agent_message", `{"model":"demo-agent","max_tokens":64,"messages":[{"role":"user","content":"what is 6*7?"}]}`},
		{"fail_mid_stream", `{"model":"stream","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"x"}],"metadata":{"user_id":"u"},"fail_after":2,"fail_code":"unavailable","fail_message":"upstream went away"}`},
		{"fail_before", `{"model":"echo","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"x"}],"fail_after":0,"fail_code":"resource_exhausted","fail_message":"quota"}`},
		{"unknown_model", `{"model":"nope","max_tokens":64,"messages":[{"role":"user","content":"x"}]}`},
		{"no_max_tokens", `{"model":"echo","messages":[{"role":"user","content":"x"}]}`},
		{"bad_role", `{"model":"echo","max_tokens":5,"messages":[{"role":"tool","content":"x"}]}`},
		{"server_tool_history", `{"model":"echo","max_tokens":64,"messages":[{"role":"user","content":"what is 6*7?"},{"role":"assistant","content":[{"type":"server_tool_use","id":"call-1","name":"calculator","input":{"expression":"6 * 7"}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},{"type":"text","text":"42."}]},{"role":"user","content":"thanks"}]}`},
		{"system_message", `{"model":"echo","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"system","content":[{"type":"text","text":"be brief"}],"output_config":{"effort":"low"}},{"role":"user","content":"again"}]}`},
		{"bad_block", `{"model":"echo","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":7}]}]}`},
		{"not_json", `{"model":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, "frontend/"+tc.name+".golden", post(t, inst.URL, "/v1/messages", tc.body))
		})
	}
}

var _ = bridge.DefaultConfig
