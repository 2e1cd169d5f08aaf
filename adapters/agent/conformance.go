package agent

import (
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	agentpeer "github.com/interlingua-dev/interlingua/conformance/peers/agent"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// conformanceProfile is what the protocol's wire keeps of a run, checked
// by the conformance runner (conformance/profile).
var conformanceProfile = &profile.Profile{
	NewPeer: newConformancePeer,
	Front:   conformanceFront, Back: conformanceBack, Replay: true, UpstreamCancel: true,
	Upstream: "the reference agent-protocol peer (conformance/peers/agent), one assistant per case, a thread per run, over SSE (the runner's tests repeat the column over WebSocket)",
	FrontNotes: []profile.Degradation{
		{"error-before", "run.start's error response: the agent protocol's error codes are few, so the client reads back invalid_argument (for every code a client can fix: invalid_argument, not_found, already_exists, failed_precondition, out_of_range, resource_exhausted), permission_denied (also unauthenticated), unimplemented, or unknown (the rest)"},
		{"error-mid", "a lifecycle error is a string: the code survives only while a message is open (the messages channel's error event carries it); a run that fails between messages, or after a non-terminal error, reads back as unknown"},
		{"error-nonterminal", "a custom event named interlingua.error with {code, message}, read back as the same error"},
		{"cancel", "AgentStatus has no cancelled: a failed lifecycle event whose error starts \"cancelled: \", read back as cancelled"},
		{"tool-call", "a tool call whose arguments are not a JSON object finishes as an invalid_tool_call block carrying the raw string"},
		{"multimodal", "data blocks are base64 data-delta slices; block types the canonical model lacks are not produced by the bridge"},
	},
	BackNotes: []profile.Degradation{
		{"text, reasoning, tool-call, multimodal", "kept: messages content blocks (text-delta, reasoning-delta, tool-call-delta after a tool_call_chunk start, image/audio/video/file blocks as base64 data-delta slices or a url); JSON strings carry whole runes, and an SSE frame cut mid-rune across writes is reassembled"},
		{"tool-call", "a tool call without arguments reads back as {} (the finished tool_call's args object)"},
		{"tool-activity", "kept: the tools channel (tool-started, tool-output-delta, tool-finished, tool-error with the code's name)"},
		{"interrupt", "kept: input.requested, then an interrupted lifecycle"},
		{"error-nonterminal", "a model call failing is the messages channel's error event, which ends its message: read back as that message's finish (reason error) and then, when the run goes on, an error event with its code (one outside any message is an error event at once)"},
		{"error-before", "run.start's error response: the protocol's ErrorCode reads back as invalid_argument (invalid_argument, not_found, already_exists, failed_precondition, out_of_range, resource_exhausted), permission_denied (also unauthenticated), unimplemented (not_supported) or unknown (unknown_error: the rest)"},
		{"error-mid", "kept while a message is open (the messages error event carries the code, and the failed lifecycle's error repeats its message); a run failing between messages has only the lifecycle's string error: unknown"},
		{"cancel", "the backend cancels the upstream run (POST /threads/{id}/runs/{run_id}/cancel); the peer ends it with a failed lifecycle \"cancelled: …\""},
	},
}

// conformanceRoundTrip is the code an agent-protocol client reads back for a
// refused run.start (adapters/agent errors.go: wireCode, then
// canonicalCode).
func conformanceRoundTrip(code string) string {
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

// conformanceFront: what the agent-protocol client (our agent backend) reads
// back from the agent frontend.
func conformanceFront(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := profile.Clone(t)
	blocks := out.GetBlocks()
	switch {
	case out.GetStatus() == transcript.Refused:
		out.Code = conformanceRoundTrip(out.GetCode())
	case out.GetStatus() == transcript.Failed && (len(blocks) == 0 || blocks[len(blocks)-1].GetType() == transcript.Error):
		out.Code = canonical.CodeUnknown.String() // no message open: the lifecycle's string error only
	}
	return out
}

// conformanceErrorRead is the code the agent backend reads from an ErrorCode
// (adapters/agent errors.go canonicalCode).
func conformanceErrorRead(code string) string {
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

// conformanceWire walks the definition's events as the agent peer puts them
// on the wire (driver.AgentScript): whether a message is open at the end,
// and the last non-terminal error.
func conformanceWire(c *cases.Case) (openAtEnd bool, last *canonical.Error) {
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

// conformanceBack: what the bridge reads from the agent peer playing the
// definition (driver.AgentScript) through the agent backend: a refusal's
// code through the protocol's ErrorCode, a failed run's code only when
// the messages channel carried it, a tool call without arguments as {}.
func conformanceBack(t *cv1.Transcript, c *cases.Case) *cv1.Transcript {
	out := profile.Clone(t)
	openAtEnd, last := conformanceWire(c)
	for _, b := range out.GetBlocks() {
		if b.GetType() == transcript.ToolCall && b.GetText() == "" {
			b.Text = "{}" // the finished tool_call's args object
		}
	}
	switch out.GetStatus() {
	case transcript.Refused:
		code, _ := canonical.ParseCode(out.GetCode())
		out.Code = conformanceErrorRead(driver.AgentErrorCode(code))
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

// newConformancePeer is the reference agent-protocol peer (conformance/
// peers/agent): the case is the upstream's assistant, a backend per case,
// and every run is a thread of its own (the bridge's thread id).
func newConformancePeer(cs []*cases.Case) (*profile.Peer, error) {
	scripts := map[string]agentpeer.Script{}
	for _, c := range cs {
		scripts[c.GetName()] = driver.AgentScript(c.GetResponse(), c.GetRequest().GetPrompt())
	}
	peer, err := agentpeer.NewWithConfig(agentpeer.Config{Scripts: scripts})
	if err != nil {
		return nil, err
	}
	return &profile.Peer{Handler: peer.Handler(), PerCase: true, Cancelled: peer.Cancelled(), Close: peer.Close, // ends its runs and event streams
		Backend: func(addr, name string) map[string]any {
			return map[string]any{"url": "http://" + addr, "assistant_id": name, "transport": "sse"}
		}}, nil
}
