package openai

import (
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	openaipeer "github.com/interlingua-dev/interlingua/conformance/peers/openai"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// conformanceProfile is what the protocol's wire keeps of a run, checked
// by the conformance runner (conformance/profile).
var conformanceProfile = &profile.Profile{
	NewPeer: newConformancePeer,
	Front:   conformanceFront, Back: conformanceBack, UpstreamCancel: true,
	Upstream: "the reference Chat Completions peer (conformance/peers/openai), OpenAI's chunk shapes, include_usage asked",
	FrontNotes: []profile.Degradation{
		profile.AgentAnswer,
		{"text, reasoning, tool-call", "kept: delta.content, delta.reasoning_content and tool_calls (index, the case's id, name, the arguments as fragments); content is one string per choice, so text blocks with nothing carried between them read as one (likewise reasoning)"},
		{"tool-activity, multimodal, error-nonterminal", "dropped: a chunk has no member for the bridge's tool runs, data, refs or non-terminal errors; a call of a tool the request did not declare (the bridge runs it) is dropped too, not handed to the client to run"},
		{"interrupt", "the finish chunk and [DONE]: the run reads as completed"},
		{"error-before", "OpenAI's error object with the code's status and the canonical code's name as its code: every code survives; a run that fails before its message starts is refused the same way"},
		{"error-mid", "one data: error object (server_error, the canonical code's name as its code), no [DONE]: every code survives"},
		profile.NoReplay,
		profile.HTTPConcurrency,
		{"parameters", "the conformance client sends the scripted targets' fault-injection parameters as extra top-level members (pass_parameters), which the frontend keeps as parameters, as vLLM does"},
	},
	BackNotes: []profile.Degradation{
		{"text, reasoning, tool-call", "kept, in one choice's order as OpenAI streams it: reasoning, then content, then the tool calls (each one block); a rune cut across deltas is whole on this JSON wire (the peer re-cuts at rune boundaries)"},
		{"tool-activity, multimodal, error-nonterminal", "the peer's wire cannot carry them: dropped"},
		{"interrupt", "the peer finishes (stop): completed"},
		{"error-before", "the peer's error status with code null, read through the status table (errors.go: e.g. failed_precondition → 400 → invalid_argument, data_loss → 500 → internal)"},
		{"error-mid", "the peer's vLLM-style error object (code 500) and [DONE]: internal"},
	},
}

// conformanceStatusCode is the code the backend reads from the status the
// peer answers code with (statusOf, then canonical.CodeOfHTTPStatus).
func conformanceStatusCode(code string) string {
	c, _ := canonical.ParseCode(code)
	return canonical.CodeOfHTTPStatus(statusOf(c)).String()
}

// conformanceCarried reports whether b crosses a Chat Completions wire.
func conformanceCarried(b *cv1.Block) bool {
	switch b.GetType() {
	case transcript.Text, transcript.Reasoning, transcript.ToolCall:
		return true
	}
	return false
}

// conformanceFront: what a Chat Completions client (the openai backend)
// reads from our frontend: the carried blocks but the calls the bridge
// ran, adjacent text (or reasoning) joined; every code exact (the error object's code is the
// canonical name). The 200 goes out when the message starts, so a run
// that fails before any block is refused.
func conformanceFront(t *cv1.Transcript, c *cases.Case) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode()}
	started := false
	for _, b := range t.GetBlocks() {
		if b.GetType() != transcript.Error {
			started = true
		}
		if !conformanceCarried(b) || profile.Undeclared(c, b) {
			continue
		}
		if n := len(out.Blocks); n > 0 && b.GetType() != transcript.ToolCall && out.Blocks[n-1].GetType() == b.GetType() {
			out.Blocks[n-1].Text += b.GetText()
			continue
		}
		out.Blocks = append(out.Blocks, profile.Clone(&cv1.Transcript{Blocks: []*cv1.Block{b}}).Blocks[0])
	}
	switch out.Status {
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Completed, ""
	case transcript.Failed:
		if !started {
			out.Status = transcript.Refused
		}
	}
	return out
}

