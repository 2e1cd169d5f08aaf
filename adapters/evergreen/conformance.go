package evergreen

import (
	"errors"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/interlingua-dev/interlingua/conformance/driver"
	evergreenpeer "github.com/interlingua-dev/interlingua/conformance/peers/evergreen"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// conformanceProfile is what the protocol's wire keeps of a run, checked
// by the conformance runner (conformance/profile).
var conformanceProfile = &profile.Profile{
	NewPeer: newConformancePeer,
	Front:   conformanceFront, Back: conformanceBack, UpstreamCancel: true, Multiplex: true,
	Upstream: "the reference Evergreen peer (conformance/peers/evergreen), requested outputs response, reasoning and tool_calls",
	FrontNotes: []profile.Degradation{
		profile.AgentAnswer,
		{"text", "a response whose first part is text is one text leaf: its text blocks join into one, and parts of other outputs that start while it streams are delivered after it"},
		{"multimodal", "kept (a response tree with a child per part when the first part is not text)"},
		{"error-nonterminal", "dropped (Evergreen has no non-terminal errors)"},
		{"error-before", "the session is aborted after it opened: the client sees a failed run, with the abort table's code (invalid_argument, not_found, resource_exhausted, failed_precondition, unimplemented, unavailable, deadline_exceeded kept; out_of_range → invalid_argument; the rest internal)"},
		{"error-mid", "a failed run aborts with the same table's code for the run's code (the reference's abort table says UNAVAILABLE or INTERNAL)"},
		{"cancel", "a run ended with code canceled reads as cancelled"},
		{"interrupt", "aborts with FAILED_PRECONDITION; the input request travels in tool_calls, which the Evergreen client does not read back as one"},
		profile.NoReplay,
	},
	BackNotes: []profile.Degradation{
		{"text, reasoning, multimodal", "kept: response parts (a leaf, or a tree of parts), reasoning parts; a rune cut across fragments is held back until whole"},
		{"tool-call, tool-activity", "kept through the Interlingua tool-event JSON of the tool_calls output (an Evergreen server that is not Interlingua sends none)"},
		{"error-nonterminal, interrupt", "Evergreen has no form for them: the peer leaves them out (and completes)"},
		{"error-before, error-mid", "the session's abort status, code kept; the session opened, so the run fails rather than being refused"},
	},
}

// conformanceAbortCode is the gRPC status our Evergreen frontend aborts a
// session with for a refused run (adapters/evergreen errors.go wireCode,
// the reference's abort table): the table's own codes and the context
// codes keep theirs, invalid arguments are INVALID_ARGUMENT, the rest
// INTERNAL.
func conformanceAbortCode(code string) string {
	c, _ := canonical.ParseCode(code)
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeOutOfRange:
		return canonical.CodeInvalidArgument.String()
	case canonical.CodeNotFound, canonical.CodeResourceExhausted, canonical.CodeFailedPrecondition,
		canonical.CodeUnimplemented, canonical.CodeUnavailable, canonical.CodeCanceled, canonical.CodeDeadlineExceeded:
		return c.String()
	}
	return canonical.CodeInternal.String()
}

// conformanceFront: what an Evergreen client reads from an Evergreen server
// (our frontend) that renders the transcript: the response output (text,
// data and ref parts; text joined into one leaf when the first part is
// text), reasoning and tool_calls outputs, no non-terminal errors.
func conformanceFront(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := profile.Clone(t)
	textFirst := false
	for _, b := range t.GetBlocks() {
		if k := b.GetType(); k == transcript.Text || k == transcript.Data || k == transcript.Ref {
			textFirst = k == transcript.Text
			break
		}
	}
	var blocks, after []*cv1.Block
	var leaf *cv1.Block
	for _, b := range t.GetBlocks() {
		b = proto.Clone(b).(*cv1.Block)
		switch {
		case b.GetType() == transcript.Error:
		case b.GetType() == transcript.Text && textFirst:
			if leaf == nil {
				leaf = b
				blocks = append(blocks, b)
			} else {
				leaf.Text += b.GetText()
			}
		case leaf != nil:
			after = append(after, b) // waits for the streaming leaf
		default:
			blocks = append(blocks, b)
		}
	}
	out.Blocks = append(blocks, after...)
	switch t.GetStatus() {
	case transcript.Refused:
		// The session opened; the refusal aborts it.
		out.Status, out.Code = transcript.Failed, conformanceAbortCode(t.GetCode())
	case transcript.Failed:
		// The run's code through the same table (the reference's abort
		// table says UNAVAILABLE or INTERNAL for a failed run; the
		// frontend keeps the table's own codes too: reported).
		out.Code = conformanceAbortCode(t.GetCode())
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Failed, canonical.CodeFailedPrecondition.String()
	}
	out.Interrupts = nil // sent in tool_calls, not read back as an input request
	return profile.CancelledByCode(out)
}

