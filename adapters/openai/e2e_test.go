package openai_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	peer "github.com/interlingua-dev/interlingua/conformance/peers/openai"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
)

// End-to-end tests through whole instances (embedded NATS, every
// frontend mounted). Ids and times are random or the clock's and are
// normalized in the goldens.

var (
	idRe      = regexp.MustCompile(`"(chatcmpl-|call_)[A-Za-z0-9]{24}"`)
	createdRe = regexp.MustCompile(`"created":\d+`)
)

func normalize(b []byte) []byte {
	b = idRe.ReplaceAll(b, []byte(`"${1}ID"`))
	return createdRe.ReplaceAll(b, []byte(`"created":0`))
}

// golden compares got (normalized) with testdata/<name>, rewriting it
// under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = normalize(got)
	file := filepath.Join("testdata", name)
	if flag.Lookup("update").Value.String() == "true" {
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

// exchange sends a request and returns a transcript: the status, the
// headers that matter, the body.
func exchange(t *testing.T, method, url, key, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString(method + " " + strings.TrimPrefix(url, "http://") + "\n" + body + "\n--\n")
	b.WriteString(resp.Status + "\n")
	var names []string
	for k := range resp.Header {
		switch k {
		case "Content-Type", "Cache-Control", "X-Accel-Buffering", "Www-Authenticate", "Allow":
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		b.WriteString(k + ": " + resp.Header.Get(k) + "\n")
	}
	b.WriteString("\n")
	b.Write(out)
	return b.Bytes()
}

// hostPort strips the instance's address so goldens do not hold it.
func hostPort(b []byte, base string) []byte {
	return bytes.ReplaceAll(b, []byte(strings.TrimPrefix(base, "http://")), []byte("HOST"))
}

// backendNode is a backend's options as a YAML node.
func backendNode(t *testing.T, text string) yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil {
		t.Fatal(err)
	}
	return *n.Content[0]
}

// TestE2EFrontend drives the frontend of a whole instance with raw HTTP
// against the scripted backend: every answer is a golden transcript.
func TestE2EFrontend(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a")}, {Name: "bob", Hash: bridge.KeyDigest("key-b"), Targets: []string{"echo"}}}
	inst := bridgetest.Start(t, &cfg)
	cc := inst.URL + "/v1/chat/completions"
	cases := []struct{ name, method, url, key, body string }{
		{"stream_usage", "POST", cc, "key-a", `{"model":"echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there world"}]}`},
		{"stream_plain", "POST", cc, "key-a", `{"model":"echo","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"parts "},{"type":"text","text":"joined"}]}]}`},
		{"nonstream", "POST", cc, "key-a", `{"model":"echo","messages":[{"role":"developer","content":"x"},{"role":"user","content":"hello there"}],"max_completion_tokens":16,"temperature":0.5,"stop":["\n"],"seed":7}`},
		{"agent_stream", "POST", cc, "key-a", `{"model":"demo-agent","stream":true,"messages":[{"role":"user","content":"what is 2+3?"}]}`},
		{"agent_nonstream", "POST", cc, "key-a", `{"model":"demo-agent","messages":[{"role":"user","content":"what is 2+3?"}]}`},
		{"fail_mid_stream", "POST", cc, "key-a", `{"model":"echo","stream":true,"fail_after":2,"fail_code":"unavailable","fail_message":"upstream went away","messages":[{"role":"user","content":"one two three four"}]}`},
		{"fail_mid_nonstream", "POST", cc, "key-a", `{"model":"echo","fail_after":2,"fail_code":"resource_exhausted","fail_message":"quota","messages":[{"role":"user","content":"one two three four"}]}`},
		{"fail_before_stream", "POST", cc, "key-a", `{"model":"echo","stream":true,"fail_after":0,"fail_code":"unavailable","fail_message":"no capacity","messages":[{"role":"user","content":"one two"}]}`},
		{"unknown_model", "POST", cc, "key-a", `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`},
		{"key_may_not_use", "POST", cc, "key-b", `{"model":"demo-agent","messages":[{"role":"user","content":"x"}]}`},
		{"bad_key", "POST", cc, "nope", `{"model":"echo","messages":[{"role":"user","content":"x"}]}`},
		{"no_messages", "POST", cc, "key-a", `{"model":"echo"}`},
		{"bad_type", "POST", cc, "key-a", `{"model":"echo","messages":[{"role":"user","content":"x"}],"temperature":"hot"}`},
		{"bad_part_type", "POST", cc, "key-a", `{"model":"echo","messages":[{"role":"user","content":[{"type":"video","text":"x"}]}]}`},
		{"bad_role", "POST", cc, "key-a", `{"model":"echo","messages":[{"role":"robot","content":"x"}]}`},
		{"n_2", "POST", cc, "key-a", `{"model":"echo","n":2,"messages":[{"role":"user","content":"x"}]}`},
		{"stream_options_without_stream", "POST", cc, "key-a", `{"model":"echo","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`},
		{"not_json", "POST", cc, "key-a", `{"model":`},
		{"get_completions", "GET", cc, "key-a", ``},
		{"models", "GET", inst.URL + "/v1/models", "key-a", ``},
		{"models_bob", "GET", inst.URL + "/v1/models", "key-b", ``},
		{"model", "GET", inst.URL + "/v1/models/echo", "key-a", ``},
		{"model_missing", "GET", inst.URL + "/v1/models/meta-llama/Llama-3", "key-a", ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			golden(t, filepath.Join("frontend", c.name+".txt"), hostPort(exchange(t, c.method, c.url, c.key, c.body), inst.URL))
		})
	}
}

