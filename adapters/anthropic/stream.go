package anthropic

import (
	"bytes"
	"cmp"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// upBlock is what the decoder knows of one upstream content block.
type upBlock struct {
	kind  string // kindText, kindThinking, kindRedacted, kindToolUse, kindServer, kindSkip
	id    string
	name  string
	start string // a tool_use start's input, when not {}
	args  []byte // a tool_use's input_json_delta fragments, for the check at its stop
	sig   string // a thinking block's signature (replaced, never appended)
	data  string // a redacted_thinking block's data
	done  bool
}

// streamDecoder turns an upstream Messages event stream, fed in chunks cut
// anywhere, into canonical events (Feed and End, STYLE section 5). It
// dispatches on the data's type, not the event name; ping, unknown types
// and data that is not an object (OpenRouter's [DONE]) are ignored. One
// per stream; not safe for concurrent use.
type streamDecoder struct {
	p        sse.Parser
	b        *canonical.Builder
	model    string
	evs      []sse.Event
	blocks   map[int]*upBlock
	cur      int // index of the block open in the canonical stream, -1 if none
	maxArgs  int
	argBytes int

	use          canonical.Usage
	stopReason   string
	stopSequence string

	// ev is the event being read, reused, its Index pointing at index:
	// Unmarshal writes a present index there rather than allocate one, so
	// a text delta's event allocates nothing. index is -1 before each
	// read, which an absent index leaves it, and which reads as invalid
	// as nil (a null index) does.
	ev    streamEvent
	index int
}

func newStreamDecoder(maxEventBytes, maxArgBytes int, model, msgPrefix string) *streamDecoder {
	d := &streamDecoder{b: canonical.NewBuilder(), model: model, blocks: map[int]*upBlock{}, cur: -1, maxArgs: maxArgBytes}
	d.b.MessageID = msgPrefix
	d.p.MaxEventBytes = maxEventBytes
	d.p.BorrowData = true
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
	for _, ev := range d.evs {
		if d.b.Ended() {
			break
		}
		var e *canonical.Error
		if out, e = d.event(ev.Data, out); e != nil {
			return out, e
		}
	}
	if err != nil {
		return out, canonical.AsError(err)
	}
	return out, nil
}

// End takes the end of the body: a stream without message_stop was cut
// off, never a completed run (reference 11.2).
func (d *streamDecoder) End(out []*canonical.Event) ([]*canonical.Event, error) {
	if d.b.Ended() {
		return out, nil
	}
	var err error
	d.evs, err = d.p.End(d.evs[:0])
	for _, ev := range d.evs {
		var e *canonical.Error
		if out, e = d.event(ev.Data, out); e != nil {
			return out, e
		}
	}
	if err != nil {
		return out, canonical.AsError(err)
	}
	if d.b.Ended() {
		return out, nil
	}
	return out, canonical.Errorf(canonical.CodeUnavailable, "anthropic backend: upstream stream truncated (no message_stop)")
}

// Fail ends the run failed with err.
func (d *streamDecoder) Fail(out []*canonical.Event, err error) []*canonical.Event {
	return d.b.End(out, canonical.StatusFailed, canonical.AsError(err))
}

// eventJSON reads an upstream's events as servers write them, as the
// OpenAI backend reads its chunks: invalid UTF-8, and a lone surrogate
// escape (Python's json.dumps writes one for whatever a str holds, and
// gateways in Python serve this API too), kept as U+FFFD rather than
// failing the run; a repeated member allowed, the last taken, as Python's
// json takes it. Joined once, not per event.
var eventJSON = json.JoinOptions(json.AllowInvalidUTF8(true), json.AllowDuplicateNames(true))

// event decodes one SSE event's data.
func (d *streamDecoder) event(data []byte, out []*canonical.Event) ([]*canonical.Event, *canonical.Error) {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return out, nil // [DONE] and other non-objects
	}
	d.index = -1
	d.ev = streamEvent{Index: &d.index}
	ev := &d.ev
	if err := json.Unmarshal(data, ev, eventJSON); err != nil {
		return out, canonical.Errorf(canonical.CodeInternal, "anthropic backend: malformed event from the upstream: %v", err)
	}
	switch ev.Type {
	case "message_start":
		return d.messageStart(ev, out), nil
	case "content_block_start":
		return d.blockStart(ev, out)
	case "content_block_delta":
		return d.blockDelta(ev, out)
	case "content_block_stop":
		return d.blockStop(ev, out)
	case "message_delta":
		if ev.Delta.StopReason != nil {
			d.stopReason = *ev.Delta.StopReason
		}
		if ev.Delta.StopSequence != nil {
			d.stopSequence = *ev.Delta.StopSequence
		}
		d.usage(ev.Usage)
	case "message_stop":
		return d.messageStop(out), nil
	case "error":
		return d.upstreamError(ev, out), nil
	case "":
		if ev.Error != nil { // a gateway's error object in OpenAI's form, without Anthropic's type
			return d.upstreamError(ev, out), nil
		}
	}
	return out, nil // ping and types added later
}

