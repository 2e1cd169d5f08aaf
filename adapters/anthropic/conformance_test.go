package anthropic

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	anthropicpeer "github.com/interlingua-dev/interlingua/conformance/peers/anthropic"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// TestConformanceKeep: the frontend's projection keeps text and tool
// calls, drops the rest (reasoning too: the conformance client enables no
// thinking), reads an interrupt as completed, sends
// codes through the error-type tables (the stream's after a carried
// block, the status table before one).
func TestConformanceKeep(t *testing.T) {
	in := &cv1.Transcript{Status: transcript.Failed, Code: "permission_denied", Blocks: []*cv1.Block{
		{Type: transcript.Text, Text: "a"}, {Type: transcript.Reasoning, Text: "r"}, {Type: transcript.Data, Data: []byte{1}},
		{Type: transcript.Ref, Ref: "https://x/"}, {Type: transcript.Error, Text: "unavailable"},
		{Type: transcript.ToolCall, Id: "c", Name: "f", Text: "{}"},
	}, Tools: []*cv1.Tool{{Event: "started", Id: "c"}}, Interrupts: []string{"i"}}
	want := &cv1.Transcript{Status: transcript.Failed, Code: "internal", Blocks: []*cv1.Block{
		{Type: transcript.Text, Text: "a"}, {Type: transcript.ToolCall, Id: "c", Name: "f", Text: "{}"},
	}}
	if got := conformanceFront(in, nil); !proto.Equal(got, want) {
		t.Fatalf("front: %s", cmp.Diff(want, got, protocmp.Transform()))
	}
	text := []*cv1.Block{{Type: transcript.Text, Text: "a"}}
	dataOnly := []*cv1.Block{{Type: transcript.Data, Data: []byte{1}}}
	for _, c := range []struct {
		name                 string
		in, code             string
		blocks               []*cv1.Block
		status, wantCode     string
		backStatus, backCode string
	}{
		{"refused precondition", transcript.Refused, "failed_precondition", nil, transcript.Refused, "invalid_argument", transcript.Refused, "invalid_argument"},
		{"refused unavailable", transcript.Refused, "unavailable", nil, transcript.Refused, "unavailable", transcript.Refused, "unavailable"},
		{"refused data_loss", transcript.Refused, "data_loss", nil, transcript.Refused, "internal", transcript.Refused, "internal"},
		{"refused not_found", transcript.Refused, "not_found", nil, transcript.Refused, "not_found", transcript.Refused, "not_found"},
		{"failed mid unavailable", transcript.Failed, "unavailable", text, transcript.Failed, "unavailable", transcript.Failed, "unavailable"},
		{"failed mid rate", transcript.Failed, "resource_exhausted", text, transcript.Failed, "resource_exhausted", transcript.Failed, "resource_exhausted"},
		{"failed mid deadline", transcript.Failed, "deadline_exceeded", text, transcript.Failed, "deadline_exceeded", transcript.Failed, "deadline_exceeded"},
		{"failed mid not_found", transcript.Failed, "not_found", text, transcript.Failed, "internal", transcript.Failed, "not_found"},
		{"failed before a carried block", transcript.Failed, "permission_denied", dataOnly, transcript.Refused, "permission_denied", transcript.Failed, "permission_denied"},
		{"failed with nothing", transcript.Failed, "aborted", nil, transcript.Refused, "invalid_argument", transcript.Failed, "invalid_argument"},
		{"interrupted", transcript.Interrupted, "", text, transcript.Completed, "", transcript.Completed, ""},
		{"cancelled", transcript.Cancelled, "canceled", text, transcript.Cancelled, "canceled", transcript.Cancelled, "canceled"},
	} {
		tr := &cv1.Transcript{Status: c.in, Code: c.code, Blocks: c.blocks}
		if got := conformanceFront(tr, nil); got.GetStatus() != c.status || got.GetCode() != c.wantCode {
			t.Errorf("front %s: %s %s, want %s %s", c.name, got.GetStatus(), got.GetCode(), c.status, c.wantCode)
		}
		if got := conformanceBack(tr, nil); got.GetStatus() != c.backStatus || got.GetCode() != c.backCode {
			t.Errorf("back %s: %s %s, want %s %s", c.name, got.GetStatus(), got.GetCode(), c.backStatus, c.backCode)
		}
	}
}