// startPeer serves the reference upstream's models.
func startPeer(t *testing.T, models ...peer.Model) (*peer.Peer, *httptest.Server) {
	t.Helper()
	p := peer.New("peer-key", models...)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

// peerModels are the reference peer's variants (conformance/peers/openai).
var peerModels = []peer.Model{
	{Name: "openai-echo", Echo: true, Usage: peer.Usage{Prompt: 9, Completion: 3, Cached: 2}},
	{Name: "vllm-tools", Reasoning: []string{"Need ", "weather."}, ReasoningField: "reasoning", UsageOn: "finish",
		Calls: []peer.Call{{ID: "chatcmpl-tool-1", Name: "get_weather", Args: []string{`{"city":`, `"Paris"}`}}, {ID: "chatcmpl-tool-2", Name: "get_time", Args: []string{`{"tz":"CET"}`}}}},
	{Name: "fireworks-tools", RepeatToolIDs: true, Calls: []peer.Call{{ID: "call_F", Name: "get_weather", Args: []string{`{"city":`, `"Oslo"}`}}}},
	{Name: "ollama-tools", WholeCalls: true, Calls: []peer.Call{{ID: "call_O", Name: "get_weather", Args: []string{`{"city":"Rome"}`}}}},
	{Name: "llamacpp", NullContent: true, Content: []string{"ok"}, DoneNoBlank: true, UsageOn: "none"},
	{Name: "openrouter", Comments: true, Content: []string{"Hi", "!"}},
	{Name: "length", Content: []string{"trunc"}, Finish: "length", NoDone: true},
	{Name: "error-mid", Content: []string{"par", "tial"}, ErrorAt: 3},
	{Name: "reset", Content: []string{"a", "b", "c"}, Cut: true, CutAt: 3},
	{Name: "refused", Status: 400, ErrorMessage: "This model's maximum context length is 8 tokens.", IntCode: true},
	{Name: "overloaded", Status: 503, ErrorMessage: "Service Unavailable"},
}

// peerConfig routes each peer model through a backend of type openai.
func peerConfig(t *testing.T, url string) bridge.Config {
	cfg := bridge.DefaultConfig()
	t.Setenv("OPENAI_PEER_KEY", "peer-key")
	cfg.Backends["up"] = bridge.BackendConfig{Type: "openai", Options: backendNode(t,
		"base_url: "+url+"/v1\napi_key: {env: OPENAI_PEER_KEY}\nheaders: {X-Test: e2e}\npass_parameters: [top_k]\n")}
	for _, m := range peerModels {
		cfg.Routes = append(cfg.Routes, bridge.Route{Target: m.Name, Backend: "up"})
	}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "not-served", Backend: "up"})
	return cfg
}

// TestE2EBackendPeer: our frontend in front of a backend of type openai
// calling the reference peer, each variant streamed and not; the
// requests the peer received are goldens too.
func TestE2EBackendPeer(t *testing.T) {
	p, srv := startPeer(t, peerModels...)
	cfg := peerConfig(t, srv.URL)
	inst := bridgetest.Start(t, &cfg)
	cc := inst.URL + "/v1/chat/completions"
	for _, m := range append(peerModels, peer.Model{Name: "not-served"}) {
		for _, stream := range []bool{true, false} {
			tools := "" // the tools the peer's tool models call, declared as a client would
			if strings.HasSuffix(m.Name, "-tools") {
				tools = `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},{"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}]`
			}
			name, body := m.Name+"_nonstream", `{"model":"`+m.Name+`","messages":[{"role":"user","content":"echo these words"}],"top_k":5`+tools+`}`
			if stream {
				name, body = m.Name+"_stream", `{"model":"`+m.Name+`","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"echo these words"}]`+tools+`}`
			}
			t.Run(name, func(t *testing.T) {
				golden(t, filepath.Join("backend", name+".txt"), hostPort(exchange(t, "POST", cc, "", body), inst.URL))
			})
		}
	}
	reqs := p.Requests()
	if len(reqs) == 0 {
		t.Fatal("the peer got no request")
	}
	for i, r := range reqs[:2] { // openai-echo streamed, then not (with top_k)
		if r.Header.Get("X-Test") != "e2e" || r.Header.Get("Authorization") != "Bearer peer-key" {
			t.Fatalf("headers: %v", r.Header)
		}
		golden(t, filepath.Join("backend", fmt.Sprintf("upstream_request_%d.json", i)), append(r.Body, '\n'))
	}
}

