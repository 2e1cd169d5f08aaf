package agent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Event methods (section 5.1).
const (
	methodValues         = "values"
	methodUpdates        = "updates"
	methodMessages       = "messages"
	methodTools          = "tools"
	methodLifecycle      = "lifecycle"
	methodInputRequested = "input.requested"
	methodInputAnswered  = "input.answered"
	methodCheckpoints    = "checkpoints"
	methodTasks          = "tasks"
	methodCustom         = "custom"
)

// errorCustomName is the custom event name that carries a canonical
// non-terminal error event; the agent protocol has no such event (stated
// degradation, see doc.go).
const errorCustomName = "interlingua.error"

// wireEvent is one agent-protocol event before it enters a thread buffer:
// the envelope without seq and event_id. data is params.data as JSON; it
// points into the encoder's scratch buffer and is valid until the next
// Encode.
type wireEvent struct {
	method    string
	namespace []string
	node      string
	timeMs    int64
	data      []byte
	// custom is data.name of a custom event (its custom:<name> lane).
	custom string
	// status is the lifecycle status of a lifecycle event.
	status string
	start  int // offsets of data in the scratch buffer while encoding
	end    int
}

// rootTerminal reports whether the event ends a run for the SDK: a root
// lifecycle event with completed, failed or interrupted.
func (w *wireEvent) rootTerminal() bool {
	return w.method == methodLifecycle && len(w.namespace) == 0 &&
		(w.status == "completed" || w.status == "failed" || w.status == "interrupted")
}

