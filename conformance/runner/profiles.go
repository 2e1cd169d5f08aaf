package runner

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// degradation is a stated loss: what happens to a feature on a protocol's
// wire, as the frontend renders it (and that protocol's client reads it
// back) or as the backend reads it from its upstream.
type degradation struct {
	feature string
	text    string
}

// profile is what a protocol's wire keeps of a run. The expected
// transcript of a pair is derived from the case's response definition:
// the ideal transcript, projected through the backend's back (what the
// bridge receives from that upstream) and then the frontend's front (what
// that protocol's client decodes from our frontend). The projections are
// the stated degradations, written once here; every case checks them, so
// an adapter that loses more (or less) than it states fails.
type profile struct {
	name string
	// front projects the bridge's transcript onto what this protocol's
	// client sees; nil: no frontend.
	front func(t *cv1.Transcript, c *cases.Case) *cv1.Transcript
	// back projects the ideal transcript onto what the bridge receives
	// from this protocol's upstream; nil: no backend.
	back func(t *cv1.Transcript, c *cases.Case) *cv1.Transcript
	// frontNotes and backNotes state the degradations, for the table.
	frontNotes, backNotes []degradation
	// replay: the frontend can read a thread's events again.
	replay bool
	// upstreamCancel: a cancelled run's cancel reaches the upstream.
	upstreamCancel bool
	// upstream says what the backend column's upstream is.
	upstream string
	// noParameters: the protocol's requests carry no parameters.
	noParameters bool
	// multiplex: concurrent runs share one connection by the protocol's
	// own design (WebSocket ids, HTTP/2 streams); the others are HTTP/1.1
	// protocols, whose runs share one only over h2c.
	multiplex bool
}

func clone(t *cv1.Transcript) *cv1.Transcript { return proto.Clone(t).(*cv1.Transcript) }

