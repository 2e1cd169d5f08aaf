package xmlaction

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// conformanceProfile is what the protocol's wire keeps of a run, checked
// by the conformance runner (conformance/profile).
var conformanceProfile = &profile.Profile{
	Front: conformanceFront,
	FrontNotes: []profile.Degradation{
		profile.AgentAnswer,
		{"tool-call", "an <action> whose body is {\"name\":…,\"parameters\":ARGS}: the client reads that body as the arguments"},
		{"tool-activity", "tool_started and tool_output are not rendered; results and failures are <observation> elements"},
		{"multimodal", "data and ref blocks are not rendered"},
		{"error-nonterminal", "an <error code> element"},
		{"interrupt", "the input request is an <interrupt id> element with its payload as JSON; the run ends with <error status=\"interrupted\">"},
		profile.NoReplay,
		profile.HTTPConcurrency,
	},
}

// conformanceFront: what the XML client reads from our XML frontend.
func conformanceFront(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := profile.Clone(t)
	var blocks []*cv1.Block
	for _, b := range t.GetBlocks() {
		b = proto.Clone(b).(*cv1.Block)
		switch b.GetType() {
		case transcript.Data, transcript.Ref:
			continue
		case transcript.ToolCall:
			args := b.GetText()
			if args == "" {
				args = "{}"
			}
			b.Text = `{"name":` + conformanceJSONString(b.GetName()) + `,"parameters":` + args + `}`
		}
		blocks = append(blocks, b)
	}
	out.Blocks = blocks
	var tools []*cv1.Tool
	for _, tl := range t.GetTools() {
		switch tl.GetEvent() {
		case "finished", "failed":
			tools = append(tools, tl)
		}
	}
	out.Tools = tools
	return out
}

func conformanceJSONString(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r < 0x20:
			sb.WriteString(`\u00`)
			sb.WriteByte("0123456789abcdef"[r>>4])
			sb.WriteByte("0123456789abcdef"[r&15])
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}
