package agent

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
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
	// skip is how many of the thread's events right before this one make
	// no frame (Runtime): the frame says which seq came before it
	// ("prev_seq"), so a reader of every event tells a skip from a loss.
	skip  int
	start int // offsets of data in the scratch buffer while encoding
	end   int
}

// tokenWriter writes to an Encoder, keeping the first error (nothing is
// written after it).
type tokenWriter struct {
	enc *json.Encoder
	err error
}

func (t *tokenWriter) token(tok json.Token) {
	if t.err == nil {
		t.err = t.enc.WriteToken(tok)
	}
}

// name writes an object member's name.
func (t *tokenWriter) name(n string) { t.token(json.String(n)) }

// str writes an object member whose value is the string v.
func (t *tokenWriter) str(n, v string) {
	t.token(json.String(n))
	t.token(json.String(v))
}

// appendSink appends what an Encoder flushes to b. The Encoder over it
// is not Reset between values: it flushes each top-level value as it
// ends, followed by a newline.
type appendSink struct{ b []byte }

func (s *appendSink) Write(p []byte) (int, error) {
	if s.b == nil {
		s.b = make([]byte, 0, len(p)) // a frame flushed at once: its exact size
	}
	s.b = append(s.b, p...)
	return len(p), nil
}

// newFrame returns the event envelope of w with seq (section 3.4):
// {"type":"event", "event_id" (the seq in decimal, a string), "seq",
// "prev_seq" (ours, when the thread's seq before this frame's made no
// frame; Extensible), "method", "params": {"namespace", "timestamp",
// "node" (on messages and tools events, where the SDK reads it; omitted
// when empty), "data"}}.
//
// The envelope is our framing around data, which the Encoder or the
// runtime wrote as JSON already: its strings are quoted by the JSON
// library and data is spliced in as it is. Writing it through an Encoder
// token by token re-validated data and cost 0.58 s of the 2.4 s of CPU an
// unpaced agent:agent benchmark spent (bench --cpuprofile), every frame
// under its thread's lock. TestDeltaFrameBytes and FuzzFrameEnvelope hold it to what the JSON
// library marshals for the same members.
func newFrame(seq uint64, w *wireEvent) []byte { return frameWith(seq, w, w.data) }