func identity(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript { return clone(t) }

// profiles by protocol name.
var profiles = map[string]*profile{
	"native": {
		name: "native", front: identity, replay: true,
		frontNotes: []degradation{
			{"all", "lossless: the canonical events themselves (NDJSON); replay with GET /v1/threads/{thread}/events?since=N"},
			{"concurrent", "HTTP/1.1 carries one run per connection: concurrent runs share one connection only over h2c (our server speaks it; bridge and cluster modes use it, server mode does not)"},
		},
	},
	backendCanonical: {
		name: backendCanonical, back: identity, upstreamCancel: true,
		upstream:  "the in-process canonical upstream (conformance/driver), on a bridge of its own reached over NATS",
		backNotes: []degradation{{"all", "lossless: the definition's events themselves"}},
	},
	"triton": {
		name: "triton", front: tritonFront, back: tritonBack, upstreamCancel: true,
		upstream: "the reference Triton peer (conformance/peers/triton)",
		frontNotes: []degradation{
			{"text", "all root text is one text_output stream: the client reads one text block"},
			{"reasoning", "dropped; with the request parameter include_reasoning, rendered in the text as <think>…</think>"},
			{"tool-call, tool-activity", "surfaced as response parameters (tool_call_*), which a Triton client does not read as content: dropped from the transcript"},
			{"multimodal", "data and ref blocks dropped"},
			{"error-nonterminal", "dropped"},
			{"error-before", "an HTTP error status: the code goes through Triton's status table (e.g. data_loss → 500 → internal, resource_exhausted → 400 → invalid_argument)"},
			{"error-mid", "an in-band {\"error\"} under the 200 already sent: the code is internal"},
			{"interrupt", "surfaced as parameters; the run reads as completed"},
			{"replay", "none: the protocol has no replay"},
			{"concurrent", "HTTP/1.1 carries one run per connection: concurrent runs share one connection only over h2c (our server speaks it; bridge and cluster modes use it, server mode does not)"},
		},
		backNotes: []degradation{
			{"text", "text only, one block; a rune cut across responses is held back until whole"},
			{"reasoning, tool-call, tool-activity, multimodal, error-nonterminal, interrupt", "Triton's wire cannot carry them: the peer sends text only (and completes)"},
			{"error-before", "the peer's status 500: refused with internal"},
			{"error-mid", "an in-band error: failed with internal"},
		},
	},
	"evergreen": {
		name: "evergreen", front: evergreenView, back: evergreenBack, upstreamCancel: true, multiplex: true,
		upstream: "the reference Evergreen peer (conformance/peers/evergreen), requested outputs response, reasoning and tool_calls",
		frontNotes: []degradation{
			{"text", "a response whose first part is text is one text leaf: its text blocks join into one, and parts of other outputs that start while it streams are delivered after it"},
			{"multimodal", "kept (a response tree with a child per part when the first part is not text)"},
			{"error-nonterminal", "dropped (Evergreen has no non-terminal errors)"},
			{"error-before", "the session is aborted after it opened: the client sees a failed run, with the abort table's code (invalid_argument, not_found, resource_exhausted, failed_precondition, unimplemented, unavailable, deadline_exceeded kept; out_of_range → invalid_argument; the rest internal)"},
			{"error-mid", "a failed run aborts with the same table's code for the run's code (the reference's abort table says UNAVAILABLE or INTERNAL)"},
			{"cancel", "a run ended with code canceled reads as cancelled"},
			{"interrupt", "aborts with FAILED_PRECONDITION; the input request travels in tool_calls, which the Evergreen client does not read back as one"},
			{"replay", "none: the protocol has no replay"},
		},
		backNotes: []degradation{
			{"text, reasoning, multimodal", "kept: response parts (a leaf, or a tree of parts), reasoning parts; a rune cut across fragments is held back until whole"},
			{"tool-call, tool-activity", "kept through the Interlingua tool-event JSON of the tool_calls output (an Evergreen server that is not Interlingua sends none)"},
			{"error-nonterminal, interrupt", "Evergreen has no form for them: the peer leaves them out (and completes)"},
			{"error-before, error-mid", "the session's abort status, code kept; the session opened, so the run fails rather than being refused"},
		},
	},
	"glide": {
		name: "glide", front: glideFront, back: glideBack, noParameters: true, multiplex: true,
		upstream: "the reference Glide peer (conformance/peers/glide)",
		frontNotes: []degradation{
			{"text", "text only; consecutive text blocks join into one message's chunks"},
			{"reasoning, tool-call, tool-activity, multimodal", "dropped"},
			{"error-nonterminal", "a model_unavailable error frame: read back as an unavailable error, after which the text continues in a new block"},
			{"error-before", "chatStream has no refusal: an error frame, read back as a failed run with the same code"},
			{"error-mid", "an error frame; every code survives (the message carries it: \"<code>: …\")"},
			{"cancel", "a run ended with code canceled reads as cancelled"},
			{"interrupt", "unknown_error (failed_precondition)"},
			{"replay", "none: the protocol has no replay"},
			{"parameters", "a chatStream request has no parameters: cases that need some do not apply (server mode: the scripted faults cannot be asked for)"},
		},
		backNotes: []degradation{
			{"text", "text only; a rune is never split (frames are JSON text)"},
			{"reasoning, tool-call, tool-activity, multimodal, interrupt", "Glide's wire cannot carry them: the peer sends text only (and completes)"},
			{"error-nonterminal", "a model failing mid-stream: model_unavailable (unavailable), then the next model's text"},
			{"error-before, error-mid", "a Glide router can only run out of models: model_unavailable, then all_models_unavailable (unavailable)"},
			{"cancel", "chatStream has no cancel: the upstream is not told (the bridge's run still ends at once)"},
		},
	},
	backendAgent: {
		name: backendAgent, front: agentFront, back: agentBack, replay: true, upstreamCancel: true,
		upstream: "the reference agent-protocol peer (conformance/peers/agent), one assistant per case, a thread per run, over SSE (the runner's tests repeat the column over WebSocket)",
		frontNotes: []degradation{
			{"error-before", "run.start's error response: the agent protocol's error codes are few, so the client reads back invalid_argument (for every code a client can fix: invalid_argument, not_found, already_exists, failed_precondition, out_of_range, resource_exhausted), permission_denied (also unauthenticated), unimplemented, or unknown (the rest)"},
			{"error-mid", "a lifecycle error is a string: the code survives only while a message is open (the messages channel's error event carries it); a run that fails between messages, or after a non-terminal error, reads back as unknown"},
			{"error-nonterminal", "a custom event named interlingua.error with {code, message}, read back as the same error"},
			{"cancel", "AgentStatus has no cancelled: a failed lifecycle event whose error starts \"cancelled: \", read back as cancelled"},
			{"tool-call", "a tool call whose arguments are not a JSON object finishes as an invalid_tool_call block carrying the raw string"},
			{"multimodal", "data blocks are base64 data-delta slices; block types the canonical model lacks are not produced by the bridge"},
		},
		backNotes: []degradation{
			{"text, reasoning, tool-call, multimodal", "kept: messages content blocks (text-delta, reasoning-delta, tool-call-delta after a tool_call_chunk start, image/audio/video/file blocks as base64 data-delta slices or a url); JSON strings carry whole runes, and an SSE frame cut mid-rune across writes is reassembled"},
			{"tool-call", "a tool call without arguments reads back as {} (the finished tool_call's args object)"},
			{"tool-activity", "kept: the tools channel (tool-started, tool-output-delta, tool-finished, tool-error with the code's name)"},
			{"interrupt", "kept: input.requested, then an interrupted lifecycle"},
			{"error-nonterminal", "a model call failing is the messages channel's error event, which ends its message: read back as that message's finish (reason error) and then, when the run goes on, an error event with its code (one outside any message is an error event at once)"},
			{"error-before", "run.start's error response: the protocol's ErrorCode reads back as invalid_argument (invalid_argument, not_found, already_exists, failed_precondition, out_of_range, resource_exhausted), permission_denied (also unauthenticated), unimplemented (not_supported) or unknown (unknown_error: the rest)"},
			{"error-mid", "kept while a message is open (the messages error event carries the code, and the failed lifecycle's error repeats its message); a run failing between messages has only the lifecycle's string error: unknown"},
			{"cancel", "the backend cancels the upstream run (POST /threads/{id}/runs/{run_id}/cancel); the peer ends it with a failed lifecycle \"cancelled: …\""},
		},
	},
	"xml": {
		name: "xml", front: xmlFront,
		frontNotes: []degradation{
			{"tool-call", "an <action> whose body is {\"name\":…,\"parameters\":ARGS}: the client reads that body as the arguments"},
			{"tool-activity", "tool_started and tool_output are not rendered; results and failures are <observation> elements"},
			{"multimodal", "data and ref blocks are not rendered"},
			{"error-nonterminal", "an <error code> element"},
			{"interrupt", "the input request is not rendered; the run ends with <error status=\"interrupted\">"},
			{"replay", "none: the protocol has no replay"},
			{"concurrent", "HTTP/1.1 carries one run per connection: concurrent runs share one connection only over h2c (our server speaks it; bridge and cluster modes use it, server mode does not)"},
		},
	},
}

// rendered reports whether anything of t reaches a text-only wire before
// its end (a Triton response was sent).
func hasText(t *cv1.Transcript) bool {
	for _, b := range t.GetBlocks() {
		if b.GetType() == transcript.Text && b.GetText() != "" {
			return true
		}
	}
	return false
}

// joinedText returns t's root text, joined.
func joinedText(t *cv1.Transcript) string {
	var sb strings.Builder
	for _, b := range t.GetBlocks() {
		if b.GetType() == transcript.Text {
			sb.WriteString(b.GetText())
		}
	}
	return sb.String()
}

// textOnly keeps t's outcome and its text as one text block.
func textOnly(t *cv1.Transcript, text string) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode()}
	if text != "" {
		out.Blocks = []*cv1.Block{{Type: transcript.Text, Text: text}}
	}
	return out
}

