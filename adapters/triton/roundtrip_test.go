package triton_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
)

// peerModels is the reference peer's script for the round-trip tests.
var peerModels = []tritonpeer.Model{
	{Name: "ensemble", RequireMaxTokens: true, Extra: false},
	{Name: "chunks", Chunks: []string{"Tab\there", ", \"quoted\"", " caf\u00e9 😀", "\n", " \\ done"}, WriteSize: 5},
	{Name: "failing", Chunks: []string{"one", " two", " three"}, ErrorMessage: "An Error Occurred", ErrorAt: 2},
	{Name: "failing-first", ErrorMessage: "model crashed", ErrorAt: 0},
	{Name: "split", Chunks: []string{"smile \xf0\x9f", "\x98\x80 ok"}, WriteSize: 3},
	{Name: "cumulative", Chunks: []string{"The", " cat", " sat"}, Cumulative: true},
	{Name: "deltas", Chunks: []string{"The", " cat", " sat"}},
	{Name: "hang", Chunks: []string{"first", " second"}, Hang: true},
}

// options builds a backend's YAML options node.
func options(t *testing.T, text string) yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	return *doc.Content[0]
}

// startChain starts the reference peer and an instance whose targets named
// like the peer's models go to a triton backend calling it: client ->
// Triton frontend -> bridge -> Triton backend -> peer.
func startChain(t *testing.T) (*tritonpeer.Server, string, *bridgetest.Instance) {
	t.Helper()
	peer, url := startPeer(t, peerModels...)
	cfg := bridge.DefaultConfig()
	cfg.Backends["triton"] = bridge.BackendConfig{Type: "triton", Options: options(t, "url: "+url+"\ntimeout: 1m\n")}
	cfg.Backends["triton-cumulative"] = bridge.BackendConfig{Type: "triton", Options: options(t, "url: "+url+"\ntext_output: cumulative\nmetadata: off\n")}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "cumulative", Backend: "triton-cumulative"})
	for _, m := range peerModels {
		if m.Name != "cumulative" {
			cfg.Routes = append(cfg.Routes, bridge.Route{Target: m.Name, Backend: "triton"})
		}
	}
	return peer, url, bridgetest.Start(t, &cfg)
}

type reply struct {
	status int
	ctype  string
	body   string
}

