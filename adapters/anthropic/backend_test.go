package anthropic_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/adapters/anthropic"
	"github.com/interlingua-dev/interlingua/canonical"
	peer "github.com/interlingua-dev/interlingua/conformance/peers/anthropic"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/protocol"
)

func newPeerBackend(t *testing.T, models ...peer.Model) (*anthropic.Backend, *peer.Peer) {
	t.Helper()
	p := peer.New("", models...)
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		p.Close()
		srv.Close()
	})
	be, err := anthropic.NewBackend(anthropic.BackendConfig{BaseURL: srv.URL, Headers: map[string]string{"X-Extra": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be, p
}

// TestBackendRequest: the request the backend sends for a canonical
// request as the frontend decodes it (a tool turn with signed thinking, a
// tool result with an image and a tool_reference, which loads its
// deferred tool while the other deferred one stays out, a system message
// mid-conversation, which joins system; cache_control breakpoints,
// output_config and context_management as the client sent them), headers
// included.
func TestBackendRequest(t *testing.T) {
	be, p := newPeerBackend(t, peer.Model{Name: "m", Blocks: []peer.Block{{Type: "text", Deltas: []string{"ok"}}}})
	body := `{"model":"m","max_tokens":3000,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral","ttl":"1h"}}],"temperature":0.5,"top_k":3,"stop_sequences":["END"],
	"output_config":{"effort":"medium"},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"cache_control":{"type":"ephemeral"},
	"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},{"type":"web_search_20250305","name":"web_search"},
	{"name":"lookup","defer_loading":true,"input_schema":{"type":"object"}},{"name":"unloaded","defer_loading":true,"input_schema":{"type":"object"}}],
	"tool_choice":{"type":"any","disable_parallel_tool_use":true},"thinking":{"type":"enabled","budget_tokens":1024},"metadata":{"user_id":"u1"},
	"messages":[{"role":"user","content":"weather?"},
	{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"sig"},{"type":"thinking","thinking":"unsigned"},{"type":"redacted_thinking","data":"R"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
	{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},{"type":"tool_reference","tool_name":"lookup"}]},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]},
	{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"and tomorrow?","cache_control":{"type":"ephemeral"}}]}]}`
	req, cerr := anthropic.DecodeRequestForTest([]byte(body), "interleaved-thinking-2025-05-14")
	if cerr != nil {
		t.Fatal(cerr)
	}
	evs, err := start(t, be, req)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := canonical.TerminalOf(evs[len(evs)-1]); st != canonical.StatusCompleted {
		t.Fatalf("run did not complete: %v", evs[len(evs)-1])
	}
	got := p.Requests()[0]
	var v any
	if err := json.Unmarshal(got.Body, &v); err != nil {
		t.Fatal(err)
	}
	pretty, _ := json.Marshal(v, json.Deterministic(true))
	tr := "anthropic-version: " + got.Header.Get("Anthropic-Version") + "\nanthropic-beta: " + got.Header.Get("Anthropic-Beta") +
		"\nx-extra: " + got.Header.Get("X-Extra") + "\naccept: " + got.Header.Get("Accept") + "\n\n" + string(pretty) + "\n"
	golden(t, "backend/request.golden", []byte(tr))
}

// start runs req on be and collects its events.
func start(t *testing.T, be canonical.Backend, req *canonical.Request) ([]*canonical.Event, error) {
	t.Helper()
	s, err := be.Start(context.Background(), req)
	if err != nil {
		return nil, err
	}
	return canonical.Collect(s)
}

func textRequest(model string) *canonical.Request {
	return &canonical.Request{Target: model, Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "hi there")}}}
}

