package bridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// Thread ids are opaque UTF-8 strings: dots, spaces and non-ASCII work on
// the native and agent paths with auth on (the owner claim is a KV key) and
// across two instances (subjects), and a replay returns the run.
func TestThreadIDs(t *testing.T) {
	ns := natsServer(t)
	keys := []bridge.APIKey{{Name: "a", Hash: bridge.KeyDigest("key-a")}}
	cfgB := clusterConfig(ns.ClientURL())
	cfgB.Auth.Keys = keys
	cfgA := clusterConfig(ns.ClientURL(), "none")
	cfgA.Auth.Keys = keys
	b := bridgetest.Start(t, cfgB)
	a := bridgetest.Start(t, cfgA)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(method, u, body string) (int, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer key-a")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if method == "GET" { // a replay: its first line
			line, _ := bufio.NewReader(resp.Body).ReadString('\n')
			return resp.StatusCode, line
		}
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	for _, id := range []string{"a.b", "é", "with space", "a*b>c", strings.Repeat("ü", 100)} {
		t.Run(id[:min(len(id), 12)], func(t *testing.T) {
			threadJSON, _ := json.Marshal(id)
			path := url.PathEscape(id)
			// native, run placed from A on B
			code, body := do("POST", a.URL+"/v1/runs", `{"target":"echo","threadId":`+string(threadJSON)+`,"inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`)
			if code != 200 || !strings.Contains(body, "RUN_STATUS_COMPLETED") {
				t.Fatalf("native run: %d %s", code, body)
			}
			for _, inst := range []*bridgetest.Instance{a, b} {
				code, line := do("GET", inst.URL+"/v1/threads/"+path+"/events?since=0", "")
				var ev struct{ ThreadID string }
				if err := json.Unmarshal([]byte(line), &ev); code != 200 || err != nil || ev.ThreadID != id {
					t.Fatalf("native replay on %s: %d %q (%v)", inst.URL, code, line, err)
				}
			}
			// agent protocol, its own thread
			agentID := url.PathEscape("agent " + id)
			code, body = do("POST", a.URL+"/threads/"+agentID+"/commands", `{"id":1,"method":"run.start","params":{"assistant_id":"demo-agent","input":{"messages":[{"role":"user","content":"6 * 7?"}]}}}`)
			if code != 200 || !strings.Contains(body, `"success"`) {
				t.Fatalf("agent run.start: %d %s", code, body)
			}
			code, body = do("POST", b.URL+"/threads/"+agentID+"/commands", `{"id":2,"method":"state.get","params":{"namespace":[]}}`)
			if code != 200 || !strings.Contains(body, `"success"`) {
				t.Fatalf("agent state.get on the other instance: %d %s", code, body)
			}
		})
	}
}
