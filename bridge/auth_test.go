package bridge_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/nats-io/nats.go"
)

func TestAuth(t *testing.T) {
	cfg := bridge.DefaultConfig()
	t.Setenv("TEST_KEY_B", "key-b")
	cfg.Auth.Keys = []bridge.APIKey{
		{Name: "a", Hash: bridge.KeyDigest("key-a")},
		{Name: "b", Env: "TEST_KEY_B", Targets: []string{"demo-*"}},
	}
	inst := bridgetest.Start(t, &cfg)
	run := `{"target":"echo","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`
	tests := []struct {
		name, path, body string
		header           map[string]string
		status           int
		bodyHas          string
	}{
		{"probe needs no key", "/readyz", "", nil, 200, "ready"},
		{"no key", "/v1/runs", run, nil, 401, `"code":"unauthenticated"`},
		{"wrong key", "/v1/runs", run, map[string]string{"Authorization": "Bearer nope"}, 401, "unauthenticated"},
		{"bearer", "/v1/runs", run, map[string]string{"Authorization": "Bearer key-a"}, 200, "RUN_STATUS_COMPLETED"},
		{"bearer scheme in any case (RFC 7235)", "/v1/runs", run, map[string]string{"Authorization": "bEaReR key-a"}, 200, "RUN_STATUS_COMPLETED"},
		{"x-api-key", "/v1/runs", run, map[string]string{"X-Api-Key": "key-a"}, 200, "RUN_STATUS_COMPLETED"},
		{"query key only for upgrades", "/v1/runs?key=key-a", run, nil, 401, "unauthenticated"},
		{"target not allowed for key: as unknown", "/v1/runs", run, map[string]string{"Authorization": "Bearer key-b"}, 404, `unknown target \"echo\"`},
		{"target allowed by glob", "/v1/runs", strings.Replace(run, "echo", "demo-agent", 1), map[string]string{"Authorization": "Bearer key-b"}, 200, "RUN_STATUS_COMPLETED"},
		{"agent run.start: target not allowed for key, as unknown", "/threads/t-b/commands", `{"id":1,"method":"run.start","params":{"assistant_id":"echo","input":null}}`,
			map[string]string{"Authorization": "Bearer key-b"}, 200, `"error":"invalid_argument","message":"run.start: unknown assistant_id \"echo\" (no route serves it, or the API key may not use it)."`},
		{"grpc form", "/evergreen.v2.EvergreenService/StartSession", "", map[string]string{"Content-Type": "application/grpc"}, 200, ""},
		{"triton form", "/v2/models/echo/generate", `{"text_input":"x"}`, nil, 401, `{"error":`},
		{"glide form", "/v1/language/echo/chatStream", "", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, 401, `"name":"unauthenticated"`},
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "POST"
			if tt.body == "" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, inst.URL+tt.path, strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.bodyHas) {
				t.Fatalf("got %d %s, want %d containing %q", resp.StatusCode, body, tt.status, tt.bodyHas)
			}
			if tt.name == "grpc form" && resp.Header.Get("Grpc-Status") != "16" {
				t.Fatalf("grpc-status %q, want 16", resp.Header.Get("Grpc-Status"))
			}
		})
	}
}

func TestAuthOffRefusedOffLoopback(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Listen = "0.0.0.0:0"
	cfg.DataDir = t.TempDir()
	cfg.Defaults()
	_, err := bridge.NewServer(t.Context(), cfg, discard())
	if err == nil || !strings.Contains(err.Error(), "auth is off") {
		t.Fatalf("got %v", err)
	}
}

