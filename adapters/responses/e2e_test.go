package responses_test

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// End-to-end tests through a whole instance (embedded NATS, the thread
// store in its JetStream bucket, every frontend mounted). Ids and times
// are random or the clock's, and are normalized in goldens.

var (
	idPattern   = regexp.MustCompile(`\b(resp|msg|fc|fco|rs|call)_[a-z2-7]{24,32}(_[io]\d+)?\b`)
	timePattern = regexp.MustCompile(`"(created_at|completed_at)":\d+`)
)

func normalize(b []byte) []byte {
	b = idPattern.ReplaceAll(b, []byte("${1}_ID${2}"))
	return timePattern.ReplaceAll(b, []byte(`"$1":0`))
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

// jsonEqual compares two JSON documents semantically.
func jsonEqual(t *testing.T, what string, want, got []byte) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: got %s: %v", what, got, err)
	}
	if d := cmp.Diff(w, g); d != "" {
		t.Fatalf("%s differs (-want +got):\n%s", what, d)
	}
}

// aliceAndBob are two API keys, key-a (alice) and key-b (bob), for the
// tests of what one key may not reach of the other's.
func aliceAndBob() []bridge.APIKey {
	return []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a")}, {Name: "bob", Hash: bridge.KeyDigest("key-b")}}
}

type client struct {
	t    *testing.T
	base string
	key  string
}

// do sends a request and returns the status and body.
func (c client) do(method, path, body string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	hc := &http.Client{Timeout: 20 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, out
}

// create posts a request that must succeed and returns the response and
// its id.
func (c client) create(body string) ([]byte, string) {
	c.t.Helper()
	status, out := c.do("POST", "/v1/responses", body)
	if status != 200 {
		c.t.Fatalf("POST %s: %d %s", body, status, out)
	}
	return out, responseID(c.t, out)
}

var firstID = regexp.MustCompile(`"id":"(resp_[a-z2-7]+)"`)

// responseID is the id of the response a body (JSON or a stream) holds.
func responseID(t *testing.T, body []byte) string {
	t.Helper()
	m := firstID.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no response id in %s", body)
	}
	return string(m[1])
}

func (c client) want(method, path, body string, status int, wantBody string) {
	c.t.Helper()
	got, out := c.do(method, path, body)
	if got != status {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, status, out)
	}
	if wantBody != "" {
		jsonEqual(c.t, method+" "+path, normalize([]byte(wantBody)), normalize(out))
	}
}

// peerConfig is the default config plus target gpt-test routed to a
// responses backend calling the peer.
func peerConfig(t *testing.T, p *peer) bridge.Config {
	cfg := bridge.DefaultConfig()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("base_url: "+p.srv.URL+"/v1\n"), &n); err != nil {
		t.Fatal(err)
	}
	cfg.Backends["up"] = bridge.BackendConfig{Type: "responses", Options: *n.Content[0]}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "gpt-test", Backend: "up"}, bridge.Route{Target: "missing", Backend: "up"}, bridge.Route{Target: "slow", Backend: "up"}, bridge.Route{Target: "gated", Backend: "up"})
	return cfg
}

// TestE2EEcho: the scripted echo target, answered whole and streamed.
func TestE2EEcho(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := client{t: t, base: inst.URL}
	out, id := c.create(`{"model":"echo","input":"tell me a joke"}`)
	golden(t, "e2e/echo.json", out)
	_, got := c.do("GET", "/v1/responses/"+id, "")
	jsonEqual(t, "GET of the created response", out, got)

	status, sse := c.do("POST", "/v1/responses", `{"model":"echo","input":[{"role":"user","content":[{"type":"input_text","text":"stream it"}]}],"stream":true}`)
	if status != 200 {
		t.Fatalf("stream: %d %s", status, sse)
	}
	golden(t, "e2e/echo_stream.sse", sse)
}

