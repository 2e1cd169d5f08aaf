package triton

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

func TestConformanceModel(t *testing.T) {
	r := &cv1.Response{
		Echo: true,
		Items: []*cv1.Item{
			{Kind: &cv1.Item_Reasoning{Reasoning: &cv1.Text{Text: "hidden"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: " 😀", Cuts: []uint32{3}}}},
			{Kind: &cv1.Item_Error{Error: &cv1.Failure{Code: "unavailable", Message: "m1 down"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: "again"}}},
		},
		Failure: &cv1.Failure{Code: "data_loss", Message: "gone"},
		DelayMs: 3,
	}
	m := conformanceModel("x", r, "hi there")
	if d := cmp.Diff([]string{"hi", " there", " \xF0\x9F", "\x98\x80", "again"}, m.Chunks); d != "" {
		t.Fatalf("triton chunks: %s", d)
	}
	if m.ErrorMessage != "gone" || m.ErrorAt != 5 || m.Delay != 3*time.Millisecond {
		t.Fatalf("triton model %+v", m)
	}
	empty := conformanceModel("e", &cv1.Response{}, "prompt")
	if empty.Chunks == nil || len(empty.Chunks) != 0 {
		t.Fatalf("an empty answer must not echo: chunks %#v", empty.Chunks)
	}
}