func TestAuthConfigErrors(t *testing.T) {
	for _, k := range []bridge.APIKey{
		{Name: "", Hash: bridge.KeyDigest("x")},
		{Name: "x"},
		{Name: "x", Hash: "md5:abc"},
		{Name: "x", Env: "INTERLINGUA_TEST_UNSET_VAR"},
		{Name: "x", File: "/nonexistent/key"},
		{Name: "x", Hash: bridge.KeyDigest("x"), Env: "Y"},
	} {
		cfg := bridge.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Listen = "127.0.0.1:0"
		cfg.Auth.Keys = []bridge.APIKey{k}
		cfg.Defaults()
		if _, err := bridge.NewServer(t.Context(), cfg, discard()); err == nil || !strings.Contains(err.Error(), "auth.keys[0]") {
			t.Errorf("%+v: got %v", k, err)
		}
	}
	// Two keys of one name would be one tenant: refused.
	cfg := bridge.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Auth.Keys = []bridge.APIKey{{Name: "cli-1", Hash: bridge.KeyDigest("a")}, {Name: "cli-1", Hash: bridge.KeyDigest("z"), Admin: true}}
	cfg.Defaults()
	if _, err := bridge.NewServer(t.Context(), cfg, discard()); err == nil || !strings.Contains(err.Error(), `auth.keys[1].name "cli-1" is auth.keys[0]'s too`) {
		t.Errorf("duplicate names: got %v", err)
	}
}