// frameWith is newFrame with the data given apart from w's: wireRecords
// passes the replay log's text as it lies, not a copy of it.
func frameWith[D ~string | ~[]byte](seq uint64, w *wireEvent, data D) []byte {
	node := ""
	if w.method == methodMessages || w.method == methodTools {
		node = w.node
	}
	// The fixed members take 102 bytes, two seqs and a timestamp up to 60:
	// the frame is written into one array (96 made nearly every frame
	// grow, a second allocation per wire event).
	n := 162 + len(w.method) + len(node) + len(data)
	for _, s := range w.namespace {
		n += len(s) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, `{"type":"event","event_id":"`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	if w.skip > 0 && uint64(w.skip) < seq {
		b = append(b, `,"prev_seq":`...)
		b = strconv.AppendUint(b, seq-1-uint64(w.skip), 10)
	}
	b = append(b, `,"method":`...)
	b = json.AppendQuote(b, w.method)
	b = append(b, `,"params":{"namespace":[`...)
	for i, s := range w.namespace {
		if i > 0 {
			b = append(b, ',')
		}
		b = json.AppendQuote(b, s)
	}
	b = append(b, `],"timestamp":`...)
	b = strconv.AppendInt(b, w.timeMs, 10)
	if node != "" {
		b = append(b, `,"node":`...)
		b = json.AppendQuote(b, node)
	}
	b = append(b, `,"data":`...)
	if len(data) == 0 {
		b = append(b, "null"...)
	}
	b = append(b, data...)
	return append(b, "}}"...)
}

// jsonOrNull is data, JSON the runtime assembled from stored values (which
// keep a client's whitespace), compacted, or null if it is not JSON: a bug
// of its writer must not splice a broken frame into every reader's stream,
// nor a newline into an SSE data line. The Encoder's data is compact JSON
// by construction.
// Invalid UTF-8 in its strings (a stored record keeps it) becomes U+FFFD,
// as wireJSON writes it.
func jsonOrNull(data []byte) []byte {
	v, err := json.Marshal(json.Value(data), wireJSON)
	if err != nil {
		return []byte("null")
	}
	return v
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
	scratch appendSink    // the data of the events of one Encode ...
	enc     *json.Encoder // ... written through this
	delta   blockEvent    // reused for every delta (most of a run's events) ...
	body    wireDelta     // ... with this body: no allocation per delta
	root    nsEnc
	ns      map[string]*nsEnc
	// pendingErr is a message that ended with FinishError: its error event
	// waits for the next event, which (if it is the run's failure) supplies
	// the message and code.
	pendingErr   *wireEvent
	pendingRunID string // its message's run_id
}

// runIDExt is the extension of a message-start event that holds the
// message's run_id: the LangChain run of the model call that LangGraph
// writes in the data of each of a message's events ({"event":
// "message-start", "id", "run_id"}; the SDK's MessageAssembler keys
// messages by it and keeps it as additional_kwargs.run_id). The decoder
// reads it from message-start; the encoder writes it on each event of the
// message. (The protocol's MessageMetadata.run_id is a different place:
// metadata passes as the upstream sent it.)
const runIDExt = "agent.run_id"

// nsEnc is the open block of one namespace, and its open message's run_id.
type nsEnc struct {
	runID string
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
	e := &Encoder{cfg: cfg}
	e.enc = json.NewEncoder(&e.scratch, wireJSON)
	return e
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

// add appends a wire event of ev with data, written to the scratch buffer.
func (e *Encoder) add(out []wireEvent, method string, ev *canonical.Event, data any) []wireEvent {
	start, end := e.write(data)
	return e.addAt(out, method, ev, start, end)
}

// addAt appends the wire event of ev whose data is scratch[start:end],
// written there already.
func (e *Encoder) addAt(out []wireEvent, method string, ev *canonical.Event, start, end int) []wireEvent {
	ms := ev.GetTimeUnixNano() / 1e6
	if ms == 0 {
		ms = e.cfg.Now().UnixMilli()
	}
	return append(out, wireEvent{method: method, namespace: ev.GetNamespace(), node: ev.GetGraphNode(), timeMs: ms, start: start, end: end})
}

// begin empties the scratch buffer for the events of one call.
func (e *Encoder) begin() {
	if cap(e.scratch.b) > 64<<10 {
		e.scratch.b = nil // a values event's megabytes are not kept for the run
	}
	e.scratch.b = e.scratch.b[:0]
}

// write appends data's JSON to the scratch buffer and returns where it
// is: through its MarshalJSONTo (a delta's, without reflection), else
// marshalled.
func (e *Encoder) write(data any) (start, end int) {
	start = len(e.scratch.b)
	var err error
	if m, ok := data.(json.Marshaler); ok {
		err = m.MarshalJSONTo(e.enc)
	} else {
		err = json.MarshalEncode(e.enc, data)
	}
	if err != nil { // never, for the types below
		e.enc.Reset(&e.scratch, wireJSON)
		e.scratch.b = append(e.scratch.b[:start], "null\n"...)
	}
	// The Encoder has written the value out, ending it with a newline.
	end = len(e.scratch.b)
	if end > start && e.scratch.b[end-1] == '\n' {
		end--
	}
	return start, end
}

// Encode appends the wire events for ev to out (zero or more; usually one).
// The data of every event appended by this call stays valid until the next
// call. An error (a block larger than MaxBlockBytes: ResourceExhausted)
// leaves the run unencodable; the caller ends it.
func (e *Encoder) Encode(ev *canonical.Event, out []wireEvent) ([]wireEvent, error) {
	e.begin()
	first := len(out)
	var err error
	if k, ok := ev.GetKind().(*canonical.KindError); ok && e.pendingErr != nil && slices.Equal(ev.GetNamespace(), e.pendingErr.namespace) {
		// The error of the message that just failed: its messages error
		// event carries it (decoders read it back as this error event).
		out = e.flushPendingError(out, &canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Error: k.Error}}})
	} else {
		out = e.flushPendingError(out, ev)
		out, err = e.encode(ev, out)
	}
	e.setData(out[first:])
	return out, err
}

