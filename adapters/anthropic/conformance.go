package anthropic

import (
	"slices"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	anthropicpeer "github.com/interlingua-dev/interlingua/conformance/peers/anthropic"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// conformanceProfile is what the protocol's wire keeps of a run, checked
// by the conformance runner (conformance/profile).
var conformanceProfile = &profile.Profile{
	NewPeer: newConformancePeer,
	Front:   conformanceFront, Back: conformanceBack, UpstreamCancel: true, NoParameters: true,
	Upstream: "the reference Anthropic Messages peer (conformance/peers/anthropic)",
	FrontNotes: []profile.Degradation{
		profile.AgentAnswer,
		{"text, reasoning, tool-call", "kept: text and tool_use blocks with their ids, the arguments as input_json_delta fragments; a call of a tool the request did not declare (the bridge runs it) is a server_tool_use, which the client (our backend) reads as a call too; reasoning is a thinking block (unsigned: no signature is invented) only when the request enables thinking, which the conformance client does not: dropped"},
		{"tool-activity, multimodal, error-nonterminal", "dropped: an assistant Message has no block for the bridge's tool runs, data, refs or non-terminal errors"},
		{"interrupt", "the Message ends with end_turn: the run reads as completed"},
		{"error-before", "Anthropic's error object with the status of its code (errors.go), read back through the error type (e.g. failed_precondition → invalid_request_error → invalid_argument, data_loss → api_error → internal); a run that fails before its first carried block (and before a ping, sent after 10 s without an event) is refused the same way"},
		{"error-mid", "an error event, no message_stop: unavailable (overloaded_error), resource_exhausted (rate_limit_error) and deadline_exceeded (timeout_error) survive, the rest is api_error → internal"},
		profile.NoReplay,
		profile.HTTPConcurrency,
		{"parameters", "the client sends a Messages request's own members only (max_tokens, temperature, top_p, top_k, stop_sequences, tool_choice, metadata): cases that need other parameters do not apply (server mode: the scripted faults cannot be asked for)"},
	},
	BackNotes: []profile.Degradation{
		{"text, reasoning, tool-call", "kept: text, thinking, tool_use and server_tool_use blocks (the latter marked anthropic.server_tool); a rune cut across deltas is whole on this JSON wire (the peer re-cuts at rune boundaries)"},
		{"tool-activity, multimodal, error-nonterminal", "the peer's wire cannot carry them: dropped"},
		{"interrupt", "the peer completes (end_turn)"},
		{"error-before", "the peer's error status and type (the type of the code's row in errors.go), read back through the type"},
		{"error-mid", "the peer's error event with the same type, read back through it"},
	},
}

// conformanceCarried reports whether b crosses a Messages wire.
func conformanceCarried(b *cv1.Block) bool {
	switch b.GetType() {
	case transcript.Text, transcript.Reasoning, transcript.ToolCall:
		return true
	}
	return false
}

// conformanceTypeCode is the code a Messages client reads from the error
// type (and status) the frontend answers code with: before the stream
// through errorTypeOf, after it through streamErrorTypeOf.
func conformanceTypeCode(code string, refused bool) string {
	c, _ := canonical.ParseCode(code)
	if refused {
		t, status := errorTypeOf(c)
		return codeOf(status, t).String()
	}
	return codeOf(0, streamErrorTypeOf(c)).String()
}

// conformanceKeep keeps what crosses the wire: the carried blocks and the
// outcome, an interrupt read as completed.
func conformanceKeep(t *cv1.Transcript) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode()}
	for _, b := range t.GetBlocks() {
		if conformanceCarried(b) {
			out.Blocks = append(out.Blocks, profile.Clone(&cv1.Transcript{Blocks: []*cv1.Block{b}}).Blocks[0])
		}
	}
	if out.Status == transcript.Interrupted {
		out.Status, out.Code = transcript.Completed, ""
	}
	return out
}

// conformanceFront: what a Messages client reads from our frontend. The
// 200 goes out with the first carried block, so a run that fails before
// one is refused.
func conformanceFront(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := conformanceKeep(t)
	out.Blocks = slices.DeleteFunc(out.Blocks, func(b *cv1.Block) bool { return b.GetType() == transcript.Reasoning })
	switch out.Status {
	case transcript.Refused:
		out.Code = conformanceTypeCode(out.Code, true)
	case transcript.Failed:
		if len(out.Blocks) == 0 {
			out.Status, out.Code = transcript.Refused, conformanceTypeCode(out.Code, true)
		} else {
			out.Code = conformanceTypeCode(out.Code, false)
		}
	}
	return out
}