// messageStart opens the canonical message.
func (d *streamDecoder) messageStart(ev *streamEvent, out []*canonical.Event) []*canonical.Event {
	id, model := "", d.model
	if m := ev.Message; m != nil {
		id = m.ID
		if m.Model != "" {
			model = m.Model
		}
		d.usage(m.Usage)
	}
	out = d.b.StartMessage(out, id, "assistant")
	ms := out[len(out)-1].GetMessageStart()
	ms.Metadata = map[string]*structpb.Value{"provider": structpb.NewStringValue("anthropic"), "model": structpb.NewStringValue(model)}
	if ev.Message != nil && ev.Message.Usage != nil {
		ms.Usage = proto.CloneOf(&d.use)
	}
	return out
}

// usage overwrites the totals with each count present (reference 4:
// cumulative totals, never added).
func (d *streamDecoder) usage(u *inUsage) {
	if u == nil {
		return
	}
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	var in, cc, cr int64 = d.use.InputTokens - d.use.CacheCreationTokens - d.use.CacheReadTokens, d.use.CacheCreationTokens, d.use.CacheReadTokens
	set(&in, u.InputTokens)
	set(&cc, u.CacheCreationInputTokens)
	set(&cr, u.CacheReadInputTokens)
	set(&d.use.OutputTokens, u.OutputTokens)
	d.use.CacheCreationTokens, d.use.CacheReadTokens = cc, cr
	d.use.InputTokens = in + cc + cr // the whole prompt (reference 3)
	d.use.TotalTokens = d.use.InputTokens + d.use.OutputTokens
}

// index reads an event's block index.
func index(ev *streamEvent) (int, *canonical.Error) {
	if ev.Index == nil || *ev.Index < 0 {
		return 0, canonical.Errorf(canonical.CodeInternal, "anthropic backend: %s without a valid index", ev.Type)
	}
	return *ev.Index, nil
}

// blockStart opens a canonical block for an upstream block.
func (d *streamDecoder) blockStart(ev *streamEvent, out []*canonical.Event) ([]*canonical.Event, *canonical.Error) {
	i, e := index(ev)
	if e != nil {
		return out, e
	}
	if _, dup := d.blocks[i]; dup || len(d.blocks) >= 1<<16 {
		return out, canonical.Errorf(canonical.CodeInternal, "anthropic backend: content_block_start for index %d twice (or too many blocks)", i)
	}
	cb := ev.ContentBlock
	if cb == nil {
		return out, canonical.Errorf(canonical.CodeInternal, "anthropic backend: content_block_start %d without a content_block", i)
	}
	ub := &upBlock{id: cb.ID, name: cb.Name, sig: cb.Signature, data: cb.Data}
	d.blocks[i] = ub
	switch cb.Type {
	case "text":
		ub.kind = kindText
	case "thinking":
		ub.kind = kindThinking
	case "redacted_thinking":
		ub.kind = kindRedacted
	case kindToolUse, kindServer: // the kinds are the wire's block types
		ub.kind = cb.Type
		if in := bytes.TrimSpace(cb.Input); len(in) > 0 && string(in) != "{}" {
			ub.start = string(in)
		}
	default: // server tools' results, citations' kin: not carried
		ub.kind = kindSkip
		return out, nil
	}
	out = d.open(i, ub, out)
	switch {
	case ub.kind == kindText && cb.Text != nil:
		out = d.b.Text(out, *cb.Text)
	case ub.kind == kindThinking && cb.Thinking != nil:
		out = d.b.Reasoning(out, *cb.Thinking)
	}
	return out, nil
}

// open starts block i's canonical block (again, when an upstream
// interleaves deltas of blocks that are still open: canonical blocks
// follow one another, so the rest goes into a new block of the same type).
func (d *streamDecoder) open(i int, ub *upBlock, out []*canonical.Event) []*canonical.Event {
	d.cur = i
	switch ub.kind {
	case kindText:
		return d.b.StartBlock(out, canonical.BlockText, "", "", "", "")
	case kindThinking:
		return d.b.StartBlock(out, canonical.BlockReasoning, "", "", "", "")
	case kindRedacted:
		out = d.b.StartBlock(out, canonical.BlockReasoning, "", "", "", "")
		out[len(out)-1].Extensions = map[string]*structpb.Value{ExtRedacted: structpb.NewStringValue(ub.data)}
		return out
	case kindToolUse:
		return d.b.ToolCall(out, ub.id, ub.name)
	case kindServer:
		out = d.b.ToolCall(out, ub.id, ub.name)
		out[len(out)-1].Extensions = map[string]*structpb.Value{ExtServerTool: structpb.NewBoolValue(true)}
		return out
	}
	return out
}

// block returns the open upstream block of an event's index.
func (d *streamDecoder) block(ev *streamEvent) (int, *upBlock, *canonical.Error) {
	i, e := index(ev)
	if e != nil {
		return 0, nil, e
	}
	ub := d.blocks[i]
	if ub == nil || ub.done {
		return 0, nil, canonical.Errorf(canonical.CodeInternal, "anthropic backend: %s for index %d, which is not open", ev.Type, i)
	}
	return i, ub, nil
}