// setData points the events' data into the scratch buffer, once written
// (a write may move it).
func (e *Encoder) setData(out []wireEvent) {
	b := e.scratch.b
	for i := range out {
		out[i].data = b[out[i].start:out[i].end:out[i].end]
	}
}

// Flush appends what the encoder still owes at the end of a stream that
// stopped early (a message error whose run never ended).
func (e *Encoder) Flush(out []wireEvent) []wireEvent {
	e.begin()
	first := len(out)
	out = e.flushPendingError(out, nil)
	e.setData(out[first:])
	return out
}

// eventError is the data of a messages error event, and of a tools
// tool-error event (with tool_call_id).
type eventError struct {
	Event      string `json:"event"`
	ToolCallID string `json:"tool_call_id,omitzero"`
	Message    string `json:"message"`
	Code       string `json:"code"`
	RunID      string `json:"run_id,omitzero"` // a message's (runIDExt)
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
	w.start, w.end = e.write(&eventError{Event: "error", Message: msg, Code: code.String(), RunID: e.pendingRunID})
	e.pendingRunID = ""
	return append(out, w)
}

// The data of the other events (section 5.2), one type each.
type (
	messageStart struct {
		Event    string         `json:"event"`
		Role     string         `json:"role"`
		ID       string         `json:"id"`
		Metadata map[string]any `json:"metadata,omitempty"`
		RunID    string         `json:"run_id,omitempty"`
	}
	messageFinish struct {
		Event  string     `json:"event"`
		Usage  *wireUsage `json:"usage,omitzero"`
		Reason string     `json:"reason,omitempty"`
		RunID  string     `json:"run_id,omitempty"`
	}
	toolStarted struct {
		Event      string     `json:"event"`
		ToolCallID string     `json:"tool_call_id"`
		ToolName   string     `json:"tool_name"`
		Input      json.Value `json:"input,omitzero"` // absent when the event has none; null when it is null
	}
	toolOutput struct {
		Event      string `json:"event"`
		ToolCallID string `json:"tool_call_id"`
		Delta      string `json:"delta"`
	}
	toolFinished struct {
		Event      string `json:"event"`
		ToolCallID string `json:"tool_call_id"`
		Output     any    `json:"output"`
	}
	inputRequested struct {
		InterruptID string `json:"interrupt_id"`
		Payload     any    `json:"payload"`
	}
	inputAnswered struct {
		InterruptIDs []string `json:"interrupt_ids"`
	}
	// stateUpdate is an updates event's data, the CDDL's UpdatesData
	// {? node: text, values: {* text => any}, Extensible} (@langchain/protocol
	// 0.0.21 UpdatesData {node?, values}): the node rides in data, not in
	// params as LangGraph 1.5.1 puts it (its data is the values alone; the
	// decoder reads both forms).
	stateUpdate struct {
		Node   string `json:"node,omitempty"`
		Values any    `json:"values"`
	}
	checkpointData struct {
		ID       string `json:"id"`
		ParentID string `json:"parent_id,omitempty"`
		Step     int64  `json:"step"`
		Source   string `json:"source"`
	}
	customData struct {
		Name    string `json:"name,omitempty"`
		Payload any    `json:"payload"`
	}
	errorPayload struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
)