// tritonStatusCode is the code a Triton client reads from the status our
// frontend answers a code with (adapters/triton errors.go: statusOf, then
// codeOf).
func tritonStatusCode(code string) string {
	c, _ := canonical.ParseCode(code)
	switch c {
	case canonical.CodeNotFound:
		return canonical.CodeNotFound.String()
	case canonical.CodeUnavailable, canonical.CodeDeadlineExceeded:
		return canonical.CodeUnavailable.String()
	case canonical.CodeUnimplemented:
		return canonical.CodeUnimplemented.String()
	case canonical.CodePermissionDenied, canonical.CodeUnauthenticated:
		return canonical.CodePermissionDenied.String()
	case canonical.CodeUnknown, canonical.CodeInvalidArgument, canonical.CodeAlreadyExists, canonical.CodeCanceled,
		canonical.CodeResourceExhausted, canonical.CodeFailedPrecondition, canonical.CodeOutOfRange:
		return canonical.CodeInvalidArgument.String()
	}
	return canonical.CodeInternal.String()
}

func boolParam(c *cases.Case, name string) bool {
	v := c.GetRequest().GetParameters().GetFields()[name]
	return v.GetBoolValue()
}

// tritonFront: what a Triton client reads from our Triton frontend.
func tritonFront(t *cv1.Transcript, c *cases.Case) *cv1.Transcript {
	var sb strings.Builder
	for _, b := range t.GetBlocks() {
		switch {
		case b.GetType() == transcript.Text:
			sb.WriteString(b.GetText())
		case b.GetType() == transcript.Reasoning && boolParam(c, "include_reasoning"):
			sb.WriteString("<think>" + b.GetText() + "</think>")
		}
	}
	text := sb.String()
	out := textOnly(t, text)
	switch t.GetStatus() {
	case transcript.Refused:
		out.Code = tritonStatusCode(t.GetCode())
	case transcript.Failed:
		if text == "" {
			out.Status, out.Code = transcript.Refused, tritonStatusCode(t.GetCode())
		} else {
			out.Code = canonical.CodeInternal.String()
		}
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Completed, ""
	}
	return out
}

