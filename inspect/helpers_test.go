package inspect_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/inspect"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// The API keys of the daemon under test: admin may use the inspector,
// user and other may not.
const (
	adminKey = "admin-key-0123456789"
	userKey  = "user-key-0123456789"
	otherKey = "other-key-0123456789"
)

// daemon is a daemon under test, in front of an agent-protocol upstream
// (the agent frontend of a second in-process bridge, serving the scripted
// demo targets).
type daemon struct {
	*bridgetest.Instance
	upstream *bridgetest.Instance
}

// options is a backend's options block.
func options(t *testing.T, text string) yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil {
		t.Fatal(err)
	}
	return *n.Content[0]
}

// startDaemon starts a daemon with the inspector on: target demo-agent goes
// to the upstream's agent frontend, echo to its Triton frontend (an HTTP
// backend built on internal/bodystream, whose wire is recorded),
// echo-glide to its Glide frontend (a shared WebSocket), stream to
// the scripted backend in process. withAuth
// configures the three keys.
func startDaemon(t *testing.T, insp inspect.Config, withAuth bool) *daemon {
	t.Helper()
	up := bridgetest.Start(t, nil)
	cfg := bridge.Config{
		Backends: map[string]bridge.BackendConfig{
			"up":       {Type: "agent", Options: options(t, "url: "+up.URL)},
			"tri":      {Type: "triton", Options: options(t, "url: "+up.URL)},
			"gl":       {Type: "glide", Options: options(t, "url: ws"+strings.TrimPrefix(up.URL, "http")+"/v1/language/echo/chatStream")},
			"eg":       {Type: "evergreen", Options: options(t, "url: "+up.URL)},
			"scripted": {Type: "scripted"},
		},
		Routes: []bridge.Route{{Target: "demo-agent", Backend: "up"}, {Target: "echo", Backend: "tri"}, {Target: "echo-glide", Backend: "gl"}, {Target: "echo-evergreen", Backend: "eg", Model: "echo"},
			{Target: "stream", Backend: "scripted"}},
	}
	insp.Enabled = true
	cfg.Inspector = insp
	if withAuth {
		cfg.Auth.Keys = []bridge.APIKey{
			{Name: "admin", Hash: bridge.KeyDigest(adminKey), Admin: true},
			{Name: "user", Hash: bridge.KeyDigest(userKey)},
			{Name: "other", Hash: bridge.KeyDigest(otherKey)},
		}
	}
	return &daemon{Instance: bridgetest.Start(t, &cfg), upstream: up}
}

// headerTransport adds headers to every request.
type headerTransport struct {
	next http.RoundTripper
	h    http.Header
}

func (a headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range a.h {
		r.Header[k] = v
	}
	return a.next.RoundTrip(r)
}

// runTriton runs target through the daemon's Triton frontend with
// Triton's client, as key, asking for capture when capture is set; it
// returns the events the client read.
func runTriton(t *testing.T, d *daemon, key, target string, capture bool, params map[string]any) []*canonical.Event {
	t.Helper()
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	if capture {
		h.Set(inspect.HeaderCapture, "1")
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl, err := protocols.Get("triton").Client(protocol.ClientConfig{Base: d.URL, Target: target,
		HTTPClient: &http.Client{Transport: headerTransport{tr, h}}, Headers: h})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := &canonical.Request{Target: target, Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "what is 6 times 7?")}}}
	for k, v := range params {
		if req.Parameters == nil {
			req.Parameters = map[string]*structpb.Value{}
		}
		req.Parameters[k] = canonical.Value(v)
	}
	s, err := cl.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []*canonical.Event
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
		if _, ok := canonical.TerminalOf(ev); ok {
			return out
		}
	}
}

// deltas returns the text deltas of events, in order.
func deltas(events []*canonical.Event) []string {
	var out []string
	for _, ev := range events {
		if d := ev.GetBlockDelta(); d != nil && d.GetText() != "" {
			out = append(out, d.GetText())
		}
	}
	return out
}

// apiGet calls the inspector's API as key and decodes the answer into v
// (when not nil); it returns the status.
func apiDo(t *testing.T, d *daemon, method, path, key, body string, v any) int {
	t.Helper()
	req, err := http.NewRequest(method, d.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

// inOrder reports the first of parts not found in text after the one
// before it ("" when all are, in order).
func inOrder(text string, parts []string) string {
	at := 0
	for _, p := range parts {
		i := strings.Index(text[at:], p)
		if i < 0 {
			return p
		}
		at += i + len(p)
	}
	return ""
}