func (e *Encoder) encode(ev *canonical.Event, out []wireEvent) ([]wireEvent, error) {
	switch k := ev.GetKind().(type) {
	case *canonical.KindBlockDelta:
		return e.blockDelta(ev, k.BlockDelta, out)
	case *canonical.KindBlockStart:
		return e.blockStart(ev, k.BlockStart, out), nil
	case *canonical.KindBlockFinish:
		return e.blockFinish(ev, k.BlockFinish, out), nil
	case *canonical.KindMessageStart:
		s := e.state(ev.GetNamespace())
		s.runID = ev.GetExtensions()[runIDExt].GetStringValue()
		ms := &messageStart{Event: "message-start", Role: wireRole(k.MessageStart.GetRole()), ID: k.MessageStart.GetMessageId(), RunID: s.runID}
		if md := k.MessageStart.GetMetadata(); len(md) > 0 {
			ms.Metadata = plainFields(md, true)
		}
		return e.add(out, methodMessages, ev, ms), nil
	case *canonical.KindMessageFinish:
		return e.messageFinish(ev, k.MessageFinish, out), nil
	case *canonical.KindLifecycle:
		return e.lifecycle(ev, k.Lifecycle, out), nil
	case *canonical.KindToolStarted:
		t := k.ToolStarted
		ts := &toolStarted{Event: "tool-started", ToolCallID: t.GetToolCallId(), ToolName: t.GetName()}
		if t.GetInput() != nil {
			ts.Input = appendValue(nil, t.GetInput())
		}
		return e.add(out, methodTools, ev, ts), nil
	case *canonical.KindToolOutput:
		return e.add(out, methodTools, ev, &toolOutput{Event: "tool-output-delta", ToolCallID: k.ToolOutput.GetToolCallId(), Delta: k.ToolOutput.GetDelta()}), nil
	case *canonical.KindToolFinished:
		return e.add(out, methodTools, ev, &toolFinished{Event: "tool-finished", ToolCallID: k.ToolFinished.GetToolCallId(), Output: plainValue(k.ToolFinished.GetOutput())}), nil
	case *canonical.KindToolFailed:
		t := k.ToolFailed
		return e.add(out, methodTools, ev, &eventError{Event: "tool-error", ToolCallID: t.GetToolCallId(), Message: t.GetError().GetMessage(), Code: canonical.Code(t.GetError().GetCode()).String()}), nil
	}
	return e.encodeState(ev, out), nil
}

// encodeState encodes the events of the other channels.
func (e *Encoder) encodeState(ev *canonical.Event, out []wireEvent) []wireEvent {
	switch k := ev.GetKind().(type) {
	case *canonical.KindInputRequested:
		return e.add(out, methodInputRequested, ev, &inputRequested{InterruptID: k.InputRequested.GetInterruptId(), Payload: plainValue(k.InputRequested.GetPayload())})
	case *canonical.KindInputAnswered:
		return e.add(out, methodInputAnswered, ev, &inputAnswered{InterruptIDs: k.InputAnswered.GetInterruptIds()})
	case *canonical.KindStateSnapshot:
		return e.add(out, methodValues, ev, plainObject(k.StateSnapshot.GetValues()))
	case *canonical.KindStateUpdate:
		return e.add(out, methodUpdates, ev, &stateUpdate{Node: k.StateUpdate.GetNode(), Values: plainObject(k.StateUpdate.GetValues())})
	case *canonical.KindCheckpoint:
		c := k.Checkpoint
		return e.add(out, methodCheckpoints, ev, &checkpointData{ID: c.GetId(), ParentID: c.GetParentId(), Step: c.GetStep(), Source: checkpointSource(c.GetSource())})
	case *canonical.KindTask:
		return e.add(out, methodTasks, ev, plainValue(k.Task.GetPayload()))
	case *canonical.KindCustom:
		out = e.add(out, methodCustom, ev, &customData{Name: k.Custom.GetName(), Payload: plainValue(k.Custom.GetPayload())})
		out[len(out)-1].custom = k.Custom.GetName()
		return out
	case *canonical.KindError:
		out = e.add(out, methodCustom, ev, &customData{Name: errorCustomName, Payload: &errorPayload{Code: canonical.Code(k.Error.GetCode()).String(), Message: k.Error.GetMessage()}})
		out[len(out)-1].custom = errorCustomName
		return out
	}
	return out
}

