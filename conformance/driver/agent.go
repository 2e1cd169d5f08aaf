package driver

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	agentpeer "github.com/interlingua-dev/interlingua/conformance/peers/agent"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// AgentGraph is the graph_name of the runs AgentScript plays.
const AgentGraph = "conformance"

// agentDataSlice is the bytes per data-delta: a multiple of 3, so every
// slice is whole base64 and the slices concatenate to the block's base64.
const agentDataSlice = 96

// AgentScript is the reference agent peer's script for r: the run an
// agent server streams for it on the protocol's channels, all in the root
// namespace (reference sections 5.2-5.7):
//
//   - lifecycle running (graph_name AgentGraph), the input state (values
//     with the prompt as a human message) and its checkpoint;
//   - each message on the messages channel (node "agent"): message-start
//     (role ai, human or system), per block content-block-start, deltas
//     and content-block-finish with the finalized block — text-delta,
//     reasoning-delta, tool-call-delta after a tool_call_chunk start
//     (finished as tool_call with parsed args, or invalid_tool_call when
//     the arguments are not a JSON object), image/audio/video/file blocks
//     with base64 data-delta slices, or a url for a ref — and
//     message-finish with its reason (stop, or tool_calls for a message
//     that made tool calls);
//   - tool activity on the tools channel (node "tools"): tool-started,
//     tool-output-delta, tool-finished or tool-error (code: the canonical
//     code name);
//   - a non-terminal error is a model call failing: the messages channel's
//     error event {message, code}, which ends the open message (the next
//     block starts a new one);
//   - the end: completed (the open message finished with reason stop, the
//     final state and its checkpoint, lifecycle completed); failed (the
//     messages error event when a message is open, then lifecycle failed
//     with the failure's message as its error); interrupted (input.requested
//     with the interrupt's id and payload, then lifecycle interrupted); a
//     hang waits for the run's cancellation (the peer then ends it failed,
//     "cancelled: ...").
//
// A response that fails before any output is refused: run.start's error
// response, with AgentErrorCode. Text and arguments are cut as Events cuts
// them (a rune cut across deltas arrives whole: JSON strings carry whole
// runes); DelayMs is slept before
// each delta; WriteBytes cuts the SSE frames; Input is the prompt, which
// the peer checks run.start carries.
func AgentScript(r *cv1.Response, prompt string) agentpeer.Script {
	sc := agentpeer.Script{Input: prompt, WriteBytes: int(r.GetWriteBytes())}
	if RefusesBeforeFirstEvent(r) {
		e := FailureError(r.GetFailure())
		sc.Refusal = &agentpeer.Refusal{Code: AgentErrorCode(e.Code), Message: e.Message}
		return sc
	}
	w := &agentWriter{delay: int(r.GetDelayMs()), prompt: prompt}
	for _, st := range Events(r, prompt) {
		w.step(st)
	}
	switch {
	case r.GetInterrupt() != nil && r.GetFailure() == nil:
		in := r.GetInterrupt()
		w.finishMessage("stop")
		w.state()
		w.event("input.requested", "", map[string]any{"interrupt_id": in.GetId(), "payload": value(in.GetPayload())})
		w.event("lifecycle", "", map[string]any{"event": "interrupted", "graph_name": AgentGraph})
	case r.GetHang():
		w.lines = append(w.lines, agentpeer.Line{Pause: "cancel"})
	case r.GetFailure() != nil:
		e := FailureError(r.GetFailure())
		if w.msgOpen {
			w.event("messages", "agent", map[string]any{"event": "error", "message": e.Message, "code": e.Code.String()})
			w.msgOpen, w.blk = false, nil
		}
		w.event("lifecycle", "", map[string]any{"event": "failed", "graph_name": AgentGraph, "error": e.Message})
	default:
		w.finishMessage("stop")
		w.state()
		w.event("lifecycle", "", map[string]any{"event": "completed", "graph_name": AgentGraph})
	}
	sc.Lines = w.lines
	return sc
}

// AgentErrorCode is the agent protocol's ErrorCode (reference section 3.5)
// a server answers a refused run.start with: invalid_argument for what the
// client may fix, permission_denied, not_supported for what the server does
// not implement, and unknown_error, the unexpected server failure, for the
// rest (the protocol has no unavailable, internal or resource code).
func AgentErrorCode(c canonical.Code) string {
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeNotFound, canonical.CodeAlreadyExists,
		canonical.CodeFailedPrecondition, canonical.CodeOutOfRange, canonical.CodeResourceExhausted:
		return "invalid_argument"
	case canonical.CodePermissionDenied, canonical.CodeUnauthenticated:
		return "permission_denied"
	case canonical.CodeUnimplemented:
		return "not_supported"
	}
	return "unknown_error"
}

// agentWriter turns a definition's canonical events into script lines.
type agentWriter struct {
	lines  []agentpeer.Line
	delay  int
	prompt string

	msgOpen bool
	msgs    int
	index   int  // the next block index of the open message
	calls   bool // the open message has a tool call
	blk     *agentBlock
	said    []map[string]any // the messages so far, for the state
}

