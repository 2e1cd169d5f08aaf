package runner

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// The agent backend over its WebSocket transport: the agent column again,
// for two frontends (the SSE transport runs in the whole matrix).
func TestAgentBackendWebSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := Options{Mode: ModeBridge, Frontends: []string{"native", "agent"}, Backends: []string{"agent"}, backendOptions: map[string]map[string]any{"agent": {"transport": "websocket"}}}
	if raceEnabled {
		opts.Skip = heavyCases
	}
	rep, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	failures(t, rep)
	if rep.Count(Pass) < 28 {
		t.Fatalf("only %d cases passed", rep.Count(Pass))
	}
}

// The agent backend's stated degradations the suite's cases do not reach,
// checked through the whole stack: each synthetic case's expected
// transcript is derived with the agent profile's Back, so a backend that loses more (or
// less) fails it.
func TestAgentBackDegradations(t *testing.T) {
	text := func(s string) *cv1.Item { return &cv1.Item{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: s}}} }
	tool := &cv1.Item{Kind: &cv1.Item_Tool{Tool: &cv1.ToolActivity{Id: "c1", Name: "n", Result: structpb.NewNumberValue(1)}}}
	fail := func(code, msg string) *cv1.Failure { return &cv1.Failure{Code: code, Message: msg} }
	mk := func(name string, r *cv1.Response) *cases.Case {
		return &cases.Case{Folder: cases.Common, Case: &cv1.Case{Name: name, Response: r, Request: &cv1.ClientRequest{Prompt: "p"}}}
	}
	cs := []*cases.Case{
		mk("fail-between-messages", &cv1.Response{Items: []*cv1.Item{text("a"), tool}, Failure: fail("data_loss", "gone")}),
		mk("error-between-messages", &cv1.Response{Items: []*cv1.Item{tool, {Kind: &cv1.Item_Error{Error: fail("unavailable", "m1")}}, text("b")}}),
		mk("error-then-same-failure", &cv1.Response{Items: []*cv1.Item{tool, {Kind: &cv1.Item_Error{Error: fail("resource_exhausted", "x")}}}, Failure: fail("internal", "x")}),
		mk("tool-call-without-arguments", &cv1.Response{Items: []*cv1.Item{{Kind: &cv1.Item_ToolCall{ToolCall: &cv1.ToolCall{Id: "c", Name: "n"}}}}}),
		mk("refused-invalid", &cv1.Response{Failure: fail("failed_precondition", "no")}),
		mk("refused-permission", &cv1.Response{Failure: fail("unauthenticated", "who")}),
		mk("refused-unimplemented", &cv1.Response{Failure: fail("unimplemented", "later")}),
	}
	wantCodes := map[string]string{"fail-between-messages": "unknown", "error-then-same-failure": "resource_exhausted",
		"refused-invalid": "invalid_argument", "refused-permission": "permission_denied", "refused-unimplemented": "unimplemented"}
	for _, c := range cs {
		want := profiles["agent"].Back(driver.Ideal(c.GetResponse(), "p"), c)
		if w, ok := wantCodes[c.GetName()]; ok && want.GetCode() != w {
			t.Errorf("%s: the agent profile's Back says code %q, want %q", c.GetName(), want.GetCode(), w)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Mode: ModeBridge, Frontends: []string{"native", "agent"}, Backends: []string{"agent"}, Cases: cs})
	if err != nil {
		t.Fatal(err)
	}
	failures(t, rep)
	if rep.Count(Pass) != 2*len(cs) {
		t.Fatalf("%d of %d passed", rep.Count(Pass), 2*len(cs))
	}
}