// plainObject is v, which should be a JSON object, as plainValue makes
// it; nil is {}.
func plainObject(v *structpb.Value) any {
	if v == nil {
		return map[string]any{}
	}
	return plainValue(v)
}

func (e *Encoder) messageFinish(ev *canonical.Event, mf *canonical.MessageFinish, out []wireEvent) []wireEvent {
	if mf.GetFinishReason() == canonical.FinishError {
		s := e.state(ev.GetNamespace())
		e.pendingRunID, s.runID = s.runID, ""
		ms := ev.GetTimeUnixNano() / 1e6
		if ms == 0 {
			ms = e.cfg.Now().UnixMilli()
		}
		e.pendingErr = &wireEvent{method: methodMessages, namespace: ev.GetNamespace(), node: ev.GetGraphNode(), timeMs: ms}
		return out
	}
	s := e.state(ev.GetNamespace())
	data := &messageFinish{Event: "message-finish", Reason: wireReason(mf.GetFinishReason()), RunID: s.runID}
	s.runID = ""
	if u := mf.GetUsage(); u != nil && (u.GetInputTokens() != 0 || u.GetOutputTokens() != 0 || u.GetTotalTokens() != 0) {
		data.Usage = newWireUsage(u)
	}
	return e.add(out, methodMessages, ev, data)
}

// lifecycleData is a lifecycle event's data.
type lifecycleData struct {
	Event      string          `json:"event"`
	GraphName  string          `json:"graph_name,omitempty"`
	Cause      *causeData      `json:"cause,omitzero"`
	Error      string          `json:"error,omitempty"`
	Checkpoint *checkpointLink `json:"checkpoint,omitzero"`
}

// causeData says why a subgraph started: tool_call_id for a toolCall,
// from_node for the others (sent, even empty, for send and edge).
type causeData struct {
	Type       string  `json:"type"`
	ToolCallID *string `json:"tool_call_id,omitzero"`
	FromNode   *string `json:"from_node,omitzero"`
}

type checkpointLink struct {
	ID string `json:"id"`
}

func (e *Encoder) lifecycle(ev *canonical.Event, lc *canonical.Lifecycle, out []wireEvent) []wireEvent {
	status, errText := wireStatus(lc)
	if len(ev.GetNamespace()) > 0 && lc.GetStatus() == canonical.StatusFailed && lc.GetError().GetMessage() == "" {
		errText = "" // a subgraph that failed without a word (LangGraph sends none): no invented text
	}
	data := &lifecycleData{Event: status, GraphName: lc.GetGraphName(), Error: errText}
	if data.GraphName == "" && len(ev.GetNamespace()) == 0 {
		data.GraphName = e.cfg.GraphName
	}
	if c := lc.GetCause(); c != nil && c.GetType() != "" {
		data.Cause = &causeData{Type: c.GetType()}
		if c.GetType() == "toolCall" {
			data.Cause.ToolCallID = &c.ToolCallId
		} else if c.GetFromNode() != "" || c.GetType() == "send" || c.GetType() == "edge" {
			data.Cause.FromNode = &c.FromNode
		}
	}
	if id := lc.GetCheckpointId(); id != "" {
		data.Checkpoint = &checkpointLink{ID: id}
	}
	out = e.add(out, methodLifecycle, ev, data)
	out[len(out)-1].status = status
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

// wireUsage is UsageInfo; zero counts are omitted, total is derived when
// the producer left it zero.
type wireUsage struct {
	InputTokens        int64        `json:"input_tokens"`
	OutputTokens       int64        `json:"output_tokens"`
	TotalTokens        int64        `json:"total_tokens"`
	InputTokenDetails  *inputUsage  `json:"input_token_details,omitzero"`
	OutputTokenDetails *outputUsage `json:"output_token_details,omitzero"`
}

type inputUsage struct {
	CacheCreation int64 `json:"cache_creation,omitzero"`
	CacheRead     int64 `json:"cache_read,omitzero"`
}

type outputUsage struct {
	Reasoning int64 `json:"reasoning"`
}

func newWireUsage(u *canonical.Usage) *wireUsage {
	w := &wireUsage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), TotalTokens: u.GetTotalTokens()}
	if w.TotalTokens == 0 {
		w.TotalTokens = w.InputTokens + w.OutputTokens
	}
	if u.GetCacheReadTokens() != 0 || u.GetCacheCreationTokens() != 0 {
		w.InputTokenDetails = &inputUsage{CacheCreation: u.GetCacheCreationTokens(), CacheRead: u.GetCacheReadTokens()}
	}
	if u.GetReasoningTokens() != 0 {
		w.OutputTokenDetails = &outputUsage{Reasoning: u.GetReasoningTokens()}
	}
	return w
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