// agentBlock is the open wire block.
type agentBlock struct {
	typ   canonical.BlockType
	index int
	id    string
	name  string
	mime  string
	ref   string
	text  []byte
	data  []byte
}

func value(v *structpb.Value) any {
	if v == nil {
		return nil
	}
	return v.AsInterface()
}

// marshalOptions write the script's lines as they always were (the
// testdata/agent goldens): encoding/json's form without HTML escaping —
// map keys sorted, U+2028 and U+2029 escaped, nil as null, and a tool
// call's arguments (a Value) kept as spelled, duplicate names and all.
var marshalOptions = json.JoinOptions(json.Deterministic(true), json.EscapeForJS(true),
	json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true),
	json.PreserveRawStrings(true), json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

// marshal is v as JSON, without HTML escaping.
func marshal(v any) json.Value {
	b, _ := json.Marshal(v, marshalOptions)
	return b
}

// event appends an event line in the root namespace.
func (w *agentWriter) event(method, node string, data map[string]any) {
	p := map[string]any{"namespace": []string{}, "data": data}
	if node != "" {
		p["node"] = node
	}
	w.lines = append(w.lines, agentpeer.Line{Method: method, Params: marshal(p)})
}

// delayed appends an event line slept before (a content delta).
func (w *agentWriter) delayed(method, node string, data map[string]any, delay bool) {
	w.event(method, node, data)
	if delay {
		w.lines[len(w.lines)-1].DelayMs = w.delay
	}
}

func agentRole(role string) string {
	switch role {
	case "user", "human":
		return "human"
	case "system":
		return "system"
	}
	return "ai" // the protocol's MessageRole has no tool role
}

func agentReason(r canonical.FinishReason) string {
	switch r {
	case canonical.FinishToolCalls:
		return "tool_calls"
	case canonical.FinishLength:
		return "length"
	case canonical.FinishContentFilter:
		return "content_filter"
	}
	return "stop"
}

// startMessage opens a message on the wire.
func (w *agentWriter) startMessage(id, role string) {
	w.msgs++
	if id == "" {
		id = "conf-wire-" + strconv.Itoa(w.msgs)
	}
	w.msgOpen, w.index, w.calls = true, 0, false
	w.said = append(w.said, map[string]any{"type": agentRole(role), "content": "", "id": id})
	w.event("messages", "agent", map[string]any{"event": "message-start", "role": agentRole(role), "id": id,
		"metadata": map[string]any{"provider": "conformance", "model": "scripted"}})
}

// finishMessage finishes the open block and message, if any; a message
// that made tool calls stops for them.
func (w *agentWriter) finishMessage(reason string) {
	w.finishBlock()
	if !w.msgOpen {
		return
	}
	if w.calls && reason == "stop" {
		reason = "tool_calls"
	}
	w.msgOpen = false
	w.event("messages", "agent", map[string]any{"event": "message-finish", "reason": reason})
}

// state appends the thread's state after a step: values and checkpoint.
func (w *agentWriter) state() {
	msgs := []map[string]any{{"type": "human", "content": w.prompt, "id": "conf-human-1"}}
	msgs = append(msgs, w.said...)
	w.event("values", "", map[string]any{"messages": msgs})
	w.event("checkpoints", "", map[string]any{"id": "conf-cp-1", "parent_id": "conf-cp-0", "step": 0, "source": "loop"})
}

// mediaType is the content block type of a mime type.
func mediaType(mime string) string {
	for _, t := range []string{"image", "audio", "video"} {
		if strings.HasPrefix(mime, t+"/") {
			return t
		}
	}
	return "file"
}

func (w *agentWriter) startBlock(bs *canonical.BlockStart) {
	if !w.msgOpen {
		w.startMessage("", "")
	}
	b := &agentBlock{typ: bs.GetType(), index: w.index, id: bs.GetId(), name: bs.GetName(), mime: bs.GetMime(), ref: bs.GetRef()}
	w.index++
	w.blk = b
	var content map[string]any
	switch b.typ {
	case canonical.BlockText:
		content = map[string]any{"type": "text", "text": ""}
	case canonical.BlockReasoning:
		content = map[string]any{"type": "reasoning", "reasoning": ""}
	case canonical.BlockToolCall:
		content = map[string]any{"type": "tool_call_chunk", "id": b.id, "name": b.name, "args": ""}
		w.calls = true
	default: // data and ref
		content = b.media()
	}
	w.event("messages", "agent", map[string]any{"event": "content-block-start", "index": b.index, "content": content})
}

// media is a data or ref block's content: the media type, its mime type,
// and the url of a ref (a data block's base64 comes in deltas).
func (b *agentBlock) media() map[string]any {
	c := map[string]any{"type": mediaType(b.mime)}
	if b.mime != "" {
		c["mime_type"] = b.mime
	}
	if b.typ == canonical.BlockRef {
		c["url"] = b.ref
	}
	return c
}