// tritonBack: what the bridge reads from the Triton peer playing the
// definition.
func tritonBack(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := textOnly(t, joinedText(t))
	switch t.GetStatus() {
	case transcript.Interrupted:
		out.Status = transcript.Completed // the peer cannot ask: it completes
	case transcript.Refused, transcript.Failed:
		out.Code = canonical.CodeInternal.String()
		if !hasText(t) {
			out.Status = transcript.Refused
		}
	}
	return out
}

// glideText keeps the text, one block per stretch between non-terminal
// errors, and the errors (as unavailable).
func glideText(t *cv1.Transcript) []*cv1.Block {
	var out []*cv1.Block
	var cur *cv1.Block
	for _, b := range t.GetBlocks() {
		switch b.GetType() {
		case transcript.Text:
			if cur == nil {
				cur = &cv1.Block{Type: transcript.Text}
				out = append(out, cur)
			}
			cur.Text += b.GetText()
		case transcript.Error:
			out = append(out, &cv1.Block{Type: transcript.Error, Text: canonical.CodeUnavailable.String()})
			cur = nil
		}
	}
	return out
}

// glideFront: what a Glide client reads from our Glide frontend.
func glideFront(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode(), Blocks: glideText(t)}
	switch t.GetStatus() {
	case transcript.Refused:
		out.Status = transcript.Failed
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Failed, canonical.CodeFailedPrecondition.String()
	}
	return cancelledByCode(out)
}

// glideBack: what the bridge reads from the Glide peer playing the
// definition (GlideRouter).
func glideBack(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode(), Blocks: glideText(t)}
	switch t.GetStatus() {
	case transcript.Interrupted:
		out.Status = transcript.Completed // the peer cannot ask: it completes
	case transcript.Refused, transcript.Failed:
		out.Blocks = append(out.Blocks, &cv1.Block{Type: transcript.Error, Text: canonical.CodeUnavailable.String()})
		out.Status, out.Code = transcript.Failed, canonical.CodeUnavailable.String()
	}
	return out
}

// evergreenAbortCode is the gRPC status our Evergreen frontend aborts a
// session with for a refused run (adapters/evergreen errors.go wireCode,
// the reference's abort table): the table's own codes and the context
// codes keep theirs, invalid arguments are INVALID_ARGUMENT, the rest
// INTERNAL.
func evergreenAbortCode(code string) string {
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

// evergreenView: what an Evergreen client reads from an Evergreen server
// (our frontend) that renders the transcript: the response output (text,
// data and ref parts; text joined into one leaf when the first part is
// text), reasoning and tool_calls outputs, no non-terminal errors.
func evergreenView(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := clone(t)
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
		out.Status, out.Code = transcript.Failed, evergreenAbortCode(t.GetCode())
	case transcript.Failed:
		// The run's code through the same table (the reference's abort
		// table says UNAVAILABLE or INTERNAL for a failed run; the
		// frontend keeps the table's own codes too: reported).
		out.Code = evergreenAbortCode(t.GetCode())
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Failed, canonical.CodeFailedPrecondition.String()
	}
	out.Interrupts = nil // sent in tool_calls, not read back as an input request
	return cancelledByCode(out)
}

// cancelledByCode: a wire that ends runs with a status code cannot tell a
// run failed with "canceled" from a cancelled one; its client reads the
// latter.
func cancelledByCode(t *cv1.Transcript) *cv1.Transcript {
	if t.GetStatus() == transcript.Failed && t.GetCode() == canonical.CodeCanceled.String() {
		t.Status = transcript.Cancelled
	}
	return t
}