// blockEvent is the data of content-block-start, -delta and -finish:
// {"event", "index", "content"} with content a block (one of the types
// below) for a start and a finish, {"event", "index", "delta"} for a delta.
type blockEvent struct {
	Event   string
	Index   uint32
	Content any
	Delta   *wireDelta
	RunID   string // omitted when empty
}

// MarshalJSONTo writes the event token by token (most of a run's events
// are deltas); a block's content is marshalled.
func (b *blockEvent) MarshalJSONTo(enc *json.Encoder) error {
	t := tokenWriter{enc: enc}
	t.token(json.BeginObject)
	t.str("event", b.Event)
	t.name("index")
	t.token(json.Uint(uint64(b.Index)))
	if b.Content != nil {
		t.name("content")
		if t.err == nil {
			t.err = json.MarshalEncode(enc, b.Content)
		}
	}
	if b.Delta != nil {
		t.name("delta")
		if t.err == nil {
			t.err = b.Delta.MarshalJSONTo(enc)
		}
	}
	if b.RunID != "" {
		t.str("run_id", b.RunID)
	}
	t.token(json.EndObject)
	return t.err
}

// wireDelta is a delta: {"type"} and, by type, "text", "reasoning",
// "args" or "data" (base64) with "encoding"; each omitted when empty.
type wireDelta struct {
	Type      string
	Text      string
	Reasoning string
	Args      string
	Data      []byte
	Encoding  string
}

// MarshalJSONTo writes the delta token by token.
func (d *wireDelta) MarshalJSONTo(enc *json.Encoder) error {
	t := tokenWriter{enc: enc}
	t.token(json.BeginObject)
	t.str("type", d.Type)
	for _, m := range [...]struct{ name, value string }{{"text", d.Text}, {"reasoning", d.Reasoning}, {"args", d.Args}} {
		if m.value != "" {
			t.str(m.name, m.value)
		}
	}
	if len(d.Data) > 0 {
		t.str("data", base64.StdEncoding.EncodeToString(d.Data))
	}
	if d.Encoding != "" {
		t.str("encoding", d.Encoding)
	}
	t.token(json.EndObject)
	return t.err
}