func (w *agentWriter) delta(d *canonical.BlockDelta, delay bool) {
	b := w.blk
	if b == nil {
		return
	}
	delta := func(m map[string]any) {
		w.delayed("messages", "agent", map[string]any{"event": "content-block-delta", "index": b.index, "delta": m}, delay)
		delay = false // one delay per canonical delta
	}
	switch b.typ {
	case canonical.BlockText:
		b.text = append(b.text, d.GetText()...)
		delta(map[string]any{"type": "text-delta", "text": d.GetText()})
	case canonical.BlockReasoning:
		b.text = append(b.text, d.GetText()...)
		delta(map[string]any{"type": "reasoning-delta", "reasoning": d.GetText()})
	case canonical.BlockToolCall:
		b.text = append(b.text, d.GetText()...)
		delta(map[string]any{"type": "tool-call-delta", "args": d.GetText()})
	case canonical.BlockData:
		b.data = append(b.data, d.GetData()...)
		data := d.GetData()
		for len(data) > 0 {
			k := min(len(data), agentDataSlice)
			delta(map[string]any{"type": "data-delta", "data": base64.StdEncoding.EncodeToString(data[:k]), "encoding": "base64"})
			data = data[k:]
		}
	}
}

// finishBlock finishes the open block with its finalized content.
func (w *agentWriter) finishBlock() {
	b := w.blk
	if b == nil {
		return
	}
	w.blk = nil
	var content map[string]any
	switch b.typ {
	case canonical.BlockText:
		content = map[string]any{"type": "text", "text": string(b.text)}
		w.said[len(w.said)-1]["content"] = w.said[len(w.said)-1]["content"].(string) + string(b.text)
	case canonical.BlockReasoning:
		content = map[string]any{"type": "reasoning", "reasoning": string(b.text)}
	case canonical.BlockToolCall:
		args := bytes.TrimSpace(b.text)
		if len(args) == 0 {
			args = []byte("{}")
		}
		// Valid as encoding/json judged it: repeated names and invalid
		// UTF-8 pass.
		if json.Value(args).IsValid(json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true)) && args[0] == '{' {
			content = map[string]any{"type": "tool_call", "id": b.id, "name": b.name, "args": json.Value(args)}
		} else {
			content = map[string]any{"type": "invalid_tool_call", "id": b.id, "name": b.name, "args": string(b.text),
				"error": "the arguments are not a JSON object"}
		}
	default:
		content = b.media()
		if b.typ == canonical.BlockData {
			content["base64"] = base64.StdEncoding.EncodeToString(b.data)
		}
	}
	w.event("messages", "agent", map[string]any{"event": "content-block-finish", "index": b.index, "content": content})
}

// step appends the lines of one canonical event.
func (w *agentWriter) step(st Step) {
	switch k := st.Event.GetKind().(type) {
	case *canonical.KindLifecycle:
		if k.Lifecycle.GetStatus() == canonical.StatusRunning {
			w.event("lifecycle", "", map[string]any{"event": "running", "graph_name": AgentGraph})
			w.event("values", "", map[string]any{"messages": []map[string]any{{"type": "human", "content": w.prompt, "id": "conf-human-1"}}})
			w.event("checkpoints", "", map[string]any{"id": "conf-cp-0", "step": -1, "source": "input"})
		}
	case *canonical.KindMessageStart:
		w.finishMessage("stop")
		w.startMessage(k.MessageStart.GetMessageId(), k.MessageStart.GetRole())
	case *canonical.KindBlockStart:
		w.finishBlock()
		w.startBlock(k.BlockStart)
	case *canonical.KindBlockDelta:
		w.delta(k.BlockDelta, st.Delta)
	case *canonical.KindBlockFinish:
		w.finishBlock()
	case *canonical.KindMessageFinish:
		w.finishMessage(agentReason(k.MessageFinish.GetFinishReason()))
	case *canonical.KindToolStarted:
		t := k.ToolStarted
		data := map[string]any{"event": "tool-started", "tool_call_id": t.GetToolCallId(), "tool_name": t.GetName()}
		if t.GetInput() != nil {
			data["input"] = value(t.GetInput())
		}
		w.event("tools", "tools", data)
	case *canonical.KindToolOutput:
		w.event("tools", "tools", map[string]any{"event": "tool-output-delta", "tool_call_id": k.ToolOutput.GetToolCallId(), "delta": k.ToolOutput.GetDelta()})
	case *canonical.KindToolFinished:
		w.event("tools", "tools", map[string]any{"event": "tool-finished", "tool_call_id": k.ToolFinished.GetToolCallId(), "output": value(k.ToolFinished.GetOutput())})
	case *canonical.KindToolFailed:
		e := canonical.FromProto(k.ToolFailed.GetError())
		w.event("tools", "tools", map[string]any{"event": "tool-error", "tool_call_id": k.ToolFailed.GetToolCallId(), "message": e.Message, "code": e.Code.String()})
	case *canonical.KindError:
		// A model call failing: the messages channel's error event, which
		// ends the open message.
		e := canonical.FromProto(k.Error)
		w.finishBlock()
		w.event("messages", "agent", map[string]any{"event": "error", "message": e.Message, "code": e.Code.String()})
		w.msgOpen = false
	}
}