// TestE2EErrors: refusals in OpenAI's error form.
func TestE2EErrors(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := client{t: t, base: inst.URL}
	c.want("POST", "/v1/responses", `{"model":"nope","input":"x"}`, 404,
		`{"error":{"message":"The model `+"`nope`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`)
	c.want("POST", "/v1/responses", `{"input":"x"}`, 400,
		`{"error":{"message":"Missing required parameter: 'model'.","type":"invalid_request_error","param":"model","code":null}}`)
	c.want("POST", "/v1/responses", `{"model":"echo","input":"x","background":true,"store":false}`, 400,
		`{"error":{"message":"Unsupported parameter: 'background' with 'store': false: a background response is polled from the stored response.","type":"invalid_request_error","param":"store","code":"unsupported_parameter"}}`)
	c.want("POST", "/v1/responses", `{"model":"echo","input":"x","tools":[{"type":"web_search"},{"type":"namespace","name":"ns","tools":[{"type":"function"}]}]}`, 400,
		`{"error":{"message":"Missing required parameter: 'tools[1].tools[0].name'.","type":"invalid_request_error","param":"tools[1].tools[0].name","code":null}}`)
	c.want("POST", "/v1/responses", `{"model":"echo","input":[{"type":"message","role":"robot","content":"x"}]}`, 400,
		`{"error":{"message":"Invalid value: 'robot'. Supported values are: 'user', 'assistant', 'system', and 'developer'.","type":"invalid_request_error","param":"input[0].role","code":null}}`)
	c.want("POST", "/v1/responses", `{"model":`, 400, "")
	c.want("GET", "/v1/responses/resp_nope", "", 404,
		`{"error":{"message":"Response with id 'resp_nope' not found.","type":"invalid_request_error","param":"response_id","code":null}}`)
	c.want("POST", "/v1/responses", `{"model":"echo","input":"x","previous_response_id":"resp_abc"}`, 400,
		`{"error":{"message":"Previous response with id 'resp_abc' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`)
	c.want("PUT", "/v1/responses", "", 405, "")
}

// TestE2EChain: previous_response_id continues the stored conversation
// through a responses backend (the peer sees the whole conversation), a
// function call round trip, store:false keeping nothing, DELETE.
func TestE2EChain(t *testing.T) {
	p := startPeer(t)
	cfg := peerConfig(t, p)
	inst := bridgetest.Start(t, &cfg)
	c := client{t: t, base: inst.URL}

	first, id1 := c.create(`{"model":"gpt-test","input":"hello","instructions":"be brief"}`)
	golden(t, "e2e/chain_first.json", first)
	second, id2 := c.create(`{"model":"gpt-test","input":"again","previous_response_id":"` + id1 + `","stream":true}`)
	golden(t, "e2e/chain_second.sse", second)
	reqs := p.requests()
	golden(t, "e2e/chain_upstream.json", bytes.Join(reqs, []byte("\n")))

	// A function call round trip, continued by the call's output.
	tools := `"tools":[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	call, id3 := c.create(`{"model":"gpt-test","input":"weather in Paris?",` + tools + `,"previous_response_id":"` + id2 + `"}`)
	golden(t, "e2e/tool_call.json", call)
	answer, _ := c.create(`{"model":"gpt-test",` + tools + `,"previous_response_id":"` + id3 + `","input":[{"type":"function_call_output","call_id":"call_A","output":"15C"}]}`)
	golden(t, "e2e/tool_answer.json", answer)
	reqs = p.requests()
	golden(t, "e2e/tool_upstream.json", reqs[len(reqs)-1])

	// store:false keeps nothing.
	_, id4 := c.create(`{"model":"gpt-test","input":"secret","store":false}`)
	c.want("GET", "/v1/responses/"+id4, "", 404, "")
	c.want("POST", "/v1/responses", `{"model":"gpt-test","input":"x","previous_response_id":"`+id4+`"}`, 400, "")

	// The upstream's refusal, in OpenAI's form.
	c.want("POST", "/v1/responses", `{"model":"missing","input":"x"}`, 404,
		`{"error":{"message":"The model `+"`missing`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":null}}`)

	// DELETE, then it is gone.
	c.want("DELETE", "/v1/responses/"+id1, "", 200, `{"id":"`+id1+`","object":"response","deleted":true}`)
	c.want("GET", "/v1/responses/"+id1, "", 404, "")
	c.want("DELETE", "/v1/responses/"+id1, "", 404, "")
	c.want("POST", "/v1/responses", `{"model":"gpt-test","input":"x","previous_response_id":"`+id1+`"}`, 400, "")
	// The response that continued it keeps its own conversation.
	c.want("POST", "/v1/responses", `{"model":"gpt-test","input":"still here?","previous_response_id":"`+id2+`"}`, 200, "")
}

// TestE2ETenancy: a response belongs to the API key that created it:
// another key gets 404 for it and 400 continuing it.
func TestE2ETenancy(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = aliceAndBob()
	inst := bridgetest.Start(t, &cfg)
	alice := client{t: t, base: inst.URL, key: "key-a"}
	bob := client{t: t, base: inst.URL, key: "key-b"}
	out, id := alice.create(`{"model":"echo","input":"mine"}`)
	bob.want("GET", "/v1/responses/"+id, "", 404, `{"error":{"message":"Response with id '`+id+`' not found.","type":"invalid_request_error","param":"response_id","code":null}}`)
	bob.want("DELETE", "/v1/responses/"+id, "", 404, "")
	bob.want("GET", "/v1/responses/"+id+"/input_items", "", 404, "")
	bob.want("POST", "/v1/responses", `{"model":"echo","input":"yours?","previous_response_id":"`+id+`"}`, 400,
		`{"error":{"message":"Previous response with id '`+id+`' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`)
	_, got := alice.do("GET", "/v1/responses/"+id, "")
	jsonEqual(t, "alice's GET", out, got)
	alice.want("POST", "/v1/responses", `{"model":"echo","input":"more","previous_response_id":"`+id+`"}`, 200, "")
	client{t: t, base: inst.URL}.want("GET", "/v1/responses/"+id, "", 401,
		`{"error":{"message":"missing or invalid API key (send Authorization: Bearer <key>, or x-api-key: <key>)","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
}

// TestE2ERestart: a stored response outlives the daemon: a new instance
// on the same data folder serves it and continues it.
func TestE2ERestart(t *testing.T) {
	dir := t.TempDir()
	var out []byte
	var id string
	t.Run("first", func(t *testing.T) {
		cfg := bridge.DefaultConfig()
		cfg.DataDir = dir
		inst := bridgetest.Start(t, &cfg)
		out, id = client{t: t, base: inst.URL}.create(`{"model":"echo","input":"remember me"}`)
	})
	t.Run("second", func(t *testing.T) {
		cfg := bridge.DefaultConfig()
		cfg.DataDir = dir
		inst := bridgetest.Start(t, &cfg)
		c := client{t: t, base: inst.URL}
		_, got := c.do("GET", "/v1/responses/"+id, "")
		jsonEqual(t, "GET after restart", out, got)
		c.want("POST", "/v1/responses", `{"model":"echo","input":"again","previous_response_id":"`+id+`"}`, 200, "")
	})
}

// TestE2EResume: GET ?stream=true replays a stored response's run from
// the bridge's replay log: byte for byte the stream the client was sent
// (ids and sequence numbers included), after starting_after when given.
func TestE2EResume(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := client{t: t, base: inst.URL}
	status, live := c.do("POST", "/v1/responses", `{"model":"echo","input":"resume me, please","stream":true}`)
	if status != 200 {
		t.Fatalf("%d %s", status, live)
	}
	id := responseID(t, live)
	_, again := c.do("GET", "/v1/responses/"+id+"?stream=true", "")
	if d := cmp.Diff(string(live), string(again)); d != "" {
		t.Fatalf("the replay differs from the live stream:\n%s", d)
	}
	_, tail := c.do("GET", "/v1/responses/"+id+"?stream=true&starting_after=5", "")
	blocks := strings.SplitAfter(string(live), "\n\n")
	if want := strings.Join(blocks[6:], ""); string(tail) != want {
		t.Fatalf("starting_after=5:\n%s\nwant\n%s", tail, want)
	}
	c.want("GET", "/v1/responses/"+id+"?stream=true&starting_after=x", "", 400, "")
	_, other := c.create(`{"model":"echo","input":"not streamed","store":false}`)
	c.want("GET", "/v1/responses/"+other+"?stream=true", "", 404, "")
}

// TestE2EBackground: a background response is answered queued at once and
// polled; cancel stops a running one (and is idempotent); the run
// survives its streaming client's leaving; cancel of a foreground
// response is refused.
func TestE2EBackground(t *testing.T) {
	p := startPeer(t)
	cfg := peerConfig(t, p)
	inst := bridgetest.Start(t, &cfg)
	c := client{t: t, base: inst.URL}

	queued, id := c.create(`{"model":"gpt-test","input":"later","background":true}`)
	if !strings.Contains(string(queued), `"status":"queued"`) || !strings.Contains(string(queued), `"background":true`) {
		t.Fatalf("not queued: %s", queued)
	}
	done := poll(t, c, id, "completed")
	if !strings.Contains(string(done), `"text":"echo: later"`) {
		t.Fatalf("background result %s", done)
	}

	_, slow := c.create(`{"model":"slow","input":"think","background":true}`)
	c.want("POST", "/v1/responses/"+slow+"/cancel", "", 200, "")
	cancelled := poll(t, c, slow, "cancelled")
	_, again := c.do("POST", "/v1/responses/"+slow+"/cancel", "")
	jsonEqual(t, "a second cancel", cancelled, again)
	// Cancelled as asked is no error: none in the response, no error
	// event in its stream (the SDKs throw on one).
	if !strings.Contains(string(cancelled), `"error":null`) {
		t.Fatalf("cancelled response %s, want error null", cancelled)
	}
	if _, replay := c.do("GET", "/v1/responses/"+slow+"?stream=true", ""); !strings.Contains(string(replay), "event: response.failed") ||
		strings.Contains(string(replay), "event: error") || !strings.Contains(string(replay), `"status":"cancelled"`) {
		t.Fatalf("cancelled response's stream %s", replay)
	}

	_, fg := c.create(`{"model":"echo","input":"now"}`)
	c.want("POST", "/v1/responses/"+fg+"/cancel", "", 400,
		`{"error":{"message":"Only responses created with background=true can be cancelled.","type":"invalid_request_error","param":null,"code":null}}`)

	// A streaming client that leaves does not end a background run.
	req, err := http.NewRequest("POST", inst.URL+"/v1/responses", strings.NewReader(`{"model":"gated","input":"wait","background":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	buf := make([]byte, 512)
	for !firstID.Match(first) {
		n, err := resp.Body.Read(buf)
		first = append(first, buf[:n]...)
		if err != nil {
			t.Fatalf("%v after %s", err, first)
		}
	}
	gid := responseID(t, first)
	resp.Body.Close() // leaves
	close(p.gate)
	if got := poll(t, c, gid, "completed"); !strings.Contains(string(got), `"text":"echo: wait"`) {
		t.Fatalf("the run did not go on: %s", got)
	}

	// Streamed in the background: queued first; replayed whole later.
	status, live := c.do("POST", "/v1/responses", `{"model":"gpt-test","input":"bg stream","background":true,"stream":true}`)
	if status != 200 || !strings.HasPrefix(string(live), "event: response.created\n") || !strings.Contains(string(live), "event: response.queued\n") {
		t.Fatalf("%d %s", status, live)
	}
	sid := responseID(t, live)
	_, replayed := c.do("GET", "/v1/responses/"+sid+"?stream=true", "")
	if d := cmp.Diff(string(live), string(replayed)); d != "" {
		t.Fatalf("replay of a background stream:\n%s", d)
	}
}

// poll GETs a response until it has status, and returns it.
func poll(t *testing.T, c client, id, status string) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		code, body := c.do("GET", "/v1/responses/"+id, "")
		if code == 200 && strings.Contains(string(body), `"status":"`+status+`"`) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %s: %d %s", id, status, code, body)
		}
		<-tick.C
	}
}

// TestE2EItemReference: an item_reference (what the AI SDK sends for an
// earlier turn's items when it stores responses, its default) is read
// from the caller's stored response its id names; another key's, or an
// id of no response, is not found.
func TestE2EItemReference(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = aliceAndBob()
	inst := bridgetest.Start(t, &cfg)
	alice := client{t: t, base: inst.URL, key: "key-a"}
	bob := client{t: t, base: inst.URL, key: "key-b"}
	out, _ := alice.create(`{"model":"echo","input":"first turn"}`)
	type item struct {
		ID      string     `json:"id"`
		Role    string     `json:"role"`
		Content json.Value `json:"content"`
	}
	var first struct {
		Output []item `json:"output"`
	}
	if err := json.Unmarshal(out, &first); err != nil || len(first.Output) != 1 {
		t.Fatalf("first response %s: %v", out, err)
	}
	ref := first.Output[0].ID
	_, id := alice.create(`{"model":"echo","input":[{"role":"user","content":"first turn"},{"type":"item_reference","id":"` + ref + `"},{"role":"user","content":"second turn"}]}`)
	_, items := alice.do("GET", "/v1/responses/"+id+"/input_items?order=asc", "")
	var got struct {
		Data []item `json:"data"`
	}
	if err := json.Unmarshal(items, &got); err != nil || len(got.Data) != 3 {
		t.Fatalf("input items %s: %v", items, err)
	}
	if got.Data[1].ID != ref || got.Data[1].Role != "assistant" || string(got.Data[1].Content) != string(first.Output[0].Content) {
		t.Fatalf("the referenced item stored as %s, want the first response's output %s", items, out)
	}
	for _, c := range []struct {
		who client
		id  string
	}{{bob, ref}, {alice, "msg_nope"}} {
		c.who.want("POST", "/v1/responses", `{"model":"echo","input":[{"type":"item_reference","id":"`+c.id+`"}]}`, 400,
			`{"error":{"message":"Item with id '`+c.id+`' not found.","type":"invalid_request_error","param":"input[0].id","code":null}}`)
	}
}