// conformanceBack: what the bridge reads from the reference peer playing
// the definition (conformanceModel): the carried blocks, the failure's
// code through its error type.
func conformanceBack(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := conformanceKeep(t)
	if out.Status == transcript.Refused || out.Status == transcript.Failed {
		c, _ := canonical.ParseCode(out.Code)
		typ, status := errorTypeOf(c)
		out.Code = codeOf(status, typ).String()
	}
	return out
}

// newConformancePeer is the reference Anthropic peer (conformance/peers/
// anthropic), a model per case, behind one backend.
func newConformancePeer(cs []*cases.Case) (*profile.Peer, error) {
	var models []anthropicpeer.Model
	for _, c := range cs {
		models = append(models, conformanceModel(c.GetName(), c.GetResponse(), c.GetRequest().GetPrompt()))
	}
	peer := anthropicpeer.New("", models...)
	return &profile.Peer{Handler: peer, Cancelled: peer.Cancelled(), Close: peer.Close,
		Backend: func(addr, _ string) map[string]any { return map[string]any{"base_url": "http://" + addr} }}, nil
}

// conformanceModel is the reference peer's script for r: consecutive text
// (or reasoning) items one text (or thinking) block, as the canonical
// upstream makes them, their deltas re-cut at rune boundaries (JSON
// strings carry whole runes); a tool call a tool_use block; tool
// activity, data, refs, message starts and non-terminal errors end the
// open block and send nothing. A failure with no output is the error
// status and type of its code; after output, an error event of that type.
// A pure echo uses the peer's own echo, so the prompt that reached the
// peer is what comes back.
func conformanceModel(name string, r *cv1.Response, prompt string) anthropicpeer.Model {
	m := anthropicpeer.Model{Name: name, Delay: time.Duration(r.GetDelayMs()) * time.Millisecond, Hang: r.GetHang()}
	m.Echo = r.GetEcho() && len(r.GetItems()) == 0
	m.Blocks = conformanceBlocks(r, prompt)
	if f := r.GetFailure(); f != nil {
		e := driver.FailureError(f)
		typ, status := errorTypeOf(e.Code)
		m.ErrorMessage = e.Message
		switch {
		case driver.RefusesBeforeFirstEvent(r):
			m.Status, m.ErrorType = status, typ
		default:
			m.ErrorEvent, m.ErrorEventAt = typ, len(m.Blocks)
			if m.Echo {
				m.ErrorEventAt++ // the peer's echo block comes first
			}
		}
	}
	return m
}

// conformanceSignature is the signature of the reference peer's
// signature-only thinking blocks.
const conformanceSignature = "EqQBCgIYAhIMconformancesignature"

// conformanceBlocks are the peer's blocks for r's items (and an echo
// before them); an empty reasoning item is a thinking block with a
// signature and no thinking text, as Anthropic streams one whose display
// is "omitted".
func conformanceBlocks(r *cv1.Response, prompt string) []anthropicpeer.Block {
	var blocks []anthropicpeer.Block
	open := -1 // the index of the text or thinking block items append to
	text := func(typ string, deltas []string) {
		if len(deltas) == 0 {
			return
		}
		if open < 0 || blocks[open].Type != typ {
			blocks = append(blocks, anthropicpeer.Block{Type: typ})
			open = len(blocks) - 1
		}
		blocks[open].Deltas = append(blocks[open].Deltas, driver.WholeRunes(deltas)...)
	}
	if r.GetEcho() && len(r.GetItems()) > 0 {
		text("text", driver.Words(prompt))
	}
	for _, it := range r.GetItems() {
		switch k := it.GetKind().(type) {
		case *cv1.Item_Text:
			text("text", driver.Deltas(k.Text))
		case *cv1.Item_Reasoning:
			if driver.Full(k.Reasoning) == "" { // display "omitted": the signature alone
				blocks = append(blocks, anthropicpeer.Block{Type: "thinking", Signature: conformanceSignature})
				open = -1
				continue
			}
			text("thinking", driver.Deltas(k.Reasoning))
		case *cv1.Item_ToolCall:
			tc := k.ToolCall
			blocks = append(blocks, anthropicpeer.Block{Type: "tool_use", ID: tc.GetId(), Name: tc.GetName(),
				Deltas: driver.WholeRunes(driver.Deltas(tc.GetArguments()))})
			open = -1
		default:
			open = -1
		}
	}
	return blocks
}