// Threads belong to the key that created them: another key gets not-found
// on every path (agent commands, state and event stream, native observe,
// runs).
func TestTenantIsolation(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "a", Hash: bridge.KeyDigest("key-a")}, {Name: "b", Hash: bridge.KeyDigest("key-b")}}
	inst := bridgetest.Start(t, &cfg)
	start := `{"id":1,"method":"run.start","params":{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]}}}`
	if code, body := bridgetest.Call(t, inst.URL, "key-a", "POST", "/threads/t-a/commands", start); code != 200 || !strings.Contains(body, `"success"`) {
		t.Fatalf("owner's run.start: %d %s", code, body)
	}
	tests := []struct{ name, method, path, body, want string }{
		{"agent run.start", "POST", "/threads/t-a/commands", start, `unknown thread \"t-a\"`},
		{"native run on the thread", "POST", "/v1/runs", `{"target":"echo","threadId":"t-a"}`, `unknown thread`},
		{"native observe", "GET", "/v1/threads/t-a/events", "", `unknown thread`},
		{"agent event stream", "POST", "/threads/t-a/stream/events", `{"channels":["lifecycle"]}`, `unknown thread \"t-a\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := bridgetest.Call(t, inst.URL, "key-b", tt.method, tt.path, tt.body)
			if !strings.Contains(body, tt.want) {
				t.Fatalf("other key got %d %s, want %q", code, body, tt.want)
			}
		})
	}
	// Reading paths answer another key's thread as one nobody used: the
	// answer does not tell that the thread exists.
	for i, probe := range []struct{ name, method, path, body string }{
		{"agent state", "GET", "/threads/%s/state", ""},
		{"agent cancel", "POST", "/threads/%s/runs/run-x/cancel", ""},
		{"agent state.get", "POST", "/threads/%s/commands", `{"id":1,"method":"state.get","params":{}}`},
		{"agent input.respond", "POST", "/threads/%s/commands", `{"id":1,"method":"input.respond","params":{"interrupt_id":"i","response":1}}`},
		{"agent unknown command", "POST", "/threads/%s/commands", `{"id":1,"method":"bogus","params":{}}`},
	} {
		t.Run(probe.name, func(t *testing.T) {
			unused := fmt.Sprintf("t-unused-%d", i) // a new one each time: a probe claims it
			code, body := bridgetest.Call(t, inst.URL, "key-b", probe.method, fmt.Sprintf(probe.path, "t-a"), probe.body)
			wantCode, want := bridgetest.Call(t, inst.URL, "key-b", probe.method, fmt.Sprintf(probe.path, unused), probe.body)
			if code != wantCode || strings.ReplaceAll(body, "t-a", "T") != strings.ReplaceAll(want, unused, "T") {
				t.Fatalf("other key's thread: %d %s; a thread nobody used: %d %s", code, body, wantCode, want)
			}
		})
	}
	// The owner still can.
	if code, body := bridgetest.Call(t, inst.URL, "key-a", "POST", "/v1/runs", `{"target":"echo","threadId":"t-a"}`); code != 200 {
		t.Fatalf("owner's native run on its thread: %d %s", code, body)
	}
}

// A key that learns another key's run id cannot cancel the run: not
// through the run's thread (answered as a thread nobody used), nor through
// a thread of its own, whose cancel the bridge sends on that thread's
// command subject, which acts on that thread's runs only.
func TestTenantCannotCancelAnotherKeysRun(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "a", Hash: bridge.KeyDigest("key-a")}, {Name: "b", Hash: bridge.KeyDigest("key-b")}}
	inst := bridgetest.Start(t, &cfg)
	runID := regexp.MustCompile(`"run_id":"([^"]+)"`)
	start := func(key, thread, params string) string {
		t.Helper()
		code, body := bridgetest.Call(t, inst.URL, key, "POST", "/threads/"+thread+"/commands", `{"id":1,"method":"run.start","params":`+params+`}`)
		m := runID.FindStringSubmatch(body)
		if code != 200 || m == nil {
			t.Fatalf("run.start on %s: %d %s", thread, code, body)
		}
		return m[1]
	}
	hanging := start("key-a", "t-a", `{"assistant_id":"stream","input":{"messages":[{"role":"user","content":"go"}]},"config":{"configurable":{"hang":true}}}`)
	start("key-b", "t-b", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]}}`)
	waitFor(t, func() bool { return inst.Bridge().Running() == 1 }) // bob's ended

	code, body := bridgetest.Call(t, inst.URL, "key-b", "POST", "/threads/t-a/runs/"+hanging+"/cancel", "")
	wantCode, want := bridgetest.Call(t, inst.URL, "key-b", "POST", "/threads/t-unused/runs/"+hanging+"/cancel", "")
	if code != wantCode || body != want {
		t.Fatalf("cancel through the owner's thread: %d %s; through a thread nobody used: %d %s", code, body, wantCode, want)
	}
	bridgetest.Call(t, inst.URL, "key-b", "POST", "/threads/t-b/runs/"+hanging+"/cancel", "")
	time.Sleep(300 * time.Millisecond) // a cancel command would have been served by now
	if n := inst.Bridge().Running(); n != 1 {
		t.Fatalf("%d runs going on after the other key's cancels, want alice's 1", n)
	}
	if code, body := bridgetest.Call(t, inst.URL, "key-a", "POST", "/threads/t-a/runs/"+hanging+"/cancel", ""); code != http.StatusNoContent {
		t.Fatalf("the owner's cancel: %d %s", code, body)
	}
}

// A run started without a thread (Triton, XML, native without threadId;
// Glide's runs take the same path) runs on a thread claimed for its key when
// it is created: another key that learns the id cannot observe it, and its
// probe does not claim it, so the owner still can. Ids are 128 random bits.
func TestTenantThreadlessRuns(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "a", Hash: bridge.KeyDigest("key-a")}, {Name: "b", Hash: bridge.KeyDigest("key-b")}}
	inst := bridgetest.Start(t, &cfg)
	threads := make(chan string, 64)
	sub, err := inst.Fabric().Conn().Subscribe(inst.Fabric().Prefix()+".events.*.*", func(m *nats.Msg) {
		threads <- strings.Split(m.Subject, ".")[2]
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	// observe reads the first line of a thread's replay as key.
	observe := func(key, thread string) string {
		req, _ := http.NewRequest("GET", inst.URL+"/v1/threads/"+thread+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		resp, err := client.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		return line
	}
	for _, tt := range []struct{ name, path, body string }{
		{"native", "/v1/runs", `{"target":"echo","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`},
		{"triton", "/v2/models/echo/generate", `{"text_input":"hi"}`},
		{"xml", "/v1/xml/stream", `{"target":"echo","input":"hi"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for len(threads) > 0 {
				<-threads
			}
			if code, body := bridgetest.Call(t, inst.URL, "key-a", "POST", tt.path, tt.body); code != 200 {
				t.Fatalf("owner's run: %d %s", code, body)
			}
			var thread string
			select {
			case thread = <-threads:
			case <-time.After(10 * time.Second):
				t.Fatal("no event published")
			}
			if !regexp.MustCompile(`^run-[a-z2-7]{26}$`).MatchString(thread) {
				t.Fatalf("thread id %q is not run- and 128 random bits", thread)
			}
			if got := observe("key-b", thread); !strings.Contains(got, "unknown thread") {
				t.Fatalf("other key's replay of %s: %q, want unknown thread", thread, got)
			}
			if got := observe("key-a", thread); !strings.Contains(got, `"seq":"1"`) && !strings.Contains(got, `"seq":1`) {
				t.Fatalf("owner's replay after the other key's probe: %q, want the first event", got)
			}
		})
	}
}