// conformanceBack: what the bridge reads from the reference peer playing
// the definition (conformanceModel): its reasoning, its text, then its
// calls (none when it hangs); an error status through the status table,
// an error after the first chunk internal.
func conformanceBack(t *cv1.Transcript, c *cases.Case) *cv1.Transcript {
	var reasoning, text strings.Builder
	var calls []*cv1.Block
	hang := c != nil && c.GetResponse().GetHang()
	for _, b := range t.GetBlocks() {
		switch b.GetType() {
		case transcript.Reasoning:
			reasoning.WriteString(b.GetText())
		case transcript.Text:
			text.WriteString(b.GetText())
		case transcript.ToolCall:
			if !hang {
				calls = append(calls, profile.Clone(&cv1.Transcript{Blocks: []*cv1.Block{b}}).Blocks[0])
			}
		}
	}
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode()}
	if reasoning.Len() > 0 {
		out.Blocks = append(out.Blocks, &cv1.Block{Type: transcript.Reasoning, Text: reasoning.String()})
	}
	if text.Len() > 0 {
		out.Blocks = append(out.Blocks, &cv1.Block{Type: transcript.Text, Text: text.String()})
	}
	out.Blocks = append(out.Blocks, calls...)
	switch out.Status {
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Completed, ""
	case transcript.Refused:
		out.Code = conformanceStatusCode(out.Code)
	case transcript.Failed:
		out.Code = canonical.CodeInternal.String()
	}
	return out
}

// newConformancePeer is the reference Chat Completions peer (conformance/
// peers/openai), a model per case, behind one backend.
func newConformancePeer(cs []*cases.Case) (*profile.Peer, error) {
	var models []openaipeer.Model
	for _, c := range cs {
		models = append(models, conformanceModel(c.GetName(), c.GetResponse(), c.GetRequest().GetPrompt()))
	}
	peer := openaipeer.New("", models...)
	return &profile.Peer{Handler: peer, Cancelled: peer.Cancelled(),
		Backend: func(addr, _ string) map[string]any { return map[string]any{"base_url": "http://" + addr + "/v1"} }}, nil
}

// conformanceModel is the reference peer's script for r: reasoning items
// as reasoning deltas, an echo as the peer's own (the prompt that reached
// it, a word per chunk), text items as content deltas, tool calls with
// their arguments' fragments, all re-cut at rune boundaries (JSON strings
// carry whole runes); tool activity, data, refs, message starts and
// non-terminal errors send nothing. A failure with no output is the error
// status of its code; after output, vLLM's error object once every chunk
// is out.
func conformanceModel(name string, r *cv1.Response, prompt string) openaipeer.Model {
	m := openaipeer.Model{Name: name, Echo: r.GetEcho(), Delay: time.Duration(r.GetDelayMs()) * time.Millisecond, Hang: r.GetHang()}
	for _, it := range r.GetItems() {
		switch k := it.GetKind().(type) {
		case *cv1.Item_Text:
			m.Content = append(m.Content, driver.WholeRunes(driver.Deltas(k.Text))...)
		case *cv1.Item_Reasoning:
			m.Reasoning = append(m.Reasoning, driver.WholeRunes(driver.Deltas(k.Reasoning))...)
		case *cv1.Item_ToolCall:
			tc := k.ToolCall
			m.Calls = append(m.Calls, openaipeer.Call{ID: tc.GetId(), Name: tc.GetName(), Args: driver.WholeRunes(driver.Deltas(tc.GetArguments()))})
		}
	}
	f := r.GetFailure()
	switch {
	case f == nil:
	case driver.RefusesBeforeFirstEvent(r):
		e := driver.FailureError(f)
		m.Status, m.ErrorMessage = statusOf(e.Code), e.Message
	default:
		m.ErrorAt = conformanceChunks(&m, prompt)
	}
	return m
}

// conformanceChunks counts the chunks the peer sends for m before its
// finish chunk: the role chunk, reasoning, the echo's words, content, and
// per call its head and its fragments.
func conformanceChunks(m *openaipeer.Model, prompt string) int {
	n := 1 + len(m.Reasoning) + len(m.Content)
	if m.Echo && prompt != "" {
		n += len(strings.SplitAfter(prompt, " "))
	}
	for _, c := range m.Calls {
		n += 1 + len(c.Args)
	}
	return n
}
