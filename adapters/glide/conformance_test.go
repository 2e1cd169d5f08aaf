package glide

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

func TestConformanceRouter(t *testing.T) {
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
	g := conformanceRouter("latch", r, "hi there")
	if len(g.Models) != 2 {
		t.Fatalf("%d models, want 2 (a fallback)", len(g.Models))
	}
	var texts []string
	for _, st := range g.Models[0].Steps {
		texts = append(texts, st.Text)
	}
	if d := cmp.Diff([]string{"hi", " there", " ", "😀", ""}, texts); d != "" {
		t.Fatalf("glide model 1 steps: %s", d)
	}
	if last := g.Models[1].Steps[len(g.Models[1].Steps)-1]; last.Unavailable != "gone" {
		t.Fatalf("glide model 2 ends with %+v, want the failure", last)
	}
}