// TestBackendOutcomes: how the upstream's ends reach the run.
func TestBackendOutcomes(t *testing.T) {
	be, _ := newPeerBackend(t,
		peer.Model{Name: "cut", Blocks: []peer.Block{{Type: "text", Deltas: []string{"a", "b"}}}, Cut: true},
		peer.Model{Name: "refused", Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"},
		peer.Model{Name: "limited", Status: 429, ErrorType: "rate_limit_error", ErrorMessage: "slow down"},
		peer.Model{Name: "echo", Echo: true},
	)
	for _, tc := range []struct {
		model  string
		status canonical.RunStatus
		code   canonical.Code
		msg    string
	}{
		{"cut", canonical.StatusFailed, canonical.CodeUnavailable, "anthropic backend: the upstream's response broke off"},
		{"refused", 0, canonical.CodeUnavailable, "Overloaded"},
		{"limited", 0, canonical.CodeResourceExhausted, "slow down"},
		{"missing", 0, canonical.CodeNotFound, "model: missing"},
		{"echo", canonical.StatusCompleted, canonical.CodeOK, ""},
	} {
		t.Run(tc.model, func(t *testing.T) {
			evs, err := start(t, be, textRequest(tc.model))
			if tc.status == 0 {
				var ce *canonical.Error
				if !errors.As(err, &ce) || ce.Code != tc.code || ce.Message != tc.msg || !ce.Wire {
					t.Fatalf("Start: %v, want wire %s %q", err, tc.code, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := canonical.Validate(evs); err != nil {
				t.Fatal(err)
			}
			lc := evs[len(evs)-1].GetLifecycle()
			if lc.GetStatus() != tc.status || canonical.Code(lc.GetError().GetCode()) != tc.code || lc.GetError().GetMessage() != tc.msg {
				t.Fatalf("ended %v, want %v %s %q", lc, tc.status, tc.code, tc.msg)
			}
		})
	}
}

// TestBackendConfig: bad options are named.
func TestBackendConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  anthropic.BackendConfig
		want string
	}{
		{anthropic.BackendConfig{}, "base_url: required (the server's root, as the Anthropic SDKs take it)"},
		{anthropic.BackendConfig{BaseURL: "https://api.anthropic.com/v1"}, `base_url: "https://api.anthropic.com/v1" ends in /v1: give the server's root, as the Anthropic SDKs take it`},
		{anthropic.BackendConfig{BaseURL: "http://x", Auth: "basic"}, `auth: "basic" is not x-api-key or bearer`},
		{anthropic.BackendConfig{BaseURL: "http://x", APIKey: protocol.SecretRef{Env: "ANTHROPIC_TEST_UNSET_VARIABLE"}}, "api_key: environment variable ANTHROPIC_TEST_UNSET_VARIABLE is empty or unset"},
	} {
		_, err := anthropic.NewBackend(tc.cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestAuthHeaders: the bridge takes our key from x-api-key and from
// Authorization: Bearer (bridge/auth.go presentedKey); without one the
// refusal is in Anthropic's form.
func TestAuthHeaders(t *testing.T) {
	inst, _ := startWithPeer(t, "k1")
	body := `{"model":"echo","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name   string
		header []string
		status string
	}{
		{"x-api-key", []string{"X-Api-Key", "k1"}, "200 OK"},
		{"bearer", []string{"Authorization", "Bearer k1"}, "200 OK"},
		{"wrong", []string{"X-Api-Key", "k2"}, "401 Unauthorized"},
		{"none", nil, "401 Unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := post(t, inst.URL, "/v1/messages", body, tc.header...)
			if !strings.Contains(string(tr), "< "+tc.status+"\n") {
				t.Fatalf("want %s:\n%s", tc.status, tr)
			}
			if tc.name == "none" {
				golden(t, "frontend/unauthenticated.golden", tr)
			}
		})
	}
}

// TestPing: a run that waits longer than the ping interval gets
// message_start and a ping before its first block.
func TestPing(t *testing.T) {
	inst, _ := startWithPeer(t, "")
	mux := http.NewServeMux()
	anthropic.NewFrontend(anthropic.FrontendConfig{Runner: inst.Bridge(), PingInterval: 20e6}).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(
		`{"model":"echo","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"a b"}],"delay_ms":120}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	s := string(data)
	ping, block := strings.Index(s, "event: ping\ndata: {\"type\":\"ping\"}\n\n"), strings.Index(s, "event: content_block_start")
	if !strings.HasPrefix(s, "event: message_start\n") || ping < 0 || block < ping || !strings.HasSuffix(s, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Fatalf("no ping before the first block:\n%s", s)
	}
}
