package anthropic_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// TestTenancyEveryPath: a Message's id names its run ("msg_" + the run
// id, which is also the run's thread), so with auth on, key B holding
// key A's Message id probes every path of the instance that takes a
// thread, run or id: each answers B not-found (the agent protocol's
// commands: an error in band) without a word of A's run, and B's probes
// claim nothing: A still replays its thread afterwards. (The agent
// protocol's reading paths answer another key's thread as one nobody
// used: bridge's TestTenantIsolation.)
func TestTenancyEveryPath(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a")}, {Name: "bob", Hash: bridge.KeyDigest("key-b")}}
	inst := bridgetest.Start(t, &cfg)

	status, body := bridgetest.Call(t, inst.URL, "key-a", "POST", "/v1/messages", `{"model":"echo","max_tokens":64,"messages":[{"role":"user","content":"alice's secret words"}]}`)
	var msg struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &msg); status != 200 || err != nil || !strings.HasPrefix(msg.ID, "msg_run-") {
		t.Fatalf("A's Message: %d %s", status, body)
	}
	run := strings.TrimPrefix(msg.ID, "msg_")
	for _, pr := range []struct{ method, path, body string }{
		{"GET", "/v1/messages/" + msg.ID, ""},
		{"GET", "/v1/messages/" + run, ""},
		{"GET", "/v1/chat/completions/" + run, ""},
		{"GET", "/v1/responses/" + run, ""},
		{"GET", "/v1/threads/" + run + "/events?since=0", ""},
		{"GET", "/threads/" + run + "/state", ""},
		{"POST", "/threads/" + run + "/runs/" + run + "/cancel", ""},
		{"POST", "/threads/" + run + "/commands", `{"id":1,"method":"state.get","params":{}}`},
		{"POST", "/v1/runs", `{"target":"echo","threadId":"` + run + `","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`},
	} {
		status, body := bridgetest.Call(t, inst.URL, "key-b", pr.method, pr.path, pr.body)
		if strings.HasSuffix(pr.path, "/commands") { // answered in band
			if status != 200 || !strings.HasPrefix(body, `{"type":"error"`) || strings.Contains(body, "secret") {
				t.Errorf("B's %s %s: %d %s, want an error", pr.method, pr.path, status, body)
			}
			continue
		}
		if status != http.StatusNotFound || strings.Contains(body, "secret") {
			t.Errorf("B's %s %s: %d %s, want not-found", pr.method, pr.path, status, body)
		}
	}
	// A's thread is still A's: its replay holds the run, to its end.
	if got := firstLines(t, inst.URL, "key-a", "/v1/threads/"+run+"/events?since=0", "RUN_STATUS_COMPLETED"); !strings.Contains(got, "secret") {
		t.Fatalf("A's replay of its thread after B's probes:\n%s", got)
	}
}

// noKeepAlive is the tests' client: it keeps no connection (and no
// goroutine) open between requests.
var noKeepAlive = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// firstLines reads a stream with key up to the line holding until (within
// 10 s) and returns what it read.
func firstLines(t *testing.T, base, key, path, until string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
	var out strings.Builder
	r := bufio.NewReader(resp.Body)
	for !strings.Contains(out.String(), until) {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			t.Fatalf("%s: %v after\n%s", path, err, out.String())
		}
	}
	return out.String()
}
