package anthropic

import (
	"cmp"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// sink takes the wire events the encoder makes: the SSE writer (stream)
// or the message accumulator (non-streaming).
type sink interface {
	event(name string, v any) error
}

// Wire block kinds the encoder tracks.
const (
	kindNone     = ""
	kindText     = "text"
	kindThinking = "thinking"
	kindRedacted = "redacted_thinking"
	kindToolUse  = "tool_use"
	kindServer   = "server_tool_use" // a call the bridge runs: no client answers it
	kindSkip     = "skip"            // a canonical block this wire cannot carry (data, ref)
)

// encoder turns one run's canonical events into Messages stream events:
// one message for the whole run (the root namespace's messages join, as
// a server-tool turn does), blocks strictly one after another. Not safe
// for concurrent use.
type encoder struct {
	out   sink
	id    string
	model string
	run   string

	started bool   // message_start written
	next    int    // wire index of the next block
	kind    string // of the open block; kindNone when none is open
	args    bool   // the open tool_use block got arguments

	stopReason, stopSeq string
	clientTools         map[string]bool // the tools the request declared
	thinking            bool            // the request enabled thinking
	clientCall          bool            // a tool_use of the message being rendered
	use                 canonical.Usage
	startUse            *canonical.Usage // the first message's, at its start

	// deltas are the content_block_delta events the encoder writes, reused:
	// a sink is done with an event when event returns, and a pointer in an
	// interface is not a copy on the heap, as a struct is (two of a text
	// delta's six allocations).
	deltas deltaEvents
}

// deltaEvents is an encoder's one content_block_delta and one delta of
// each kind it points at.
type deltaEvents struct {
	ev       blockDeltaEvent
	text     textDelta
	thinking thinkingDelta
	json     inputJSONDelta
}

// newEncoder makes an encoder of a run whose request declared the tools
// clientTools names and enabled thinking or not.
func newEncoder(out sink, model string, clientTools map[string]bool, thinking bool) *encoder {
	return &encoder{out: out, model: model, clientTools: clientTools, thinking: thinking}
}

// begin writes message_start once.
func (e *encoder) begin() error {
	if e.started {
		return nil
	}
	e.started = true
	if e.id == "" {
		e.id = "msg_" + e.run
	}
	return e.out.event("message_start", messageStartEvent{Type: "message_start", Message: message{
		ID: e.id, Type: "message", Role: "assistant", Model: e.model, Content: []any{}, Usage: wireUsage(e.startUse),
	}})
}

// event takes one canonical event. It reports done at the run's terminal
// event, with the run's error when it did not complete.
func (e *encoder) event(ev *canonical.Event) (done bool, fail *canonical.Error, err error) {
	if e.run == "" {
		e.run = ev.GetRunId()
	}
	if len(ev.GetNamespace()) != 0 {
		return false, nil, nil // subgraphs and nested runs are not rendered
	}
	switch k := ev.GetKind().(type) {
	case *canonical.KindMessageStart:
		if e.started {
			break
		}
		if id := k.MessageStart.GetMessageId(); e.id == "" && strings.HasPrefix(id, "msg_") {
			e.id = id
		}
		e.startUse = k.MessageStart.GetUsage()
	case *canonical.KindBlockStart:
		err = e.startBlock(k.BlockStart, ev.GetExtensions())
	case *canonical.KindBlockDelta:
		err = e.delta(k.BlockDelta)
	case *canonical.KindBlockFinish:
		err = e.stopBlock(ev.GetExtensions())
	case *canonical.KindMessageFinish:
		e.finishMessage(k.MessageFinish, ev.GetExtensions())
	case *canonical.KindLifecycle:
		return e.lifecycle(k.Lifecycle)
	}
	return false, nil, err
}

// lifecycle ends the message at the run's terminal event.
func (e *encoder) lifecycle(lc *canonical.Lifecycle) (bool, *canonical.Error, error) {
	switch lc.GetStatus() {
	case canonical.StatusCompleted, canonical.StatusInterrupted:
		return true, nil, e.end()
	case canonical.StatusFailed, canonical.StatusCancelled:
		fail := canonical.FromProto(lc.GetError())
		if fail == nil {
			fail = canonical.Errorf(canonical.CodeUnknown, "run failed")
		}
		return true, fail, nil
	}
	return false, nil, nil
}

// end writes what closes a completed run: the open block's stop,
// message_delta with the stop reason and usage, message_stop.
func (e *encoder) end() error {
	if err := e.begin(); err != nil {
		return err
	}
	if err := e.stopBlock(nil); err != nil {
		return err
	}
	reason := cmp.Or(e.stopReason, "end_turn")
	md := messageDeltaEvent{Type: "message_delta", Delta: messageDelta{StopReason: &reason}, Usage: wireUsage(&e.use)}
	if reason == "stop_sequence" && e.stopSeq != "" {
		md.Delta.StopSequence = &e.stopSeq
	}
	if err := e.out.event("message_delta", md); err != nil {
		return err
	}
	return e.out.event("message_stop", typeOnly{Type: "message_stop"})
}

// wireUsage is canonical usage in Anthropic's terms: input_tokens counts
// only what no cache served (reference section 3).
func wireUsage(u *canonical.Usage) usage {
	in := u.GetInputTokens() - u.GetCacheReadTokens() - u.GetCacheCreationTokens()
	return usage{
		InputTokens: max(in, 0), OutputTokens: u.GetOutputTokens(),
		CacheReadInputTokens: u.GetCacheReadTokens(), CacheCreationInputTokens: u.GetCacheCreationTokens(),
	}
}

// startBlock opens the wire block of a canonical block.
func (e *encoder) startBlock(bs *canonical.BlockStart, ext map[string]*structpb.Value) error {
	if err := e.stopBlock(nil); err != nil {
		return err
	}
	var block any
	switch bs.GetType() {
	case canonical.BlockText:
		e.kind, block = kindText, textBlock{Type: "text", Text: ""}
	case canonical.BlockReasoning:
		if !e.thinking {
			// Anthropic sends no thinking unasked, and clients rely on it
			// (LangChain then joins a message's text blocks into one string).
			e.kind = kindSkip
			return nil
		}
		if data := ext[ExtRedacted].GetStringValue(); data != "" {
			e.kind, block = kindRedacted, redactedBlock{Type: "redacted_thinking", Data: data}
		} else {
			e.kind, block = kindThinking, thinkingBlock{Type: "thinking", Thinking: "", Signature: ""}
		}
	case canonical.BlockToolCall:
		id := bs.GetId()
		if id == "" {
			id = "toolu_" + e.run + "_" + strconv.Itoa(e.next)
		}
		// A call of a tool the client did not declare is one the bridge
		// runs (an agent's, an XML route's action): as a tool_use the
		// client would be asked to answer it (Claude Code would try to
		// run it), so it is a server_tool_use, as Anthropic's own tools'
		// calls are.
		typ := kindToolUse
		if !e.clientTools[bs.GetName()] || ext[ExtServerTool].GetBoolValue() {
			typ = kindServer
		} else {
			e.clientCall = true
		}
		e.kind, e.args, block = typ, false, toolUseBlock{Type: typ, ID: id, Name: bs.GetName(), Input: json.Value("{}")}
	default: // data and ref: an assistant message has no such block
		e.kind = kindSkip
		return nil
	}
	if err := e.begin(); err != nil {
		return err
	}
	return e.out.event("content_block_start", blockStartEvent{Type: "content_block_start", Index: e.next, ContentBlock: block})
}

// delta writes a block delta of the open block's own delta type.
func (e *encoder) delta(bd *canonical.BlockDelta) error {
	s := bd.GetText()
	if s == "" {
		return nil
	}
	ds := &e.deltas
	var d any
	switch e.kind {
	case kindText:
		ds.text = textDelta{Type: "text_delta", Text: s}
		d = &ds.text
	case kindThinking:
		ds.thinking = thinkingDelta{Type: "thinking_delta", Thinking: s}
		d = &ds.thinking
	case kindToolUse, kindServer:
		e.args = true
		ds.json = inputJSONDelta{Type: "input_json_delta", PartialJSON: s}
		d = &ds.json
	default:
		return nil
	}
	ds.ev = blockDeltaEvent{Type: "content_block_delta", Index: e.next, Delta: d}
	return e.out.event("content_block_delta", &ds.ev)
}

// stopBlock closes the open block: a tool_use without arguments gets "{}",
// a thinking block its upstream signature (never one of ours).
func (e *encoder) stopBlock(ext map[string]*structpb.Value) error {
	kind := e.kind
	e.kind = kindNone
	switch kind {
	case kindNone:
		return nil
	case kindSkip:
		return nil
	case kindToolUse, kindServer:
		if !e.args {
			if err := e.out.event("content_block_delta", &blockDeltaEvent{Type: "content_block_delta", Index: e.next,
				Delta: &inputJSONDelta{Type: "input_json_delta", PartialJSON: "{}"}}); err != nil {
				return err
			}
		}
	case kindThinking:
		if sig := ext[ExtSignature].GetStringValue(); sig != "" {
			if err := e.out.event("content_block_delta", &blockDeltaEvent{Type: "content_block_delta", Index: e.next,
				Delta: &signatureDelta{Type: "signature_delta", Signature: sig}}); err != nil {
				return err
			}
		}
	}
	i := e.next
	e.next++
	return e.out.event("content_block_stop", blockStopEvent{Type: "content_block_stop", Index: i})
}

// finishMessage records a canonical message's finish: the last one's stop
// reason, the usage added up.
func (e *encoder) finishMessage(mf *canonical.MessageFinish, ext map[string]*structpb.Value) {
	e.stopReason, e.stopSeq = stopReasonOf(mf.GetFinishReason(), ext)
	if e.stopReason == "tool_use" && !e.clientCall {
		e.stopReason = "end_turn" // the bridge runs every call: none is the client's
	}
	e.clientCall = false
	u := mf.GetUsage()
	e.use.InputTokens += u.GetInputTokens()
	e.use.OutputTokens += u.GetOutputTokens()
	e.use.CacheReadTokens += u.GetCacheReadTokens()
	e.use.CacheCreationTokens += u.GetCacheCreationTokens()
}

// stopReasonOf is the wire stop_reason of a canonical finish (reference
// 11.1); an Anthropic upstream's own stop_reason, kept in the extension,
// passes through.
func stopReasonOf(r canonical.FinishReason, ext map[string]*structpb.Value) (string, string) {
	if s := ext[ExtStopReason].GetStringValue(); s != "" {
		return s, ext[ExtStopSequence].GetStringValue()
	}
	switch r {
	case canonical.FinishLength:
		return "max_tokens", ""
	case canonical.FinishToolCalls:
		return "tool_use", ""
	case canonical.FinishContentFilter:
		return "refusal", ""
	}
	return "end_turn", ""
}