// appendFrame appends the full event envelope (section 3.4) with seq and
// event_id = decimal seq.
func appendFrame(b []byte, seq uint64, w *wireEvent) []byte {
	b = append(b, `{"type":"event","event_id":"`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"method":`...)
	b = appendString(b, w.method)
	b = append(b, `,"params":{"namespace":`...)
	b = appendNamespace(b, w.namespace)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, w.timeMs, 10)
	if w.node != "" && (w.method == methodMessages || w.method == methodTools) {
		b = append(b, `,"node":`...)
		b = appendString(b, w.node)
	}
	b = append(b, `,"data":`...)
	b = append(b, w.data...)
	return append(b, "}}"...)
}

// frameSize is an upper bound of appendFrame's output for w when its strings
// need no escaping (a good first capacity).
func frameSize(w *wireEvent) int {
	n := 170 + len(w.method) + len(w.node) + len(w.data)
	for _, s := range w.namespace {
		n += len(s) + 3
	}
	return n
}

// newFrame returns the envelope of w with seq, in one allocation in the
// common case.
func newFrame(seq uint64, w *wireEvent) []byte {
	return appendFrame(make([]byte, 0, frameSize(w)), seq, w)
}

// EncoderConfig configures an Encoder.
type EncoderConfig struct {
	// GraphName is put on root lifecycle events that carry none (the
	// assistant id). Optional.
	GraphName string
	// MaxBlockBytes bounds the content of one block the encoder keeps to
	// send whole in content-block-finish. Default 16 MiB.
	MaxBlockBytes int
	// Now stamps events that carry no time. Default time.Now.
	Now func() time.Time
}

// Encoder turns one run's canonical events into agent-protocol wire events
// (section 5), following the reference's Interlingua choices: text-delta,
// reasoning-delta, data-delta (base64, cut at 3-byte boundaries so the
// slices concatenate), tool-call-delta after a tool_call_chunk start, and a
// content-block-finish carrying the finalized block, which the encoder
// assembles from the deltas (canonical BlockFinish carries only the index).
// It is not safe for concurrent use.
type Encoder struct {
	cfg     EncoderConfig
	scratch []byte
	root    nsEnc
	ns      map[string]*nsEnc
	// pendingErr is a message that ended with FinishError: its error event
	// waits for the next event, which (if it is the run's failure) supplies
	// the message and code.
	pendingErr *wireEvent
}

// nsEnc is the open block of one namespace.
type nsEnc struct {
	open  bool
	typ   canonical.BlockType
	index uint32
	id    string
	name  string
	mime  string
	ref   string
	acc   []byte // text, reasoning or tool arguments so far; all data bytes
	held  int    // data bytes not yet sent (at most 2: base64 works in 3s)
}

// NewEncoder returns an Encoder.
func NewEncoder(cfg EncoderConfig) *Encoder {
	if cfg.MaxBlockBytes <= 0 {
		cfg.MaxBlockBytes = 16 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Encoder{cfg: cfg}
}

func (e *Encoder) state(ns []string) *nsEnc {
	if len(ns) == 0 {
		return &e.root
	}
	k := strings.Join(ns, "\x00")
	s := e.ns[k]
	if s == nil {
		if e.ns == nil {
			e.ns = map[string]*nsEnc{}
		}
		s = &nsEnc{}
		e.ns[k] = s
	}
	return s
}

// begin starts a wire event whose data the caller appends to e.scratch.
func (e *Encoder) begin(out []wireEvent, method string, ev *canonical.Event) []wireEvent {
	ms := ev.GetTimeUnixNano() / 1e6
	if ms == 0 {
		ms = e.cfg.Now().UnixMilli()
	}
	return append(out, wireEvent{method: method, namespace: ev.GetNamespace(), node: ev.GetGraphNode(), timeMs: ms, start: len(e.scratch)})
}

// done closes the last wire event's data.
func (e *Encoder) done(out []wireEvent) {
	out[len(out)-1].end = len(e.scratch)
}

// Encode appends the wire events for ev to out (zero or more; usually one).
// The data of every event appended by this call stays valid until the next
// call. An error (a block larger than MaxBlockBytes: ResourceExhausted)
// leaves the run unencodable; the caller ends it.
func (e *Encoder) Encode(ev *canonical.Event, out []wireEvent) ([]wireEvent, error) {
	e.scratch = e.scratch[:0]
	first := len(out)
	if k, ok := ev.GetKind().(*canonical.KindError); ok && e.pendingErr != nil && slices.Equal(ev.GetNamespace(), e.pendingErr.namespace) {
		// The error of the message that just failed: its messages error
		// event carries it (decoders read it back as this error event).
		out = e.flushPendingError(out, &canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Error: k.Error}}})
		for i := first; i < len(out); i++ {
			out[i].data = e.scratch[out[i].start:out[i].end:out[i].end]
		}
		return out, nil
	}
	out = e.flushPendingError(out, ev)
	var err error
	out, err = e.encode(ev, out)
	for i := first; i < len(out); i++ {
		out[i].data = e.scratch[out[i].start:out[i].end:out[i].end]
	}
	return out, err
}

// Flush appends what the encoder still owes at the end of a stream that
// stopped early (a message error whose run never ended).
func (e *Encoder) Flush(out []wireEvent) []wireEvent {
	e.scratch = e.scratch[:0]
	first := len(out)
	out = e.flushPendingError(out, nil)
	for i := first; i < len(out); i++ {
		out[i].data = e.scratch[out[i].start:out[i].end:out[i].end]
	}
	return out
}

func (e *Encoder) flushPendingError(out []wireEvent, next *canonical.Event) []wireEvent {
	p := e.pendingErr
	if p == nil {
		return out
	}
	e.pendingErr = nil
	msg, code := msgModelCallFailed, canonical.CodeUnknown
	if lc := next.GetLifecycle(); lc != nil && lc.GetError() != nil {
		msg, code = lc.GetError().GetMessage(), canonical.Code(lc.GetError().GetCode())
	}
	w := *p
	w.start = len(e.scratch)
	b := append(e.scratch, `{"event":"error","message":`...)
	b = appendString(b, msg)
	b = append(b, `,"code":`...)
	b = appendString(b, code.String())
	e.scratch = append(b, '}')
	w.end = len(e.scratch)
	return append(out, w)
}

func (e *Encoder) encode(ev *canonical.Event, out []wireEvent) ([]wireEvent, error) {
	switch k := ev.GetKind().(type) {
	case *canonical.KindBlockDelta:
		return e.delta(ev, k.BlockDelta, out)
	case *canonical.KindBlockStart:
		return e.blockStart(ev, k.BlockStart, out), nil
	case *canonical.KindBlockFinish:
		return e.blockFinish(ev, k.BlockFinish, out), nil
	case *canonical.KindMessageStart:
		out = e.begin(out, methodMessages, ev)
		b := append(e.scratch, `{"event":"message-start","role":`...)
		b = appendString(b, wireRole(k.MessageStart.GetRole()))
		b = append(b, `,"id":`...)
		b = appendString(b, k.MessageStart.GetMessageId())
		if md := k.MessageStart.GetMetadata(); len(md) > 0 {
			b = append(b, `,"metadata":`...)
			b = appendFields(b, md, true)
		}
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindMessageFinish:
		mf := k.MessageFinish
		if mf.GetFinishReason() == canonical.FinishError {
			out = e.begin(out, methodMessages, ev)
			w := out[len(out)-1]
			e.pendingErr = &w
			return out[:len(out)-1], nil
		}
		out = e.begin(out, methodMessages, ev)
		b := append(e.scratch, `{"event":"message-finish"`...)
		if u := mf.GetUsage(); u != nil && (u.GetInputTokens() != 0 || u.GetOutputTokens() != 0 || u.GetTotalTokens() != 0) {
			b = append(b, `,"usage":`...)
			b = appendUsage(b, u)
		}
		if r := wireReason(mf.GetFinishReason()); r != "" {
			b = append(b, `,"reason":"`...)
			b = append(b, r...)
			b = append(b, '"')
		}
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindLifecycle:
		out = e.lifecycle(ev, k.Lifecycle, out)
	case *canonical.KindToolStarted:
		t := k.ToolStarted
		out = e.begin(out, methodTools, ev)
		b := append(e.scratch, `{"event":"tool-started","tool_call_id":`...)
		b = appendString(b, t.GetToolCallId())
		b = append(b, `,"tool_name":`...)
		b = appendString(b, t.GetName())
		if t.GetInput() != nil {
			b = append(b, `,"input":`...)
			b = appendValue(b, t.GetInput())
		}
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindToolOutput:
		out = e.begin(out, methodTools, ev)
		b := append(e.scratch, `{"event":"tool-output-delta","tool_call_id":`...)
		b = appendString(b, k.ToolOutput.GetToolCallId())
		b = append(b, `,"delta":`...)
		b = appendString(b, k.ToolOutput.GetDelta())
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindToolFinished:
		out = e.begin(out, methodTools, ev)
		b := append(e.scratch, `{"event":"tool-finished","tool_call_id":`...)
		b = appendString(b, k.ToolFinished.GetToolCallId())
		b = append(b, `,"output":`...)
		b = appendValue(b, k.ToolFinished.GetOutput())
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindToolFailed:
		t := k.ToolFailed
		out = e.begin(out, methodTools, ev)
		b := append(e.scratch, `{"event":"tool-error","tool_call_id":`...)
		b = appendString(b, t.GetToolCallId())
		b = append(b, `,"message":`...)
		b = appendString(b, t.GetError().GetMessage())
		b = append(b, `,"code":`...)
		b = appendString(b, canonical.Code(t.GetError().GetCode()).String())
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindInputRequested:
		out = e.begin(out, methodInputRequested, ev)
		b := append(e.scratch, `{"interrupt_id":`...)
		b = appendString(b, k.InputRequested.GetInterruptId())
		b = append(b, `,"payload":`...)
		b = appendValue(b, k.InputRequested.GetPayload())
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindInputAnswered:
		out = e.begin(out, methodInputAnswered, ev)
		b := append(e.scratch, `{"interrupt_ids":`...)
		b = appendNamespace(b, k.InputAnswered.GetInterruptIds())
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindStateSnapshot:
		out = e.begin(out, methodValues, ev)
		e.scratch = appendObject(e.scratch, k.StateSnapshot.GetValues())
		e.done(out)
	case *canonical.KindStateUpdate:
		out = e.begin(out, methodUpdates, ev)
		b := append(e.scratch, '{')
		if n := k.StateUpdate.GetNode(); n != "" {
			b = append(b, `"node":`...)
			b = appendString(b, n)
			b = append(b, ',')
		}
		b = append(b, `"values":`...)
		b = appendObject(b, k.StateUpdate.GetValues())
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindCheckpoint:
		c := k.Checkpoint
		out = e.begin(out, methodCheckpoints, ev)
		b := append(e.scratch, `{"id":`...)
		b = appendString(b, c.GetId())
		if c.GetParentId() != "" {
			b = append(b, `,"parent_id":`...)
			b = appendString(b, c.GetParentId())
		}
		b = append(b, `,"step":`...)
		b = strconv.AppendInt(b, c.GetStep(), 10)
		b = append(b, `,"source":"`...)
		b = append(b, checkpointSource(c.GetSource())...)
		e.scratch = append(b, `"}`...)
		e.done(out)
	case *canonical.KindTask:
		out = e.begin(out, methodTasks, ev)
		e.scratch = appendValue(e.scratch, k.Task.GetPayload())
		e.done(out)
	case *canonical.KindCustom:
		out = e.begin(out, methodCustom, ev)
		b := append(e.scratch, '{')
		if n := k.Custom.GetName(); n != "" {
			b = append(b, `"name":`...)
			b = appendString(b, n)
			b = append(b, ',')
			out[len(out)-1].custom = n
		}
		b = append(b, `"payload":`...)
		b = appendValue(b, k.Custom.GetPayload())
		e.scratch = append(b, '}')
		e.done(out)
	case *canonical.KindError:
		out = e.begin(out, methodCustom, ev)
		out[len(out)-1].custom = errorCustomName
		b := append(e.scratch, `{"name":"`+errorCustomName+`","payload":{"code":`...)
		b = appendString(b, canonical.Code(k.Error.GetCode()).String())
		b = append(b, `,"message":`...)
		b = appendString(b, k.Error.GetMessage())
		e.scratch = append(b, "}}"...)
		e.done(out)
	}
	return out, nil
}

// appendObject appends v, which should be a JSON object; nil is {}.
func appendObject(b []byte, v *structpb.Value) []byte {
	if v == nil {
		return append(b, "{}"...)
	}
	return appendValue(b, v)
}

func (e *Encoder) lifecycle(ev *canonical.Event, lc *canonical.Lifecycle, out []wireEvent) []wireEvent {
	status, errText := wireStatus(lc)
	out = e.begin(out, methodLifecycle, ev)
	out[len(out)-1].status = status
	b := append(e.scratch, `{"event":"`...)
	b = append(b, status...)
	b = append(b, '"')
	graph := lc.GetGraphName()
	if graph == "" && len(ev.GetNamespace()) == 0 {
		graph = e.cfg.GraphName
	}
	if graph != "" {
		b = append(b, `,"graph_name":`...)
		b = appendString(b, graph)
	}
	if c := lc.GetCause(); c != nil && c.GetType() != "" {
		b = append(b, `,"cause":{"type":`...)
		b = appendString(b, c.GetType())
		if c.GetType() == "toolCall" {
			b = append(b, `,"tool_call_id":`...)
			b = appendString(b, c.GetToolCallId())
		} else if c.GetFromNode() != "" || c.GetType() == "send" || c.GetType() == "edge" {
			b = append(b, `,"from_node":`...)
			b = appendString(b, c.GetFromNode())
		}
		b = append(b, '}')
	}
	if errText != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, errText)
	}
	if id := lc.GetCheckpointId(); id != "" {
		b = append(b, `,"checkpoint":{"id":`...)
		b = appendString(b, id)
		b = append(b, '}')
	}
	e.scratch = append(b, '}')
	e.done(out)
	return out
}

// cancelledPrefix marks a failed lifecycle that was a cancellation: the
// protocol's AgentStatus has no "cancelled".
const cancelledPrefix = "cancelled: "

// wireStatus maps a canonical status to AgentStatus and the error text.
// Cancelled becomes failed, with the error text prefixed "cancelled: ", so
// the SDK ends the run (it ends on completed, failed or interrupted) and
// does not mistake it for a human-in-the-loop interrupt.
func wireStatus(lc *canonical.Lifecycle) (status, errText string) {
	switch lc.GetStatus() {
	case canonical.StatusStarted:
		return "started", ""
	case canonical.StatusRunning:
		return "running", ""
	case canonical.StatusCompleted:
		return "completed", ""
	case canonical.StatusInterrupted:
		return "interrupted", ""
	case canonical.StatusCancelled:
		msg := lc.GetError().GetMessage()
		if msg == "" {
			msg = "run cancelled"
		}
		return "failed", cancelledPrefix + msg
	case canonical.StatusFailed:
		msg := lc.GetError().GetMessage()
		if msg == "" {
			msg = "run failed"
		}
		return "failed", msg
	}
	return "running", ""
}

// wireRole maps a canonical role to MessageRole ("ai", "human", "system").
// Roles the protocol has no name for (tool, and unknown ones) are sent as
// "ai": the SDK assembles only AI messages from this channel.
func wireRole(r string) string {
	switch r {
	case "user", "human":
		return "human"
	case "system":
		return "system"
	}
	return "ai"
}

// wireReason maps a finish reason to message-finish.reason; "" omits it.
func wireReason(r canonical.FinishReason) string {
	switch r {
	case canonical.FinishStop:
		return "stop"
	case canonical.FinishLength:
		return "length"
	case canonical.FinishToolCalls:
		return "tool_calls"
	case canonical.FinishContentFilter:
		return "content_filter"
	}
	return ""
}

func checkpointSource(s string) string {
	switch s {
	case "input", "loop", "update", "fork":
		return s
	}
	return "loop"
}

// appendUsage appends UsageInfo; zero counts are omitted, total is derived
// when the producer left it zero.
func appendUsage(b []byte, u *canonical.Usage) []byte {
	total := u.GetTotalTokens()
	if total == 0 {
		total = u.GetInputTokens() + u.GetOutputTokens()
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, u.GetInputTokens(), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, u.GetOutputTokens(), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, total, 10)
	if u.GetCacheReadTokens() != 0 || u.GetCacheCreationTokens() != 0 {
		b = append(b, `,"input_token_details":{`...)
		first := true
		if u.GetCacheCreationTokens() != 0 {
			b = appendKey(b, "cache_creation", first)
			b = strconv.AppendInt(b, u.GetCacheCreationTokens(), 10)
			first = false
		}
		if u.GetCacheReadTokens() != 0 {
			b = appendKey(b, "cache_read", first)
			b = strconv.AppendInt(b, u.GetCacheReadTokens(), 10)
		}
		b = append(b, '}')
	}
	if u.GetReasoningTokens() != 0 {
		b = append(b, `,"output_token_details":{"reasoning":`...)
		b = strconv.AppendInt(b, u.GetReasoningTokens(), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// dataType is the content block type for a data or ref block's MIME type.
func dataType(mime string) string {
	switch {
	case strings.HasPrefix(mime, "image/"):
		return "image"
	case strings.HasPrefix(mime, "audio/"):
		return "audio"
	case strings.HasPrefix(mime, "video/"):
		return "video"
	}
	return "file"
}

func (e *Encoder) blockStart(ev *canonical.Event, bs *canonical.BlockStart, out []wireEvent) []wireEvent {
	s := e.state(ev.GetNamespace())
	*s = nsEnc{open: true, typ: bs.GetType(), index: bs.GetIndex(), id: bs.GetId(), name: bs.GetName(), mime: bs.GetMime(), ref: bs.GetRef(), acc: s.acc[:0]}
	out = e.begin(out, methodMessages, ev)
	b := append(e.scratch, `{"event":"content-block-start","index":`...)
	b = strconv.AppendUint(b, uint64(bs.GetIndex()), 10)
	b = append(b, `,"content":`...)
	switch bs.GetType() {
	case canonical.BlockText:
		b = append(b, `{"type":"text","text":""`...)
		b = appendBlockID(b, s.id)
	case canonical.BlockReasoning:
		b = append(b, `{"type":"reasoning","reasoning":""`...)
		b = appendBlockID(b, s.id)
	case canonical.BlockToolCall:
		b = append(b, `{"type":"tool_call_chunk","id":`...)
		b = appendNullable(b, s.id)
		b = append(b, `,"name":`...)
		b = appendNullable(b, s.name)
		b = append(b, `,"args":""`...)
	default: // data and ref
		b = e.appendDataBlock(b, s, false)
	}
	e.scratch = append(b, "}}"...)
	e.done(out)
	return out
}

func appendBlockID(b []byte, id string) []byte {
	if id == "" {
		return b
	}
	b = append(b, `,"id":`...)
	return appendString(b, id)
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

// appendDataBlock appends a data or ref block (without its closing brace);
// final adds the whole base64.
func (e *Encoder) appendDataBlock(b []byte, s *nsEnc, final bool) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, dataType(s.mime)...)
	b = append(b, '"')
	b = appendBlockID(b, s.id)
	if s.ref != "" {
		b = append(b, `,"url":`...)
		b = appendString(b, s.ref)
	}
	if s.mime != "" {
		b = append(b, `,"mime_type":`...)
		b = appendString(b, s.mime)
	}
	if final && s.typ == canonical.BlockData {
		b = append(b, `,"base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, s.acc)
		b = append(b, '"')
	}
	return b
}

func (e *Encoder) delta(ev *canonical.Event, d *canonical.BlockDelta, out []wireEvent) ([]wireEvent, error) {
	s := e.state(ev.GetNamespace())
	if !s.open {
		return out, nil // the bridge's guard refuses such a stream before it gets here
	}
	var chunk []byte
	if s.typ == canonical.BlockData {
		chunk = d.GetData()
	}
	add := len(d.GetText()) + len(chunk)
	if len(s.acc)+add > e.cfg.MaxBlockBytes {
		return out, canonical.Errorf(canonical.CodeResourceExhausted, "content block %d exceeds MaxBlockBytes (%d bytes)", s.index, e.cfg.MaxBlockBytes)
	}
	if s.typ == canonical.BlockData {
		s.acc = append(s.acc, chunk...)
		s.held += len(chunk)
		n := s.held - s.held%3
		if n == 0 {
			return out, nil
		}
		out = e.begin(out, methodMessages, ev)
		b := append(e.scratch, `{"event":"content-block-delta","index":`...)
		b = strconv.AppendUint(b, uint64(s.index), 10)
		b = append(b, `,"delta":{"type":"data-delta","data":"`...)
		start := len(s.acc) - s.held
		b = base64.StdEncoding.AppendEncode(b, s.acc[start:start+n])
		s.held -= n
		e.scratch = append(b, `","encoding":"base64"}}`...)
		e.done(out)
		return out, nil
	}
	text := d.GetText()
	if text == "" {
		return out, nil
	}
	s.acc = append(s.acc, text...)
	out = e.begin(out, methodMessages, ev)
	b := append(e.scratch, `{"event":"content-block-delta","index":`...)
	b = strconv.AppendUint(b, uint64(s.index), 10)
	switch s.typ {
	case canonical.BlockReasoning:
		b = append(b, `,"delta":{"type":"reasoning-delta","reasoning":`...)
	case canonical.BlockToolCall:
		b = append(b, `,"delta":{"type":"tool-call-delta","args":`...)
	default:
		b = append(b, `,"delta":{"type":"text-delta","text":`...)
	}
	b = appendString(b, text)
	e.scratch = append(b, "}}"...)
	e.done(out)
	return out, nil
}

func (e *Encoder) blockFinish(ev *canonical.Event, bf *canonical.BlockFinish, out []wireEvent) []wireEvent {
	s := e.state(ev.GetNamespace())
	if !s.open {
		return out
	}
	if s.typ == canonical.BlockData && s.held > 0 { // the last 1 or 2 bytes
		out = e.begin(out, methodMessages, ev)
		b := append(e.scratch, `{"event":"content-block-delta","index":`...)
		b = strconv.AppendUint(b, uint64(s.index), 10)
		b = append(b, `,"delta":{"type":"data-delta","data":"`...)
		b = base64.StdEncoding.AppendEncode(b, s.acc[len(s.acc)-s.held:])
		e.scratch = append(b, `","encoding":"base64"}}`...)
		s.held = 0
		e.done(out)
	}
	out = e.begin(out, methodMessages, ev)
	b := append(e.scratch, `{"event":"content-block-finish","index":`...)
	b = strconv.AppendUint(b, uint64(bf.GetIndex()), 10)
	b = append(b, `,"content":`...)
	switch s.typ {
	case canonical.BlockText:
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, string(s.acc))
		b = appendBlockID(b, s.id)
	case canonical.BlockReasoning:
		b = append(b, `{"type":"reasoning","reasoning":`...)
		b = appendString(b, string(s.acc))
		b = appendBlockID(b, s.id)
	case canonical.BlockToolCall:
		b = appendToolCall(b, s)
	default:
		b = e.appendDataBlock(b, s, true)
	}
	e.scratch = append(b, "}}"...)
	e.done(out)
	s.open = false
	if cap(s.acc) > 64<<10 {
		s.acc = nil
	}
	return out
}

// appendToolCall appends the finalized tool call (without its closing
// brace): tool_call with the parsed arguments when they are a JSON object
// (empty arguments are {}), else invalid_tool_call with the raw string.
func appendToolCall(b []byte, s *nsEnc) []byte {
	args := bytes.TrimSpace(s.acc)
	if len(args) == 0 {
		args = []byte("{}")
	}
	if args[0] == '{' && json.Valid(args) {
		b = append(b, `{"type":"tool_call","id":`...)
		b = appendNullable(b, s.id)
		b = append(b, `,"name":`...)
		b = appendString(b, s.name)
		b = append(b, `,"args":`...)
		var buf bytes.Buffer
		if json.Compact(&buf, args) == nil {
			return append(b, buf.Bytes()...)
		}
		return append(b, args...)
	}
	b = append(b, `{"type":"invalid_tool_call","id":`...)
	b = appendNullable(b, s.id)
	b = append(b, `,"name":`...)
	b = appendNullable(b, s.name)
	b = append(b, `,"args":`...)
	b = appendString(b, string(s.acc))
	return append(b, `,"error":"arguments are not a JSON object"`...)
}
