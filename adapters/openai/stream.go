package openai

import (
	"bytes"
	"cmp"
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// upCall is what the decoder knows of one upstream tool call (by index).
type upCall struct {
	id, name string
	args     []byte // all fragments so far (for the repeat check)
	held     []byte // fragments before the name came: sent when it does
	open     bool   // its canonical block was opened
	dup      bool   // a repeat of an earlier call (same id at another index): dropped
}

// streamDecoder turns an upstream chat.completion.chunk stream, fed in
// chunks cut anywhere, into canonical events (Feed and End, STYLE section
// 5), tolerating the variants of reference section 8. Only choice 0 is
// read (the backend asks for one). One per stream; not safe for
// concurrent use.
type streamDecoder struct {
	p        sse.Parser
	b        *canonical.Builder
	model    string
	evs      []sse.Event
	started  bool
	calls    map[int]*upCall
	ids      map[string]bool
	cur      int // index of the call whose block is open, -1 if none
	maxArgs  int
	argBytes int
	finish   string // the first finish_reason seen; "" before
	refusal  bool   // a refusal delta came
	use      *canonical.Usage
	// chunk is the chunk being read, reused: Unmarshal zeroes the choices
	// it decodes into, and its strings come from the library's cache, so
	// a text delta's chunk allocates nothing (615 ns against 860 with a
	// new inChunk of pointers each time).
	chunk inChunk
}

func newStreamDecoder(maxEventBytes, maxArgBytes int, model, msgPrefix string) *streamDecoder {
	d := &streamDecoder{b: canonical.NewBuilder(), model: model, calls: map[int]*upCall{}, ids: map[string]bool{}, cur: -1, maxArgs: maxArgBytes}
	d.b.MessageID = msgPrefix
	d.p.MaxEventBytes = maxEventBytes
	d.p.BorrowData = true
	d.p.DispatchIncompleteAtEnd = true // [DONE] without its blank line (llama.cpp)
	return d
}

// Ended reports whether the terminal event has been produced.
func (d *streamDecoder) Ended() bool { return d.b.Ended() }

// Feed takes a chunk cut anywhere and appends the events it completes.
func (d *streamDecoder) Feed(chunk []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	if d.b.Ended() {
		return out, nil
	}
	var err error
	d.evs, err = d.p.Feed(chunk, d.evs[:0])
	return d.dispatch(out, err)
}

func (d *streamDecoder) dispatch(out []*canonical.Event, perr error) ([]*canonical.Event, error) {
	for i := range d.evs {
		if d.b.Ended() {
			break
		}
		var e *canonical.Error
		if out, e = d.event(&d.evs[i], out); e != nil {
			return out, e
		}
	}
	if perr != nil && !d.b.Ended() {
		return out, canonical.AsError(perr)
	}
	return out, nil
}

// End takes the end of the body: after a finish_reason it completes the
// run ([DONE] may be missing); before one the stream was cut off, never a
// completed run (reference 10.2).
func (d *streamDecoder) End(out []*canonical.Event) ([]*canonical.Event, error) {
	if d.b.Ended() {
		return out, nil
	}
	var err error
	d.evs, err = d.p.End(d.evs[:0])
	if out, err = d.dispatch(out, err); err != nil || d.b.Ended() {
		return out, err
	}
	if d.finish != "" {
		return d.complete(out)
	}
	return out, canonical.Errorf(canonical.CodeUnavailable, "openai backend: upstream stream truncated (no finish_reason)")
}

// Fail ends the run failed with err.
func (d *streamDecoder) Fail(out []*canonical.Event, err error) []*canonical.Event {
	return d.b.End(out, canonical.StatusFailed, canonical.AsError(err))
}

// chunkJSON reads an upstream's chunks as servers write them: invalid
// UTF-8 kept as U+FFFD, a repeated member allowed. Joined once, not per
// chunk.
var chunkJSON = json.JoinOptions(json.AllowInvalidUTF8(true), json.AllowDuplicateNames(true))

// event decodes one SSE event: [DONE], an error (an "error" event, an
// object with a non-null error member, a flat {"object":"error"}), or a
// chunk.
func (d *streamDecoder) event(ev *sse.Event, out []*canonical.Event) ([]*canonical.Event, *canonical.Error) {
	data := bytes.TrimSpace(ev.Data)
	if bytes.HasPrefix(data, []byte("[DONE]")) {
		return d.complete(out)
	}
	if len(data) == 0 && ev.Event != "error" {
		return out, nil
	}
	d.chunk = inChunk{Choices: d.chunk.Choices[:0]}
	c := &d.chunk
	if err := json.Unmarshal(data, c, chunkJSON); err != nil {
		if ev.Event == "error" { // old llama.cpp: "error:" or "event: error" with text
			return d.b.End(out, canonical.StatusFailed, canonical.WireError(canonical.CodeInternal, trimMessage(string(data)))), nil
		}
		return out, canonical.Errorf(canonical.CodeInternal, "openai backend: malformed chunk from the upstream: %v", err)
	}
	if e := chunkError(c, ev.Event == "error"); e != nil {
		return d.b.End(out, canonical.StatusFailed, e), nil
	}
	if c.Usage != nil {
		d.use = usageOf(c.Usage)
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		var e *canonical.Error
		if out, e = d.choice(c, ch, out); e != nil {
			return out, e
		}
	}
	return out, nil
}

// chunkError is the error an object carries, or nil.
func chunkError(c *inChunk, errorEvent bool) *canonical.Error {
	switch k := c.Error.Kind(); {
	case k == '{':
		var ie inError
		_ = json.Unmarshal(c.Error, &ie, json.AllowInvalidUTF8(true))
		return canonical.WireError(codeOfWire(ie.Code, ie.Type, 0), trimMessage(cmp.Or(ie.Message, ie.Type, "upstream error")))
	case k == '"':
		var s string
		_ = json.Unmarshal(c.Error, &s, json.AllowInvalidUTF8(true))
		return canonical.WireError(canonical.CodeInternal, trimMessage(cmp.Or(s, "upstream error")))
	case c.Object == "error" || errorEvent:
		return canonical.WireError(codeOfWire(c.Code, c.Type, 0), trimMessage(cmp.Or(c.Message, c.Type, "upstream error")))
	}
	return nil
}

// usageOf is a canonical usage of CompletionUsage.
func usageOf(u *inUsage) *canonical.Usage {
	cu := &canonical.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		ReasoningTokens: u.ReasoningTokens}
	if u.PromptTokensDetails != nil {
		cu.CacheReadTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil && u.CompletionTokensDetails.ReasoningTokens != 0 {
		cu.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	if cu.TotalTokens == 0 {
		cu.TotalTokens = cu.InputTokens + cu.OutputTokens
	}
	return cu
}

// begin opens the canonical message at the first choice.
func (d *streamDecoder) begin(c *inChunk, out []*canonical.Event) []*canonical.Event {
	if d.started {
		return out
	}
	d.started = true
	out = d.b.StartMessage(out, c.ID, "assistant")
	out[len(out)-1].GetMessageStart().Metadata = map[string]*structpb.Value{
		"provider": structpb.NewStringValue("openai"), "model": structpb.NewStringValue(cmp.Or(c.Model, d.model))}
	return out
}

// choice reads choice 0's delta and finish_reason.
func (d *streamDecoder) choice(c *inChunk, ch *inChoice, out []*canonical.Event) ([]*canonical.Event, *canonical.Error) {
	out = d.begin(c, out)
	dl := &ch.Delta
	if r := cmp.Or(dl.ReasoningContent, dl.Reasoning); r != "" {
		out = d.b.Reasoning(d.closeCall(out), r)
	}
	if dl.Content != "" {
		out = d.b.Text(d.closeCall(out), dl.Content)
	}
	if dl.Refusal != "" {
		out = d.b.Text(d.closeCall(out), dl.Refusal)
		d.refusal = true
	}
	for i := range dl.ToolCalls {
		var e *canonical.Error
		if out, e = d.toolDelta(&dl.ToolCalls[i], i, out); e != nil {
			return out, e
		}
	}
	if ch.FinishReason != "" && d.finish == "" {
		d.finish = ch.FinishReason
	}
	return out, nil
}

// toolDelta merges one tool-call delta by index (reference 10.2): id,
// type and name first non-empty wins, arguments appended, a fragment
// equal to the whole arguments after the finish dropped (LiteLLM's
// summary chunk), a call repeating an earlier call's id dropped (LocalAI).
func (d *streamDecoder) toolDelta(tc *inCallDelta, pos int, out []*canonical.Event) ([]*canonical.Event, *canonical.Error) {
	idx := pos
	if tc.Index != nil {
		idx = *tc.Index
	}
	uc := d.calls[idx]
	if uc == nil {
		if idx < 0 || len(d.calls) >= 1024 {
			return out, canonical.Errorf(canonical.CodeInternal, "openai backend: tool call index %d is invalid (or over 1024 calls)", idx)
		}
		uc = &upCall{}
		d.calls[idx] = uc
		if tc.ID != "" && d.ids[tc.ID] {
			uc.dup = true
		}
	}
	if uc.dup {
		return out, nil
	}
	if uc.id == "" && tc.ID != "" {
		uc.id = tc.ID
		d.ids[tc.ID] = true
	}
	frag, e := argText(tc)
	if e != nil {
		return out, e
	}
	if uc.name == "" && tc.Function != nil && tc.Function.Name != "" {
		uc.name = tc.Function.Name
	}
	if d.finish != "" && frag != "" && frag == string(uc.args) {
		return out, nil
	}
	d.argBytes += len(frag)
	if d.argBytes > d.maxArgs {
		return out, canonical.Errorf(canonical.CodeResourceExhausted, "openai backend: tool call arguments exceed max_tool_args_bytes (%d)", d.maxArgs)
	}
	uc.args = append(uc.args, frag...)
	if uc.name == "" {
		uc.held = append(uc.held, frag...)
		return out, nil
	}
	if !uc.open {
		out = d.closeCall(out)
		uc.open = true
		d.cur = idx
		out = d.b.ToolCall(out, cmp.Or(uc.id, "call_"+strconv.Itoa(idx)), uc.name)
		frag = string(uc.held) + frag
		uc.held = nil
	} else if d.cur != idx {
		return out, canonical.Errorf(canonical.CodeInternal, "openai backend: tool call %d's arguments continued after another block started", idx)
	}
	return d.b.ToolArgs(out, frag), nil
}

// closeCall leaves the open tool call's block to what comes next: a call
// that got no arguments gets {}.
func (d *streamDecoder) closeCall(out []*canonical.Event) []*canonical.Event {
	if d.cur == -1 {
		return out
	}
	if len(d.calls[d.cur].args) == 0 {
		out = d.b.ToolArgs(out, "{}")
	}
	d.cur = -1
	return out
}

// argText is a delta's arguments fragment: a JSON string, or an object
// sent whole (some servers), as its text.
func argText(tc *inCallDelta) (string, *canonical.Error) {
	if tc.Function == nil {
		return "", nil
	}
	a := tc.Function.Arguments
	switch a.Kind() {
	case 0, 'n':
		return "", nil
	case '"':
		var s string
		if err := json.Unmarshal(a, &s, json.AllowInvalidUTF8(true)); err != nil {
			return "", canonical.Errorf(canonical.CodeInternal, "openai backend: tool call arguments: %v", err)
		}
		return s, nil
	case '{':
		return string(a), nil
	}
	return "", canonical.Errorf(canonical.CodeInternal, "openai backend: tool call arguments are %s, not a string", a.Kind())
}

// finishReasonOf is the canonical finish of a finish_reason.
func finishReasonOf(s string) canonical.FinishReason {
	switch s {
	case "stop", "":
		return canonical.FinishStop
	case "length":
		return canonical.FinishLength
	case "tool_calls", "function_call":
		return canonical.FinishToolCalls
	case "content_filter":
		return canonical.FinishContentFilter
	}
	return canonical.FinishOther // sglang's abort and later additions
}

// complete ends the run completed: calls that never got a name fail it,
// calls without arguments get {}.
func (d *streamDecoder) complete(out []*canonical.Event) ([]*canonical.Event, *canonical.Error) {
	unnamed := -1
	for idx, uc := range d.calls {
		if !uc.dup && uc.name == "" && (unnamed == -1 || idx < unnamed) {
			unnamed = idx
		}
	}
	if unnamed != -1 {
		return out, canonical.Errorf(canonical.CodeInternal, "openai backend: tool call %d has no function.name", unnamed)
	}
	out = d.closeCall(out)
	out = d.begin(&inChunk{}, out)
	reason := finishReasonOf(d.finish)
	if d.refusal && reason == canonical.FinishStop {
		reason = canonical.FinishContentFilter
	}
	out = d.b.FinishMessage(out, reason, d.use)
	if len(out) > 0 && d.finish != "" {
		if mf := out[len(out)-1].GetMessageFinish(); mf != nil {
			out[len(out)-1].Extensions = map[string]*structpb.Value{ExtFinishReason: structpb.NewStringValue(d.finish)}
		}
	}
	return d.b.End(out, canonical.StatusCompleted, nil), nil
}

// ExtFinishReason is the upstream's finish_reason as sent, on the
// MessageFinish event.
const ExtFinishReason = "openai.finish_reason"