// evergreenBack: what the bridge reads from the Evergreen peer playing
// the definition (EvergreenScript): every part in order, no non-terminal
// errors or interrupts, the abort's code as it is.
func evergreenBack(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := clone(t)
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
	return cancelledByCode(out)
}

// xmlFront: what the XML client reads from our XML frontend.
func xmlFront(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := clone(t)
	out.Interrupts = nil
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
			b.Text = `{"name":` + jsonString(b.GetName()) + `,"parameters":` + args + `}`
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

func jsonString(s string) string {
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

// agentRoundTrip is the code an agent-protocol client reads back for a
// refused run.start (adapters/agent errors.go: wireCode, then
// canonicalCode).
func agentRoundTrip(code string) string {
	c, _ := canonical.ParseCode(code)
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeNotFound, canonical.CodeAlreadyExists,
		canonical.CodeFailedPrecondition, canonical.CodeOutOfRange, canonical.CodeResourceExhausted:
		return canonical.CodeInvalidArgument.String()
	case canonical.CodePermissionDenied, canonical.CodeUnauthenticated:
		return canonical.CodePermissionDenied.String()
	case canonical.CodeUnimplemented:
		return canonical.CodeUnimplemented.String()
	}
	return canonical.CodeUnknown.String()
}

// agentFront: what the agent-protocol client (our agent backend) reads
// back from the agent frontend.
func agentFront(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := clone(t)
	blocks := out.GetBlocks()
	switch {
	case out.GetStatus() == transcript.Refused:
		out.Code = agentRoundTrip(out.GetCode())
	case out.GetStatus() == transcript.Failed && (len(blocks) == 0 || blocks[len(blocks)-1].GetType() == transcript.Error):
		out.Code = canonical.CodeUnknown.String() // no message open: the lifecycle's string error only
	}
	return out
}

// agentErrorRead is the code the agent backend reads from an ErrorCode
// (adapters/agent errors.go canonicalCode).
func agentErrorRead(code string) string {
	switch code {
	case "invalid_argument":
		return canonical.CodeInvalidArgument.String()
	case "unknown_command", "not_supported":
		return canonical.CodeUnimplemented.String()
	case "no_such_run", "no_such_subscription", "no_such_namespace", "no_such_interrupt", "no_such_checkpoint":
		return canonical.CodeNotFound.String()
	case "permission_denied":
		return canonical.CodePermissionDenied.String()
	}
	return canonical.CodeUnknown.String()
}

// agentWire walks the definition's events as the agent peer puts them on
// the wire (driver.AgentScript): whether a message is open at the end, and
// the last non-terminal error.
func agentWire(c *cases.Case) (openAtEnd bool, last *canonical.Error) {
	open := false
	for _, st := range driver.Events(c.GetResponse(), c.GetRequest().GetPrompt()) {
		switch k := st.Event.GetKind().(type) {
		case *canonical.KindMessageStart, *canonical.KindBlockStart:
			open = true
		case *canonical.KindMessageFinish:
			open = false
		case *canonical.KindError:
			last = canonical.FromProto(k.Error)
			open = false
		}
	}
	return open, last
}

// agentBack: what the bridge reads from the agent peer playing the
// definition (driver.AgentScript) through the agent backend: a refusal's
// code through the protocol's ErrorCode, a failed run's code only when
// the messages channel carried it, a tool call without arguments as {}.
func agentBack(t *cv1.Transcript, c *cases.Case) *cv1.Transcript {
	out := clone(t)
	openAtEnd, last := agentWire(c)
	for _, b := range out.GetBlocks() {
		if b.GetType() == transcript.ToolCall && b.GetText() == "" {
			b.Text = "{}" // the finished tool_call's args object
		}
	}
	switch out.GetStatus() {
	case transcript.Refused:
		code, _ := canonical.ParseCode(out.GetCode())
		out.Code = agentErrorRead(driver.AgentErrorCode(code))
	case transcript.Failed:
		if openAtEnd {
			break // the messages error event carries the code
		}
		// The failed lifecycle's string error only: the backend takes the
		// code of an earlier messages error with the same message, if any.
		out.Code = canonical.CodeUnknown.String()
		if f := driver.FailureError(c.GetResponse().GetFailure()); last != nil && last.Message == f.Message {
			out.Code = last.Code.String()
		}
	}
	return out
}
