package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/canonical"
)

// One API key cannot hold every place in memory: at its own bound
// (MaxThreadsPerKey) a key's new thread takes the place of one of its idle
// threads or is refused, and at the frontend's bound (MaxThreads) an idle
// thread of any key leaves memory (its state stays in the store, and is
// read back whole). Another key's new threads keep working.
func TestThreadsPerKey(t *testing.T) {
	store, _ := startFabric(t)
	fe, err := agent.NewFrontend(agent.Config{Runner: newRunner(t), Store: store, MaxThreads: 3, MaxThreadsPerKey: 2})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	fe.Mount(mux)
	keys := map[string]*canonical.Principal{"a": {Name: "a"}, "b": {Name: "b"}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(canonical.WithPrincipal(r.Context(), keys[r.Header.Get("X-Key")])))
	}))
	t.Cleanup(func() { fe.Shutdown(); ts.Close(); fe.Close() })
	command := func(key, thread string, method string, params any) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"id": 1, "method": method, "params": params})
		req, _ := http.NewRequest("POST", ts.URL+"/threads/"+thread+"/commands", bytes.NewReader(body))
		req.Header.Set("X-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// hold opens a stream on a thread, which keeps it in use until closed.
	hold := func(key, thread string) func() {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+"/threads/"+thread+"/stream/events", strings.NewReader(`{"channels":["lifecycle"]}`))
		req.Header.Set("X-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream %s: %v %v", thread, resp, err)
		}
		return func() { resp.Body.Close() }
	}
	start := func(key, thread string) map[string]any {
		t.Helper()
		return command(key, thread, "run.start", map[string]any{"assistant_id": "echo", "input": user("hi " + thread)})
	}
	defer hold("a", "a1")()
	defer hold("a", "a2")()
	// Key a holds two threads in use: its third is refused, naming the bound.
	if res := start("a", "a3"); res["type"] != "error" || !strings.Contains(fmt.Sprint(res["message"]), `API key "a" has 2 threads in use (MaxThreadsPerKey)`) {
		t.Fatalf("key a's third thread: %v", res)
	}
	// Key b still gets a thread; one it leaves idle makes room for others.
	if res := start("b", "b1"); res["type"] != "success" {
		t.Fatalf("key b's thread: %v", res)
	}
	waitIdle := func(key, thread string) {
		t.Helper()
		for range 200 {
			res := command(key, thread, "state.get", map[string]any{"namespace": []string{}})
			if fmt.Sprint(res["result"].(map[string]any)["next"]) == "[]" {
				return
			}
		}
	}
	waitIdle("b", "b1")
	if res := start("b", "b2"); res["type"] != "success" { // the frontend is full: b1, idle, leaves
		t.Fatalf("key b's second thread at MaxThreads: %v", res)
	}
	waitIdle("b", "b2")
	// b1 is read back from the store with its conversation.
	res := command("b", "b1", "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
	msgs, _ := res["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)
	if len(msgs) != 2 || !strings.Contains(fmt.Sprint(msgs[0]), "hi b1") {
		t.Fatalf("b1 after leaving memory: %v", res)
	}
}