// TestConformanceModel: one script in detail: echo and text join into one
// block, runes cut across deltas are re-cut whole, reasoning is a thinking
// block, what the wire cannot carry ends the open block, the failure is
// an error event after the blocks.
func TestConformanceModel(t *testing.T) {
	r := &cv1.Response{
		Echo: true,
		Items: []*cv1.Item{
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: " 😀", Cuts: []uint32{3}}}},
			{Kind: &cv1.Item_Reasoning{Reasoning: &cv1.Text{Text: "hm"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: "x"}}},
			{Kind: &cv1.Item_Error{Error: &cv1.Failure{Code: "unavailable"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: "y"}}},
			{Kind: &cv1.Item_ToolCall{ToolCall: &cv1.ToolCall{Id: "c1", Name: "f", Arguments: &cv1.Text{Text: `{"a":"ü"}`, Cuts: []uint32{7}}}}},
		},
		Failure: &cv1.Failure{Code: "unavailable", Message: "gone"},
		DelayMs: 3,
	}
	m := conformanceModel("x", r, "hi there")
	want := anthropicpeer.Model{
		Name: "x", Delay: 3 * time.Millisecond, ErrorEvent: errOverloaded, ErrorEventAt: 5, ErrorMessage: "gone",
		Blocks: []anthropicpeer.Block{
			{Type: "text", Deltas: []string{"hi", " there", " ", "😀"}},
			{Type: "thinking", Deltas: []string{"hm"}},
			{Type: "text", Deltas: []string{"x"}},
			{Type: "text", Deltas: []string{"y"}},
			{Type: "tool_use", ID: "c1", Name: "f", Deltas: []string{`{"a":"`, `ü"}`}},
		},
	}
	if d := cmp.Diff(want, m); d != "" {
		t.Fatalf("model: %s", d)
	}
	echo := conformanceModel("e", &cv1.Response{Echo: true, Failure: &cv1.Failure{Code: "internal"}}, "a b")
	if !echo.Echo || len(echo.Blocks) != 0 || echo.ErrorEvent != errAPI || echo.ErrorEventAt != 1 {
		t.Fatalf("a pure echo is the peer's, the error after its block: %+v", echo)
	}
	refused := conformanceModel("r", &cv1.Response{Failure: &cv1.Failure{Code: "permission_denied", Message: "no"}}, "p")
	if refused.Status != http.StatusForbidden || refused.ErrorType != errPermission || refused.ErrorEvent != "" {
		t.Fatalf("a failure with no output is refused with the code's status and type: %+v", refused)
	}
}

// TestConformanceModelsMatchBack: for every case of the suite, the blocks
// the peer's script streams (deltas joined; a pure echo the prompt's
// words) are the blocks the stated backend projection expects of the
// ideal transcript, every delta is whole UTF-8, and a failure is refused
// exactly when the projection says so.
func TestConformanceModelsMatchBack(t *testing.T) {
	cs, err := cases.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		prompt := c.GetRequest().GetPrompt()
		m := conformanceModel(c.GetName(), c.GetResponse(), prompt)
		var got []*cv1.Block
		if m.Echo {
			got = append(got, &cv1.Block{Type: transcript.Text, Text: prompt})
		}
		for _, b := range m.Blocks {
			for _, d := range b.Deltas {
				if !utf8.ValidString(d) {
					t.Errorf("%s: delta %q is not whole UTF-8", c.GetName(), d)
				}
			}
			typ := map[string]string{"text": transcript.Text, "thinking": transcript.Reasoning, "tool_use": transcript.ToolCall}[b.Type]
			blk := &cv1.Block{Type: typ, Text: strings.Join(b.Deltas, ""), Id: b.ID, Name: b.Name}
			if b.Type == "tool_use" {
				blk.Mime = "application/json" // the arguments' type on a canonical tool-call block
			}
			got = append(got, blk)
		}
		got = transcript.Normalize(&cv1.Transcript{Blocks: got}).GetBlocks()
		want := transcript.Normalize(conformanceBack(driver.Ideal(c.GetResponse(), prompt), c))
		if d := cmp.Diff(want.GetBlocks(), got, protocmp.Transform()); d != "" {
			t.Errorf("%s: blocks: %s", c.GetName(), d)
		}
		if refused := want.GetStatus() == transcript.Refused; refused != (m.Status != 0) {
			t.Errorf("%s: status %d, projection %s", c.GetName(), m.Status, want.GetStatus())
		}
		if failed := want.GetStatus() == transcript.Failed; failed != (m.ErrorEvent != "") {
			t.Errorf("%s: error event %q, projection %s", c.GetName(), m.ErrorEvent, want.GetStatus())
		}
	}
}