// conformanceBack: what the bridge reads from the Evergreen peer playing
// the definition (EvergreenScript): every part in order, no non-terminal
// errors or interrupts, the abort's code as it is.
func conformanceBack(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := profile.Clone(t)
	var blocks []*cv1.Block
	for _, b := range t.GetBlocks() {
		if b.GetType() != transcript.Error {
			blocks = append(blocks, b)
		}
	}
	out.Blocks = blocks
	out.Interrupts = nil
	switch t.GetStatus() {
	case transcript.Refused:
		out.Status = transcript.Failed
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Completed, ""
	}
	return profile.CancelledByCode(out)
}

// newConformancePeer is the reference Evergreen peer (conformance/peers/
// evergreen), a script per case, behind one backend asking for every
// output.
func newConformancePeer(cs []*cases.Case) (*profile.Peer, error) {
	scripts := map[string]evergreenpeer.Script{}
	for _, c := range cs {
		scripts[c.GetName()] = conformanceScript(c.GetResponse(), c.GetRequest().GetPrompt())
	}
	peer := evergreenpeer.New(scripts)
	mux := http.NewServeMux()
	mux.Handle(peer.Handler())
	return &profile.Peer{Handler: mux, Cancelled: peer.Cancelled(),
		Backend: func(addr, _ string) map[string]any {
			return map[string]any{"url": "http://" + addr, "outputs": []string{OutputResponse, OutputReasoning, OutputToolCalls}}
		}}, nil
}

// conformanceScript is the reference Evergreen peer's script for r: text
// blocks are response parts (a fragment per delta, runes possibly cut
// across fragments), reasoning blocks reasoning parts, data and refs
// response parts, tool calls and tool activity tool_calls parts (the
// Interlingua tool-event JSON); the failure is the session's abort status;
// non-terminal errors and interrupts have no Evergreen form and are left
// out.
func conformanceScript(r *cv1.Response, prompt string) evergreenpeer.Script {
	sc := evergreenpeer.Script{Delay: time.Duration(r.GetDelayMs()) * time.Millisecond, Hang: r.GetHang()}
	var open *evergreenpeer.Part // the text or reasoning part items append to
	text := func(output string, deltas []string) {
		if len(deltas) == 0 {
			return
		}
		if open == nil || open.Output != output {
			sc.Parts = append(sc.Parts, evergreenpeer.Part{Output: output})
			open = &sc.Parts[len(sc.Parts)-1]
		}
		for _, d := range deltas {
			open.Fragments = append(open.Fragments, []byte(d))
		}
	}
	add := func(p evergreenpeer.Part) {
		sc.Parts = append(sc.Parts, p)
		open = nil
	}
	tool := func(v map[string]any) {
		data, _ := json.Marshal(v, toolWriteJSON) // keys sorted, as the conformance tests expect
		add(evergreenpeer.Part{Output: evergreenpeer.ToolCalls, Mime: "application/json", Fragments: [][]byte{data}})
	}
	if r.GetEcho() {
		text(evergreenpeer.Response, driver.Words(prompt))
	}
	for _, it := range r.GetItems() {
		switch k := it.GetKind().(type) {
		case *cv1.Item_Text:
			text(evergreenpeer.Response, driver.Deltas(k.Text))
		case *cv1.Item_Reasoning:
			text(evergreenpeer.Reasoning, driver.Deltas(k.Reasoning))
		case *cv1.Item_ToolCall:
			tool(map[string]any{"type": "tool_call", "id": k.ToolCall.GetId(), "name": k.ToolCall.GetName(), "arguments": driver.Full(k.ToolCall.GetArguments())})
		case *cv1.Item_Tool:
			t := k.Tool
			tool(map[string]any{"type": "tool_started", "id": t.GetId(), "name": t.GetName(), "input": t.GetInput().AsInterface()})
			for _, o := range t.GetOutput() {
				tool(map[string]any{"type": "tool_output", "id": t.GetId(), "delta": o})
			}
			if f := t.GetFailure(); f != nil {
				e := driver.FailureError(f)
				tool(map[string]any{"type": "tool_failed", "id": t.GetId(), "error": map[string]any{"code": e.Code.String(), "message": e.Message}})
			} else {
				tool(map[string]any{"type": "tool_finished", "id": t.GetId(), "output": t.GetResult().AsInterface()})
			}
		case *cv1.Item_Data:
			add(evergreenpeer.Part{Output: evergreenpeer.Response, Mime: k.Data.GetMime(), Fragments: [][]byte{driver.DataBytes(k.Data)}})
		case *cv1.Item_Ref:
			add(evergreenpeer.Part{Output: evergreenpeer.Response, Mime: k.Ref.GetMime(), Ref: k.Ref.GetUri()})
		case *cv1.Item_Message, *cv1.Item_Error:
			open = nil // what follows is a part of its own
		}
	}
	if f := r.GetFailure(); f != nil {
		e := driver.FailureError(f)
		sc.Abort = connect.NewError(connect.Code(e.Code), errors.New(e.Message))
	}
	return sc
}