// TestE2EOpenAIToOpenAI: an OpenAI client in front of a backend of type
// openai calling a second instance's OpenAI frontend, in front of the
// scripted backend: text, reasoning, tool calls, usage and a failure
// after the first chunk cross both hops as one hop shows them.
func TestE2EOpenAIToOpenAI(t *testing.T) {
	inner := bridgetest.Start(t, nil)
	cfg := bridge.DefaultConfig()
	cfg.Backends["inner"] = bridge.BackendConfig{Type: "openai", Options: backendNode(t, "base_url: "+inner.URL+"/v1\npass_parameters: [fail_after, fail_code, fail_message]\n")}
	cfg.Routes = []bridge.Route{{Target: "echo", Backend: "inner"}, {Target: "demo-agent", Backend: "inner"}}
	outer := bridgetest.Start(t, &cfg)
	for _, c := range []struct{ name, body string }{
		{"echo_stream", `{"model":"echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"across two hops"}]}`},
		{"agent_stream", `{"model":"demo-agent","stream":true,"messages":[{"role":"user","content":"what is 2+3?"}]}`},
		{"agent_nonstream", `{"model":"demo-agent","messages":[{"role":"user","content":"what is 2+3?"}]}`},
		{"fail_mid_stream", `{"model":"echo","stream":true,"fail_after":1,"fail_code":"data_loss","fail_message":"lost","messages":[{"role":"user","content":"one two three"}]}`},
		{"fail_before", `{"model":"echo","fail_after":0,"fail_code":"permission_denied","fail_message":"nope","messages":[{"role":"user","content":"one two three"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			golden(t, filepath.Join("twohops", c.name+".txt"), hostPort(exchange(t, "POST", outer.URL+"/v1/chat/completions", "", c.body), outer.URL))
		})
	}
}

// TestE2ECancel: a client that leaves mid-stream closes the upstream
// request (the peer sees its request's context end).
func TestE2ECancel(t *testing.T) {
	p, srv := startPeer(t, peer.Model{Name: "hang", Content: []string{"first"}, Hang: true})
	cfg := peerConfig(t, srv.URL)
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "hang", Backend: "up"})
	inst := bridgetest.Start(t, &cfg)
	req, err := http.NewRequest("POST", inst.URL+"/v1/chat/completions", strings.NewReader(`{"model":"hang","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf) // the first chunk: the stream is live
	if !bytes.Contains(buf[:n], []byte(`"role":"assistant"`)) {
		t.Fatalf("first read: %s", buf[:n])
	}
	resp.Body.Close()
	select {
	case name := <-p.Cancelled():
		if name != "hang" {
			t.Fatalf("cancelled %q", name)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream request was not closed")
	}
	// The run was the client's to cancel: counted cancelled, not as the
	// backend's failure (the backend reads its closed request as failed,
	// code canceled).
	inst.WaitNoRuns(t)
	got := bridgetest.MetricLines(t, inst.URL, "interlingua_runs_total{", `target="hang"`)
	if len(got) != 1 || !strings.Contains(got[0], `outcome="cancelled"`) && !strings.Contains(got[0], `outcome="abandoned"`) {
		t.Fatalf("the run's count: %q, want cancelled (or abandoned)", got)
	}
}

// TestE2ETriton: an OpenAI client in front of a Triton server (the
// reference Triton peer behind a backend of type triton), the issue's
// case: text streamed and not, a rune cut across responses, a model error
// after the first response.
func TestE2ETriton(t *testing.T) {
	tp := httptest.NewServer(tritonpeer.New(
		tritonpeer.Model{Name: "llama"},
		tritonpeer.Model{Name: "runes", Chunks: []string{"caf", "\xc3", "\xa9 ok"}},
		tritonpeer.Model{Name: "broken", Chunks: []string{"one ", "two "}, ErrorMessage: "CUDA out of memory", ErrorAt: 1},
	))
	t.Cleanup(tp.Close)
	cfg := bridge.DefaultConfig()
	cfg.Backends["triton"] = bridge.BackendConfig{Type: "triton", Options: backendNode(t, "url: "+tp.URL+"\n")}
	cfg.Routes = []bridge.Route{{Target: "llama", Backend: "triton"}, {Target: "runes", Backend: "triton"}, {Target: "broken", Backend: "triton"}}
	inst := bridgetest.Start(t, &cfg)
	for _, c := range []struct{ name, body string }{
		{"echo_stream", `{"model":"llama","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"triton says hi"}]}`},
		{"echo_nonstream", `{"model":"llama","max_tokens":8,"messages":[{"role":"user","content":"triton says hi"}]}`},
		{"runes_stream", `{"model":"runes","stream":true,"messages":[{"role":"user","content":"x"}]}`},
		{"broken_stream", `{"model":"broken","stream":true,"messages":[{"role":"user","content":"x"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			golden(t, filepath.Join("triton", c.name+".txt"), hostPort(exchange(t, "POST", inst.URL+"/v1/chat/completions", "", c.body), inst.URL))
		})
	}
}