// The content blocks: text and reasoning (text always sent, even empty),
// a tool call being streamed, a finished one (args parsed), one whose
// arguments are not a JSON object, and a data or ref block.
type (
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
		ID   string `json:"id,omitempty"`
	}
	reasoningBlock struct {
		Type      string `json:"type"`
		Reasoning string `json:"reasoning"`
		ID        string `json:"id,omitempty"`
	}
	toolCallChunkBlock struct {
		Type string  `json:"type"`
		ID   *string `json:"id"`
		Name *string `json:"name"`
		Args string  `json:"args"`
	}
	toolCallBlock struct {
		Type string     `json:"type"`
		ID   *string    `json:"id"`
		Name string     `json:"name"`
		Args json.Value `json:"args"`
	}
	invalidToolCallBlock struct {
		Type  string  `json:"type"`
		ID    *string `json:"id"`
		Name  *string `json:"name"`
		Args  string  `json:"args"`
		Error string  `json:"error"`
	}
	dataBlock struct {
		Type     string `json:"type"`
		ID       string `json:"id,omitempty"`
		URL      string `json:"url,omitempty"`
		MimeType string `json:"mime_type,omitempty"`
		Base64   []byte `json:"base64,omitzero"`
	}
)

// nullable is s, or nil (null) when empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (e *Encoder) blockStart(ev *canonical.Event, bs *canonical.BlockStart, out []wireEvent) []wireEvent {
	s := e.state(ev.GetNamespace())
	*s = nsEnc{runID: s.runID, open: true, typ: bs.GetType(), index: bs.GetIndex(), id: bs.GetId(), name: bs.GetName(), mime: bs.GetMime(), ref: bs.GetRef(), acc: s.acc[:0]}
	data := &blockEvent{Event: "content-block-start", Index: bs.GetIndex(), RunID: s.runID}
	switch bs.GetType() {
	case canonical.BlockText:
		data.Content = &textBlock{Type: "text", ID: s.id}
	case canonical.BlockReasoning:
		data.Content = &reasoningBlock{Type: "reasoning", ID: s.id}
	case canonical.BlockToolCall:
		data.Content = &toolCallChunkBlock{Type: "tool_call_chunk", ID: nullable(s.id), Name: nullable(s.name)}
	default: // data and ref
		data.Content = s.dataBlock(false)
	}
	return e.add(out, methodMessages, ev, data)
}

// dataBlock is a data or ref block; final adds the whole data.
func (s *nsEnc) dataBlock(final bool) *dataBlock {
	b := &dataBlock{Type: dataType(s.mime), ID: s.id, URL: s.ref, MimeType: s.mime}
	if final && s.typ == canonical.BlockData {
		b.Base64 = s.acc
		if b.Base64 == nil {
			b.Base64 = []byte{} // "base64":"" for a block without data
		}
	}
	return b
}

// addDelta appends a content-block-delta through the reused e.delta.
func (e *Encoder) addDelta(out []wireEvent, ev *canonical.Event, index uint32, d wireDelta) []wireEvent {
	runID := e.state(ev.GetNamespace()).runID
	if name, value, ok := d.textMember(); ok {
		start := len(e.scratch.b)
		e.scratch.b = appendTextDelta(e.scratch.b, index, d.Type, name, value, runID)
		return e.addAt(out, methodMessages, ev, start, len(e.scratch.b))
	}
	e.body = d
	e.delta = blockEvent{Event: "content-block-delta", Index: index, Delta: &e.body, RunID: runID}
	out = e.add(out, methodMessages, ev, &e.delta)
	e.body = wireDelta{} // keep no text
	return out
}

// textMember is the one string member of a text, reasoning or arguments
// delta; ok false for any other delta (data, or more than one member).
func (d *wireDelta) textMember() (name, value string, ok bool) {
	if len(d.Data) > 0 || d.Encoding != "" {
		return "", "", false
	}
	for _, m := range [...]struct{ name, value string }{{"text", d.Text}, {"reasoning", d.Reasoning}, {"args", d.Args}} {
		if m.value == "" {
			continue
		}
		if ok {
			return "", "", false
		}
		name, value, ok = m.name, m.value, true
	}
	return name, value, ok
}

