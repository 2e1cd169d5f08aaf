package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
		return postCommand(t, ts.URL, key, thread, method, params)
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

// All threads' buffers together are bounded (MaxBufferBytes): past it a
// thread coming into memory makes idle threads leave, the longest idle
// first, so what threads buffer stops growing with the threads run; a
// thread that left is read back whole from the store. Under the default
// bound the same threads all stay.
func TestBufferBudgetEvictsIdleThreads(t *testing.T) {
	store, _ := startFabric(t)
	run := func(maxBuffer int) []int64 {
		fe, err := agent.NewFrontend(agent.Config{Runner: newRunner(t), Store: store, MaxBufferBytes: maxBuffer})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		fe.Mount(mux)
		ts := httptest.NewServer(mux)
		defer func() { fe.Shutdown(); ts.Close(); fe.Close() }()
		command := func(thread, method string, params any) map[string]any {
			t.Helper()
			return postCommand(t, ts.URL, "", thread, method, params)
		}
		var buffered []int64
		for i := range 4 {
			thread := fmt.Sprintf("budget-%d-%d", maxBuffer, i)
			if res := command(thread, "run.start", map[string]any{"assistant_id": "echo", "input": user("hi " + thread)}); res["type"] != "success" {
				t.Fatalf("%s: %v", thread, res)
			}
			for range 200 { // until the run is over and its state saved
				res := command(thread, "state.get", map[string]any{"namespace": []string{}})
				if fmt.Sprint(res["result"].(map[string]any)["next"]) == "[]" {
					break
				}
			}
			// The thread counts its buffer as it goes idle, just after
			// (under the default bound the count grows).
			before := int64(0)
			if i > 0 {
				before = buffered[i-1]
			}
			for deadline := time.Now().Add(5 * time.Second); maxBuffer == 0 && fe.BufferedBytes() == before && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			buffered = append(buffered, fe.BufferedBytes())
		}
		// The first thread, wherever it is, has its conversation.
		res := command(fmt.Sprintf("budget-%d-0", maxBuffer), "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
		msgs, _ := res["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)
		if len(msgs) != 2 {
			t.Fatalf("the first thread's messages after the others ran: %v", res)
		}
		return buffered
	}
	all := run(0)
	bounded := run(1)
	t.Logf("buffered bytes after each thread: default bound %v, MaxBufferBytes 1 %v", all, bounded)
	if all[0] <= 0 || all[3] < 3*all[0] {
		t.Fatalf("default bound: buffered bytes after each of 4 threads %v; want them to add up", all)
	}
	for i, b := range bounded {
		if b > 2*all[0] {
			t.Fatalf("MaxBufferBytes 1: buffered bytes after each of 4 threads %v; after thread %d more than two threads' %d", bounded, i, 2*all[0])
		}
	}
}

// postCommand sends one command on thread (as API key key, in X-Key,
// when not empty) and returns the response.
func postCommand(t *testing.T, base, key, thread, method string, params any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"id": 1, "method": method, "params": params})
	req, _ := http.NewRequest("POST", base+"/threads/"+thread+"/commands", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-Key", key)
	}
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