func postTo(t *testing.T, url, body string) reply {
	t.Helper()
	resp, err := client.Post(url, "", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// TestRoundTrip: a client of the bridge's Triton frontend, served through
// the Triton backend by the reference peer, reads exactly what it reads
// from the peer directly.
func TestRoundTrip(t *testing.T) {
	_, peerURL, inst := startChain(t)
	for _, tc := range []struct{ name, path, body string }{
		{"stream", "/v2/models/ensemble/generate_stream", `{"text_input":"hello brave new world","max_tokens":8,"stream":true}`},
		{"stream with id", "/v2/models/ensemble/generate_stream", `{"id":"req-1","text_input":"hello world","max_tokens":8,"stream":true}`},
		{"stream genai-perf", "/v2/models/ensemble/generate_stream", `{"text_input":["the quick brown fox"],"max_tokens":8,"stream":true}`},
		{"one event", "/v2/models/ensemble/generate_stream", `{"text_input":"hello world","max_tokens":8,"exclude_input_in_output":true}`},
		{"generate", "/v2/models/ensemble/generate", `{"id":"7","text_input":"hello world","max_tokens":8,"exclude_input_in_output":true}`},
		{"documented body", "/v2/models/ensemble/generate", `{"text_input":"client input","parameters":{"stream":false,"temperature":0,"max_tokens":4,"exclude_input_in_output":true}}`},
		{"escapes", "/v2/models/chunks/generate_stream", `{"text_input":"x","stream":true}`},
		{"escapes aggregate", "/v2/models/chunks/generate", `{"text_input":"x","exclude_input_in_output":true}`},
		{"error mid-stream", "/v2/models/failing/generate_stream", `{"text_input":"x","stream":true}`},
		{"unknown model", "/v2/models/nope/generate_stream", `{"text_input":"x","stream":true}`},
		{"unknown version", "/v2/models/ensemble/versions/3/generate", `{"text_input":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct := postTo(t, peerURL+tc.path, tc.body)
			bridged := postTo(t, inst.URL+tc.path, tc.body)
			if direct != bridged {
				t.Errorf("peer directly:\n%d %s\n%s\nthrough the bridge:\n%d %s\n%s", direct.status, direct.ctype, direct.body, bridged.status, bridged.ctype, bridged.body)
			}
			if direct.status == 200 && direct.body == "" {
				t.Error("empty reply: the case tests nothing")
			}
		})
	}
}

// TestRoundTripDifferences: where the chain differs from the peer by the
// reference's choices.
func TestRoundTripDifferences(t *testing.T) {
	_, peerURL, inst := startChain(t)

	// A first response that fails: Triton sends its status with an SSE body;
	// the bridge's frontend sends the status with Triton's JSON error.
	got := postTo(t, inst.URL+"/v2/models/failing-first/generate_stream", `{"text_input":"x","stream":true}`)
	want := reply{500, "application/json", `{"error":"model crashed"}`}
	if direct := postTo(t, peerURL+"/v2/models/failing-first/generate_stream", `{"text_input":"x","stream":true}`); direct.status != 500 || direct.body != "data: {\"error\":\"model crashed\"}\n\n" {
		t.Errorf("peer: %+v", direct)
	}
	if got != want {
		t.Errorf("bridge: %+v, want %+v", got, want)
	}

	// A rune split across upstream responses: the peer sends the broken
	// halves, the bridge never does.
	got = postTo(t, inst.URL+"/v2/models/split/generate_stream", `{"text_input":"x","stream":true}`)
	want = reply{200, "text/event-stream; charset=utf-8",
		"data: {\"model_name\":\"split\",\"model_version\":\"1\",\"text_output\":\"smile \"}\n\n" +
			"data: {\"model_name\":\"split\",\"model_version\":\"1\",\"text_output\":\"😀 ok\"}\n\n"}
	if got != want {
		t.Errorf("split rune: %+v", got)
	}

	// A cumulative upstream reads as the same model sending deltas.
	deltas := postTo(t, peerURL+"/v2/models/deltas/generate_stream", `{"text_input":"x","stream":true}`)
	got = postTo(t, inst.URL+"/v2/models/cumulative/generate_stream", `{"text_input":"x","stream":true}`)
	if strings.ReplaceAll(deltas.body, `"deltas"`, `"cumulative"`) != got.body || got.status != 200 {
		t.Errorf("cumulative through the bridge:\n%s\nwant as deltas:\n%s", got.body, deltas.body)
	}
}

// TestClientDisconnectMidStream: a client that leaves after the first
// responses cancels the run, and the Triton backend closes its upstream
// request (the peer sees it go). goleak then checks no goroutine is left.
func TestClientDisconnectMidStream(t *testing.T) {
	peer, _, inst := startChain(t)
	sub := watchRuns(t, inst)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, inst.URL+"/v2/models/hang/generate_stream", strings.NewReader(`{"text_input":"x","max_tokens":4,"stream":true}`))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var seen bytes.Buffer
	transcriptSoFar := func() []byte {
		return append([]byte("POST /v2/models/hang/generate_stream\n\nHTTP "+resp.Status+"\nContent-Type: "+resp.Header.Get("Content-Type")+"\n\n"), seen.Bytes()...)
	}
	r := bufio.NewReader(resp.Body)
	for events := 0; events < 2; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", seen.String(), err)
		}
		seen.WriteString(line)
		if line == "\n" {
			events++
		}
	}
	cancel() // the client leaves mid-stream
	resp.Body.Close()
	golden(t, "frontend", "disconnect_mid_stream", transcriptSoFar())
	select {
	case name := <-peer.Cancelled():
		if name != "hang" {
			t.Fatalf("peer saw %q leave", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not closed")
	}
	if st, _ := waitTerminal(t, sub); st != canonical.StatusCancelled {
		t.Fatalf("run ended %v, want cancelled", st)
	}
}
