package responses

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// TestConformanceKeep: the stated projection keeps text, reasoning and
// tool calls, drops the rest, reads an interrupt as completed and sends
// codes through the wire's tables.
func TestConformanceKeep(t *testing.T) {
	in := &cv1.Transcript{Status: transcript.Failed, Code: "data_loss", Blocks: []*cv1.Block{
		{Type: transcript.Text, Text: "a"}, {Type: transcript.Reasoning, Text: "r"}, {Type: "data", Data: []byte{1}},
		{Type: transcript.Error, Text: "unavailable"}, {Type: transcript.ToolCall, Id: "c", Name: "f", Text: "{}"},
	}, Tools: []*cv1.Tool{{Event: "started", Id: "c"}}}
	want := &cv1.Transcript{Status: transcript.Failed, Code: "internal", Blocks: []*cv1.Block{
		{Type: transcript.Text, Text: "a"}, {Type: transcript.Reasoning, Text: "r"}, {Type: transcript.ToolCall, Id: "c", Name: "f", Text: "{}"},
	}}
	if got := conformanceKeep(in, nil); !proto.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
	for _, c := range []struct{ in, code, status, want string }{
		{transcript.Refused, "failed_precondition", transcript.Refused, "invalid_argument"},
		{transcript.Refused, "unavailable", transcript.Refused, "unavailable"},
		{transcript.Failed, "permission_denied", transcript.Failed, "permission_denied"},
		{transcript.Interrupted, "", transcript.Completed, ""},
	} {
		got := conformanceKeep(&cv1.Transcript{Status: c.in, Code: c.code}, nil)
		if got.GetStatus() != c.status || got.GetCode() != c.want {
			t.Errorf("%s %s: %s %s, want %s %s", c.in, c.code, got.GetStatus(), got.GetCode(), c.status, c.want)
		}
	}
}
