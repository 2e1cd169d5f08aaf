package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	agentpeer "github.com/interlingua-dev/interlingua/conformance/peers/agent"
)

func startPeer(t testing.TB) (*agentpeer.Peer, string) {
	t.Helper()
	p, err := agentpeer.New()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(p.Handler())
	t.Cleanup(func() {
		p.Close() // ends the peer's streams first
		ts.Close()
	})
	return p, ts.URL
}

func newBackend(t testing.TB, url, transport string) *agent.Backend {
	t.Helper()
	b, err := agent.NewBackend(agent.BackendConfig{URL: url, Transport: transport, Timeout: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() }) // its kept event streams
	return b
}

func request(thread, target string) *canonical.Request {
	return &canonical.Request{RunId: "r-" + thread, ThreadId: thread, Target: target,
		Inputs: []*canonical.NamedNode{{Name: "messages", Node: canonical.TextNode("user", "Find the answer")}}}
}

// collect runs a request and checks the canonical invariants.
func collect(t testing.TB, b canonical.Backend, req *canonical.Request) []*canonical.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := b.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	events, err := canonical.Collect(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		e.ThreadId, e.RunId = req.GetThreadId(), req.GetRunId()
	}
	if err := canonical.Validate(events); err != nil {
		t.Fatalf("canonical stream: %v", err)
	}
	return events
}

// render is one compact proto3-JSON line per event (protojson's output is
// deliberately unstable in whitespace; Compact makes it byte-stable).
func render(t testing.TB, events []*canonical.Event) []byte {
	t.Helper()
	var out []byte
	for _, e := range events {
		e.ThreadId, e.RunId = "", ""
		b, err := protojson.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_ = json.Compact(&buf, b)
		out = append(append(out, buf.Bytes()...), '\n')
	}
	return out
}

func goldenFile(t *testing.T, path string, got []byte) {
	t.Helper()
	if *agent.Update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s", path, got)
	}
}

// TestBackendDecodesPeer: the backend over SSE and over WebSocket turns the
// peer's scripted runs (a subgraph, tools, an interrupt, a resume, a
// failure) into the same canonical events, kept as golden files.
func TestBackendDecodesPeer(t *testing.T) {
	_, url := startPeer(t)
	for _, script := range []string{"research-agent", "failing-agent"} {
		var first []byte
		for _, transport := range []string{"sse", "websocket"} {
			thread := script + "-" + transport
			events := collect(t, newBackend(t, url, transport), request(thread, script))
			got := render(t, events)
			if script == "research-agent" {
				resume := request(thread, script)
				resume.RunId += "-resume"
				resume.Resume = map[string]*structpb.Value{"int-1": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"approved": structpb.NewBoolValue(true)}})}
				got = append(append(got, "--- resume\n"...), render(t, collect(t, newBackend(t, url, transport), resume))...)
			}
			if first == nil {
				first = got
				goldenFile(t, filepath.Join("testdata", "backend", script+".events.golden"), got)
			} else if !bytes.Equal(first, got) {
				t.Errorf("%s: websocket and sse decode differently:\n%s\n---\n%s", script, first, got)
			}
		}
	}
}

// TestBackendRoundTrip: the peer's wire events, decoded by the backend and
// encoded by the frontend, come back as they were: methods, namespaces,
// nodes and data (the encoder adds nothing the peer did not send).
func TestBackendRoundTrip(t *testing.T) {
	peer, url := startPeer(t)
	events := collect(t, newBackend(t, url, "sse"), request("roundtrip", "research-agent"))
	enc := agent.NewEncoder(agent.EncoderConfig{})
	var got []map[string]any
	for _, e := range events {
		frames, err := agent.EncodeFrames(enc, e)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames {
			var m map[string]any
			_ = json.Unmarshal(f, &m)
			p := m["params"].(map[string]any)
			delete(p, "timestamp")
			got = append(got, map[string]any{"method": m["method"], "params": p})
		}
	}
	var want []map[string]any
	for _, raw := range peer.Script("research-agent") {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		want = append(want, m)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events back, %d sent", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("event %d:\n got %s\nwant %s", i, g, w)
		}
	}
}