// appendTextDelta appends the content-block-delta of one string member:
// the bytes blockEvent.MarshalJSONTo writes for it (FuzzTextDelta compares
// them), as our framing around strings the library quotes. Deltas are
// most of a run's events; written token by token they cost the
// agent-to-agent pair a quarter of its throughput against the do-nothing
// hop (issue 29's guard).
func appendTextDelta(b []byte, index uint32, typ, name, value, runID string) []byte {
	b = append(b, `{"event":"content-block-delta","index":`...)
	b = strconv.AppendUint(b, uint64(index), 10)
	b = append(b, `,"delta":{"type":`...)
	b = json.AppendQuote(b, typ)
	b = append(b, ',')
	b = json.AppendQuote(b, name)
	b = append(b, ':')
	b = json.AppendQuote(b, value)
	b = append(b, '}')
	if runID != "" {
		b = append(b, `,"run_id":`...)
		b = json.AppendQuote(b, runID)
	}
	return append(b, '}')
}

func (e *Encoder) blockDelta(ev *canonical.Event, d *canonical.BlockDelta, out []wireEvent) ([]wireEvent, error) {
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
		n := s.held - s.held%3 // whole 3-byte groups: the slices' base64 concatenates
		if n == 0 {
			return out, nil
		}
		start := len(s.acc) - s.held
		s.held -= n
		return e.addDelta(out, ev, s.index, wireDelta{Type: "data-delta", Data: s.acc[start : start+n], Encoding: "base64"}), nil
	}
	text := d.GetText()
	if text == "" {
		return out, nil
	}
	s.acc = append(s.acc, text...)
	switch s.typ {
	case canonical.BlockReasoning:
		return e.addDelta(out, ev, s.index, wireDelta{Type: "reasoning-delta", Reasoning: text}), nil
	case canonical.BlockToolCall:
		return e.addDelta(out, ev, s.index, wireDelta{Type: "tool-call-delta", Args: text}), nil
	}
	return e.addDelta(out, ev, s.index, wireDelta{Type: "text-delta", Text: text}), nil
}

func (e *Encoder) blockFinish(ev *canonical.Event, bf *canonical.BlockFinish, out []wireEvent) []wireEvent {
	s := e.state(ev.GetNamespace())
	if !s.open {
		return out
	}
	if s.typ == canonical.BlockData && s.held > 0 { // the last 1 or 2 bytes
		out = e.addDelta(out, ev, s.index, wireDelta{Type: "data-delta", Data: s.acc[len(s.acc)-s.held:], Encoding: "base64"})
		s.held = 0
	}
	data := &blockEvent{Event: "content-block-finish", Index: bf.GetIndex(), RunID: s.runID}
	switch s.typ {
	case canonical.BlockText:
		data.Content = &textBlock{Type: "text", Text: string(s.acc), ID: s.id}
	case canonical.BlockReasoning:
		data.Content = &reasoningBlock{Type: "reasoning", Reasoning: string(s.acc), ID: s.id}
	case canonical.BlockToolCall:
		data.Content = s.toolCall()
	default:
		data.Content = s.dataBlock(true)
	}
	out = e.add(out, methodMessages, ev, data)
	s.open = false
	if cap(s.acc) > 64<<10 {
		s.acc = nil
	}
	return out
}

// toolCall is the finalized tool call: tool_call with the parsed arguments
// when they are a JSON object (empty arguments are {}), else
// invalid_tool_call with the raw string.
func (s *nsEnc) toolCall() any {
	args := json.Value(bytes.TrimSpace(s.acc))
	if len(args) == 0 {
		args = json.Value("{}")
	}
	if args.Kind() == '{' && args.IsValid(peerJSON) {
		return &toolCallBlock{Type: "tool_call", ID: nullable(s.id), Name: s.name, Args: args}
	}
	return &invalidToolCallBlock{Type: "invalid_tool_call", ID: nullable(s.id), Name: nullable(s.name), Args: string(s.acc), Error: "arguments are not a JSON object"}
}