// blockDelta appends a delta of the block's own type; others are ignored
// (as the TypeScript SDK ignores them).
func (d *streamDecoder) blockDelta(ev *streamEvent, out []*canonical.Event) ([]*canonical.Event, *canonical.Error) {
	i, ub, e := d.block(ev)
	if e != nil || ub.kind == kindSkip {
		return out, e
	}
	dl := &ev.Delta
	if dl.Type == "signature_delta" && ub.kind == kindThinking {
		ub.sig = dl.Signature
		return out, nil
	}
	var s string
	switch {
	case dl.Type == "text_delta" && ub.kind == kindText:
		s = dl.Text
	case dl.Type == "thinking_delta" && ub.kind == kindThinking:
		s = dl.Thinking
	case dl.Type == "input_json_delta" && (ub.kind == kindToolUse || ub.kind == kindServer):
		s = dl.PartialJSON
		d.argBytes += len(s)
		if d.argBytes > d.maxArgs {
			return out, canonical.Errorf(canonical.CodeResourceExhausted, "anthropic backend: tool input exceeds max_tool_input_bytes (%d)", d.maxArgs)
		}
		ub.args = append(ub.args, s...)
	default:
		return out, nil
	}
	if s == "" {
		return out, nil
	}
	if d.cur != i {
		out = d.open(i, ub, out)
	}
	switch ub.kind {
	case kindText:
		out = d.b.Text(out, s)
	case kindThinking:
		out = d.b.Reasoning(out, s)
	default:
		out = d.b.ToolArgs(out, s)
	}
	return out, nil
}

// blockStop closes a block: a tool_use's input is checked (empty is {}),
// a thinking block's signature goes on its finish.
func (d *streamDecoder) blockStop(ev *streamEvent, out []*canonical.Event) ([]*canonical.Event, *canonical.Error) {
	i, ub, e := d.block(ev)
	if e != nil {
		return out, e
	}
	ub.done = true
	if ub.kind == kindSkip {
		return out, nil
	}
	if ub.kind == kindToolUse || ub.kind == kindServer {
		args := ub.args
		if len(bytes.TrimSpace(args)) == 0 {
			args = []byte(cmp.Or(ub.start, "{}"))
			if d.cur != i {
				out = d.open(i, ub, out)
			}
			out = d.b.ToolArgs(out, string(args))
		}
		if v := json.Value(bytes.TrimSpace(args)); v.Kind() != '{' || !json.Valid(v) {
			return out, canonical.Errorf(canonical.CodeInternal, "anthropic backend: the input of tool call %s (%s) is not a JSON object", ub.id, ub.name)
		}
		d.argBytes -= len(ub.args)
		ub.args = nil
	}
	if d.cur != i {
		return out, nil // its canonical block was closed by a later one
	}
	d.cur = -1
	out = d.b.FinishBlock(out)
	if ub.kind == kindThinking && ub.sig != "" {
		out[len(out)-1].Extensions = map[string]*structpb.Value{ExtSignature: structpb.NewStringValue(ub.sig)}
	}
	return out, nil
}

// finishReasonOf is the canonical finish of a stop_reason.
func finishReasonOf(s string) canonical.FinishReason {
	switch s {
	case "end_turn", "stop_sequence", "":
		return canonical.FinishStop
	case "max_tokens", "model_context_window_exceeded":
		return canonical.FinishLength
	case "tool_use":
		return canonical.FinishToolCalls
	case "refusal":
		return canonical.FinishContentFilter
	}
	return canonical.FinishOther // pause_turn and later additions
}

// messageStop ends the run completed.
func (d *streamDecoder) messageStop(out []*canonical.Event) []*canonical.Event {
	use := &canonical.Usage{InputTokens: d.use.InputTokens, OutputTokens: d.use.OutputTokens, TotalTokens: d.use.TotalTokens,
		CacheReadTokens: d.use.CacheReadTokens, CacheCreationTokens: d.use.CacheCreationTokens}
	n := len(out)
	out = d.b.FinishMessage(out, finishReasonOf(d.stopReason), use)
	if len(out) > n && d.stopReason != "" {
		ext := map[string]*structpb.Value{ExtStopReason: structpb.NewStringValue(d.stopReason)}
		if d.stopSequence != "" {
			ext[ExtStopSequence] = structpb.NewStringValue(d.stopSequence)
		}
		out[len(out)-1].Extensions = ext
	}
	return d.b.End(out, canonical.StatusCompleted, nil)
}

// upstreamError ends the run failed with the error event's type and
// message.
func (d *streamDecoder) upstreamError(ev *streamEvent, out []*canonical.Event) []*canonical.Event {
	t, msg := "", "upstream error"
	if ev.Error != nil {
		t = ev.Error.Type
		msg = cmp.Or(ev.Error.Message, t)
	}
	return d.b.End(out, canonical.StatusFailed, canonical.WireError(codeOf(0, t), msg))
}