func TestBackendCancelsUpstream(t *testing.T) {
	for _, transport := range []string{"sse", "websocket"} {
		peer, url := startPeer(t)
		b := newBackend(t, url, transport)
		st, err := b.Start(context.Background(), request("hang-"+transport, "hang-agent"))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := st.Recv()
		if err != nil || ev.GetLifecycle().GetStatus() != canonical.StatusRunning {
			t.Fatalf("first event %v %v", ev, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if c := peer.Cancels(); len(c) != 1 || !strings.HasPrefix(c[0], "peer-run-") {
			t.Fatalf("%s: upstream cancels %v", transport, c)
		}
	}
}

// TestBackendCancelledByContext: a run whose context ends ends cancelled.
func TestBackendCancelledByContext(t *testing.T) {
	_, url := startPeer(t)
	for _, transport := range []string{"sse", "websocket"} {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := newBackend(t, url, transport).Start(ctx, request("ctx-"+transport, "hang-agent"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		cancel()
		events, err := canonical.Collect(st)
		if err != nil || len(events) != 1 || events[0].GetLifecycle().GetStatus() != canonical.StatusCancelled {
			t.Fatalf("%s: after cancel: %v %v", transport, events, err)
		}
	}
}

func TestBackendErrors(t *testing.T) {
	_, url := startPeer(t)
	for _, transport := range []string{"sse", "websocket"} {
		_, err := newBackend(t, url, transport).Start(context.Background(), request("e-"+transport, "no-such-assistant"))
		if canonical.CodeOf(err) != canonical.CodeInvalidArgument || !strings.Contains(err.Error(), "no-such-assistant") {
			t.Errorf("%s: unknown assistant: %v", transport, err)
		}
		req := request("e2-"+transport, "research-agent")
		req.Resume = map[string]*structpb.Value{"int-9": structpb.NewBoolValue(true)}
		if _, err := newBackend(t, url, transport).Start(context.Background(), req); canonical.CodeOf(err) != canonical.CodeInvalidArgument {
			t.Errorf("%s: resume of a thread that is not interrupted: %v", transport, err)
		}
	}
	_, err := newBackend(t, "http://127.0.0.1:1", "sse").Start(context.Background(), request("down", "x"))
	if canonical.CodeOf(err) != canonical.CodeUnavailable {
		t.Errorf("server down: %v", err)
	}
	for _, c := range []agent.BackendConfig{{}, {URL: "ftp://x"}, {URL: "http://x", Transport: "grpc"}, {URL: "http://x", Timeout: -1}, {URL: "http://x", KeepStreamIdle: -1}} {
		if _, err := agent.NewBackend(c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// TestBridgeFrontsAgentServer: the whole path, client -> our frontend ->
// bridge -> agent backend -> peer: namespaces and the upstream's own state
// (values, checkpoints) come through, the interrupt is answered through our
// frontend, and the bridge does not synthesize state for an agent.
func TestBridgeFrontsAgentServer(t *testing.T) {
	_, url := startPeer(t)
	cfg := bridge.DefaultConfig()
	var opts = map[string]any{"url": url, "assistant_id": "research-agent", "transport": "websocket"}
	raw, _ := json.Marshal(opts)
	cfg.Backends["upstream"] = bridge.BackendConfig{Type: "agent", Options: yamlNode(t, raw)}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "remote", Backend: "upstream"})
	inst := bridgetest.Start(t, &cfg)
	s := &server{URL: inst.URL, hc: http.DefaultClient}
	st := s.openSSE(t, "fronted", `{"channels":["lifecycle","messages","values","checkpoints","input","tools"]}`, nil)
	s.runStart(t, "fronted", "remote", user("Find the answer"), nil)
	events := st.untilTerminal()
	var sawSubgraph, sawCheckpoint bool
	for _, e := range events {
		if len(e.Params.Namespace) == 1 && e.Params.Namespace[0] == "researcher:1" {
			sawSubgraph = true
		}
		if e.Method == "checkpoints" {
			sawCheckpoint = true
			if bytes.Contains(e.Params.Data, []byte(`"ckpt-`)) {
				t.Errorf("the bridge synthesized a checkpoint for an agent: %s", e.Params.Data)
			}
		}
	}
	last := events[len(events)-1]
	if !sawSubgraph || !sawCheckpoint || last.status() != "interrupted" {
		t.Fatalf("subgraph %v checkpoint %v end %s", sawSubgraph, sawCheckpoint, last.status())
	}
	res := s.command(t, "fronted", 2, "input.respond", map[string]any{"namespace": []string{}, "interrupt_id": "int-1", "response": map[string]any{"approved": true}})
	if res["type"] != "success" {
		t.Fatalf("input.respond: %v", res)
	}
	if end := st.untilTerminal(); end[len(end)-1].status() != "completed" {
		t.Fatalf("resumed run ends %s", end[len(end)-1].status())
	}
	state := s.command(t, "fronted", 3, "state.get", map[string]any{"namespace": []string{}})
	msgs := state["result"].(map[string]any)["values"].(map[string]any)["messages"].([]any)
	if len(msgs) != 3 || msgs[2].(map[string]any)["content"] != "The answer is 42." {
		t.Fatalf("state from the upstream agent: %v", msgs)
	}
}

func yamlNode(t testing.TB, jsonDoc []byte) yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(jsonDoc, &doc); err != nil {
		t.Fatal(err)
	}
	return *doc.Content[0]
}
