package evergreen

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

func TestConformanceScript(t *testing.T) {
	r := &cv1.Response{
		Items: []*cv1.Item{
			{Kind: &cv1.Item_Reasoning{Reasoning: &cv1.Text{Text: "r1 r2"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: "a b"}}},
			{Kind: &cv1.Item_ToolCall{ToolCall: &cv1.ToolCall{Id: "c", Name: "n", Arguments: &cv1.Text{Text: `{"x":1}`, ChunkBytes: 2}}}},
			{Kind: &cv1.Item_Error{Error: &cv1.Failure{Code: "unavailable"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: "c"}}},
			{Kind: &cv1.Item_Ref{Ref: &cv1.Ref{Mime: "image/png", Uri: "https://x/y"}}},
		},
		Failure: &cv1.Failure{Code: "data_loss", Message: "m"},
	}
	sc := conformanceScript(r, "")
	var got []string
	for _, p := range sc.Parts {
		s := p.Output + ":"
		for _, f := range p.Fragments {
			s += "|" + string(f)
		}
		if p.Ref != "" {
			s += "ref=" + p.Ref
		}
		got = append(got, s)
	}
	want := []string{"reasoning:|r1| r2", "response:|a| b", `tool_calls:|{"arguments":"{\"x\":1}","id":"c","name":"n","type":"tool_call"}`, "response:|c", "response:ref=https://x/y"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	if sc.Abort == nil || sc.Abort.Code() != 15 || sc.Abort.Message() != "m" {
		t.Fatalf("abort %v", sc.Abort)
	}
}
