package triton

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Response parameters the frontend adds for non-text activity (doc.go).
const (
	keyToolCallID        = "tool_call_id"
	keyToolCallName      = "tool_call_name"
	keyToolCallArguments = "tool_call_arguments"
	keyToolCallResult    = "tool_call_result"
	keyToolCallError     = "tool_call_error"
	keyToolCalls         = "tool_calls"
	keyInterruptID       = "interrupt_id"
	keyInterrupt         = "interrupt"
)

// Tags around reasoning text when include_reasoning is set.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// kv is one member of a response object.
type kv struct {
	key string
	val string
}

// toolCall is one tool call seen in a run.
type toolCall struct {
	id, name string
	args     []byte
	result   string // JSON text
	errMsg   string
}

// responseEncoder turns a run's canonical events into Triton generate
// responses (reference sections 3 and 8.1), from the view canonical.AnswerStream
// gives of the run (the agent's answer, on the root). Only the root namespace's
// assistant messages are rendered. One per request; not safe for
// concurrent use.
type responseEncoder struct {
	stream    bool   // a response per delta; else one aggregated response
	reasoning bool   // render reasoning inside <think></think>
	echo      string // prepended to the aggregated text (exclude_input_in_output: false)
	maxOutput int    // bound on the bytes held: aggregated text and tool arguments

	resp       textResponse // the text response, but for its text
	textPrefix []byte       // a streamed response's JSON before its text (streamed)
	streamOut  []byte       // the streamed response being built
	out        bufEncoder   // the response being built
	tmp        []byte
	text       []byte // aggregated text
	held       int

	msgOK     bool // the open root message is rendered
	blockOpen bool
	blockType canonical.BlockType
	think     bool        // <think> written for the open reasoning block
	call      *toolCall   // the open tool-call block
	calls     []*toolCall // aggregated responses only
	interrupt []kv
}

func newResponseEncoder(id, model string, stream, reasoning bool, echo string, maxOutput int) *responseEncoder {
	e := &responseEncoder{stream: stream, reasoning: reasoning, echo: echo, maxOutput: maxOutput}
	e.resp = textResponse{ID: id, ModelName: model, ModelVersion: modelVersion}
	return e
}

// textResponse is a response carrying text only, keys in alphabetical
// order as Triton writes them (reference section 3); the id only when the
// request had a non-empty one.
type textResponse struct {
	ID           string
	ModelName    string
	ModelVersion string
	TextOutput   string
}

// MarshalJSONTo writes the response token by token: it goes out once per
// streamed delta, and writing its four strings directly spares the
// reflection of a struct's marshalling (a third of the frontend's JSON
// cost per delta).
func (r *textResponse) MarshalJSONTo(e *json.Encoder) error {
	members := [...]string{"id", r.ID, "model_name", r.ModelName, "model_version", r.ModelVersion, "text_output", r.TextOutput}
	names := members[:]
	if r.ID == "" {
		names = names[2:]
	}
	if err := e.WriteToken(json.BeginObject); err != nil {
		return err
	}
	for _, s := range names {
		if err := e.WriteToken(json.String(s)); err != nil {
			return err
		}
	}
	return e.WriteToken(json.EndObject)
}

// writeOptions: rapidjson writes a string's bytes as they are, escaping
// only quotes, backslashes and control characters; what is not UTF-8 (our
// text is, being canonical) is written as U+FFFD rather than refused. The
// names written are struct fields' and map keys, distinct by construction:
// checking them for duplicates was a quarter of a delta's encoding.
var writeOptions = json.JoinOptions(json.AllowInvalidUTF8(true), json.AllowDuplicateNames(true))

// bufEncoder marshals values into one reused buffer with one Encoder for
// the request's life. The Encoder flushes each top-level value to its
// writer when the value ends, so between values it holds nothing and
// needs no Reset (whose options join was a tenth of a delta's encoding).
type bufEncoder struct {
	out sink
	enc *json.Encoder
}

// sink is the Encoder's writer: it appends what it is given to b.
type sink struct{ b []byte }

func (s *sink) Write(p []byte) (int, error) {
	s.b = append(s.b, p...)
	return len(p), nil
}

// marshal returns v's JSON, valid until the next call. A Marshaler is
// called directly, not looked up by type.
func (b *bufEncoder) marshal(v any, opts ...json.Options) []byte {
	b.out.b = b.out.b[:0]
	if b.enc == nil {
		b.enc = json.NewEncoder(&b.out, writeOptions)
	}
	var err error
	if m, ok := v.(json.Marshaler); ok && len(opts) == 0 {
		err = m.MarshalJSONTo(b.enc)
	} else {
		err = json.MarshalEncode(b.enc, v, opts...)
	}
	if err != nil {
		b.enc.Reset(&b.out, writeOptions) // it may hold part of v
		return nil
	}
	return bytes.TrimSuffix(b.out.b, []byte("\n")) // the Encoder ends each value with a newline
}

// event handles one canonical event. It returns a response object to send
// now (nil for none; valid until the next call) and, when the run has
// ended, done with the run's failure (nil when it completed or was
// interrupted). A breach of maxOutput ends the run with
// CodeResourceExhausted.
func (e *responseEncoder) event(ev *canonical.Event) (resp []byte, done bool, fail *canonical.Error) {
	if st, ok := canonical.TerminalOf(ev); ok {
		switch st {
		case canonical.StatusCompleted, canonical.StatusInterrupted:
			return nil, true, nil
		}
		ce := canonical.FromProto(ev.GetLifecycle().GetError())
		if ce == nil {
			ce = canonical.Errorf(canonical.CodeUnknown, "run %s", strings.ToLower(strings.TrimPrefix(st.String(), "RUN_STATUS_")))
		}
		return nil, true, ce
	}
	if len(ev.GetNamespace()) != 0 {
		return nil, false, nil
	}
	switch k := ev.GetKind().(type) {
	case *canonical.KindMessageStart:
		role := k.MessageStart.GetRole()
		e.msgOK = role == "" || role == "assistant"
	case *canonical.KindMessageFinish:
		e.msgOK = false
	case *canonical.KindBlockStart:
		if !e.msgOK {
			return nil, false, nil
		}
		e.blockOpen, e.blockType = true, k.BlockStart.GetType()
		if e.blockType == canonical.BlockToolCall {
			e.call = &toolCall{id: k.BlockStart.GetId(), name: k.BlockStart.GetName()}
		}
	case *canonical.KindBlockDelta:
		if !e.msgOK || !e.blockOpen {
			return nil, false, nil
		}
		return e.delta(k.BlockDelta.GetText())
	case *canonical.KindBlockFinish:
		if !e.msgOK || !e.blockOpen {
			return nil, false, nil
		}
		e.blockOpen = false
		switch e.blockType {
		case canonical.BlockReasoning:
			if e.think {
				e.think = false
				return emitTextOf(e, thinkClose)
			}
		case canonical.BlockToolCall:
			c := e.call
			e.call = nil
			if e.stream {
				e.held -= len(c.args) // sent now, not kept
				return e.build("", []kv{
					{key: keyToolCallArguments, val: string(c.args)},
					{key: keyToolCallID, val: c.id},
					{key: keyToolCallName, val: c.name},
				}), false, nil
			}
			e.calls = append(e.calls, c)
		}
	case *canonical.KindToolStarted:
		if !e.stream && e.lookup(k.ToolStarted.GetToolCallId()) == nil {
			c := &toolCall{id: k.ToolStarted.GetToolCallId(), name: k.ToolStarted.GetName()}
			if fail := e.hold(len(c.id) + len(c.name)); fail != nil {
				return nil, true, fail
			}
			e.calls = append(e.calls, c)
		}
	case *canonical.KindToolFinished:
		id, result := k.ToolFinished.GetToolCallId(), jsonText(k.ToolFinished.GetOutput())
		if e.stream {
			return e.build("", []kv{{key: keyToolCallID, val: id}, {key: keyToolCallResult, val: result}}), false, nil
		}
		if fail := e.hold(len(id) + len(result)); fail != nil {
			return nil, true, fail
		}
		e.result(id).result = result
	case *canonical.KindToolFailed:
		id, msg := k.ToolFailed.GetToolCallId(), k.ToolFailed.GetError().GetMessage()
		if e.stream {
			return e.build("", []kv{{key: keyToolCallError, val: msg}, {key: keyToolCallID, val: id}}), false, nil
		}
		if fail := e.hold(len(id) + len(msg)); fail != nil {
			return nil, true, fail
		}
		e.result(id).errMsg = msg
	case *canonical.KindInputRequested:
		e.interrupt = []kv{
			{key: keyInterrupt, val: jsonText(k.InputRequested.GetPayload())},
			{key: keyInterruptID, val: k.InputRequested.GetInterruptId()},
		}
		if e.stream {
			return e.build("", e.interrupt), false, nil
		}
	}
	return nil, false, nil
}

// delta handles a delta of the open block.
func (e *responseEncoder) delta(s string) ([]byte, bool, *canonical.Error) {
	switch e.blockType {
	case canonical.BlockText:
		return emitTextOf(e, s)
	case canonical.BlockReasoning:
		if !e.reasoning || s == "" {
			return nil, false, nil
		}
		if !e.think {
			e.think = true
			e.tmp = append(append(e.tmp[:0], thinkOpen...), s...)
			return emitTextOf(e, e.tmp)
		}
		return emitTextOf(e, s)
	case canonical.BlockToolCall:
		if fail := e.hold(len(s)); fail != nil {
			return nil, true, fail
		}
		e.call.args = append(e.call.args, s...)
	}
	return nil, false, nil
}

// emitTextOf sends text as a response, or adds it to the aggregated text.
func emitTextOf[S string | []byte](e *responseEncoder, s S) ([]byte, bool, *canonical.Error) {
	if len(s) == 0 {
		return nil, false, nil
	}
	if e.stream {
		return streamed(e, s), false, nil
	}
	if fail := e.hold(len(s)); fail != nil {
		return nil, true, fail
	}
	e.text = append(e.text, s...)
	return nil, false, nil
}

// streamed is the response carrying text, valid until the next call. Only
// text_output changes from one delta's response to the next, and it is the
// last member: the members before it are encoded once (textPrefix) and
// each delta appends its quoted text and the closing brace. Writing the
// four members token by token for every delta cost 0.20 s of the 1.81 s
// of CPU an unpaced triton:triton benchmark spent (bench --cpuprofile).
func streamed[S string | []byte](e *responseEncoder, text S) []byte {
	if e.textPrefix == nil {
		e.resp.TextOutput = ""
		whole := e.out.marshal(&e.resp) // ...,"text_output":""}
		e.textPrefix = bytes.Clone(whole[:len(whole)-len(`""}`)])
	}
	e.streamOut = append(e.streamOut[:0], e.textPrefix...)
	e.streamOut = json.AppendQuote(e.streamOut, text)
	e.streamOut = append(e.streamOut, '}')
	return e.streamOut
}

// hold accounts n more bytes held for the response against maxOutput.
func (e *responseEncoder) hold(n int) *canonical.Error {
	e.held += n
	if e.held > e.maxOutput {
		return canonical.Errorf(canonical.CodeResourceExhausted, "response exceeds max_output_bytes (%d bytes of text and tool arguments)", e.maxOutput)
	}
	return nil
}

func (e *responseEncoder) lookup(id string) *toolCall {
	for _, c := range e.calls {
		if c.id == id {
			return c
		}
	}
	return nil
}

// result returns the call a tool result belongs to, adding it if unseen.
func (e *responseEncoder) result(id string) *toolCall {
	c := e.lookup(id)
	if c == nil {
		c = &toolCall{id: id}
		e.calls = append(e.calls, c)
	}
	return c
}

// final returns the one aggregated response: the echoed prompt and all
// text, and the tool calls and interrupt as parameters.
func (e *responseEncoder) final() []byte {
	text := e.text
	if e.echo != "" {
		text = append([]byte(e.echo), text...)
	}
	var params []kv
	if len(e.calls) > 0 {
		params = append(params, kv{key: keyToolCalls, val: toolCallsJSON(e.calls)})
	}
	params = append(params, e.interrupt...)
	if len(params) == 0 {
		e.resp.TextOutput = string(text)
		return e.out.marshal(&e.resp)
	}
	return e.build(string(text), params)
}

// build makes a response object with text_output and params, keys in
// alphabetical order as Triton writes them (a map's keys, sorted).
func (e *responseEncoder) build(text string, params []kv) []byte {
	all := make(map[string]string, len(params)+4)
	for _, p := range params {
		all[p.key] = p.val
	}
	if e.resp.ID != "" {
		all["id"] = e.resp.ID
	}
	all["model_name"], all["model_version"], all["text_output"] = e.resp.ModelName, modelVersion, text
	return e.out.marshal(all, json.Deterministic(true))
}

// toolCallsJSON is the aggregated tool_calls parameter: a JSON array of
// {"id","name","arguments"[,"result"|,"error"]}.
func toolCallsJSON(calls []*toolCall) string {
	type call struct {
		ID        string     `json:"id"`
		Name      string     `json:"name"`
		Arguments string     `json:"arguments"`
		Result    json.Value `json:"result,omitzero"`
		Error     string     `json:"error,omitempty"`
	}
	list := make([]call, len(calls))
	for i, c := range calls {
		list[i] = call{ID: c.id, Name: c.name, Arguments: string(c.args), Error: c.errMsg}
		if c.result != "" {
			list[i].Result = json.Value(c.result)
		}
	}
	return marshalText(list)
}

// jsonText is v as compact JSON ("null" for nil).
func jsonText(v *structpb.Value) string {
	if v == nil {
		return "null"
	}
	return marshalText(v.AsInterface())
}

// marshal is v's compact JSON, map keys sorted, or "null" when v has none
// (a NaN, say).
func marshal(v any) []byte {
	b, err := json.Marshal(v, json.AllowInvalidUTF8(true), json.Deterministic(true))
	if err != nil {
		return []byte("null")
	}
	return b
}

func marshalText(v any) string { return string(marshal(v)) }

// modelInputs are an upstream model's input datatypes by name, from its
// metadata (nil when unknown).
type modelInputs map[string]string

// Parameters the backend sets itself or keeps to the bridge.
var reservedParams = map[string]bool{
	"text_input": true, "stream": true, "exclude_input_in_output": true, "id": true,
	paramIncludeReasoning: true,
}

// encodeRequest builds the generate request body for req (reference
// section 8.2): text_input is the prompt, stream says which endpoint,
// exclude_input_in_output is true, the request id and the parameters
// follow, typed by the model's inputs when known. Parameters that fit
// neither an input nor a Triton parameter (objects, nulls, lists that are
// not BYTES inputs) are left out. A model with a max_tokens input gets
// maxTokens when the request sets none; bad_words and stop_words inputs get
// "". Keys: text_input first, then in alphabetical order.
func encodeRequest(req *canonical.Request, stream bool, inputs modelInputs, maxTokens int) []byte {
	params := req.GetParameters()
	numbers := req.GetExtensions()[extNumbers].GetStructValue().GetFields()
	body := requestBody{TextInput: canonical.PromptText(req), Members: map[string]json.Value{}}
	add := func(key string, val []byte) { body.Members[key] = val }
	add("stream", strconv.AppendBool(nil, stream))
	if inputs == nil || inputs["exclude_input_in_output"] != "" {
		add("exclude_input_in_output", []byte("true"))
	}
	if id := params["id"].GetStringValue(); id != "" {
		add("id", marshal(id))
	}
	for name, v := range params {
		if reservedParams[name] {
			continue
		}
		if b, ok := encodeParam(v, numbers[name].GetStringValue(), inputs[name], inputs == nil && (name == "bad_words" || name == "stop_words")); ok {
			add(name, b)
		}
	}
	if inputs["max_tokens"] != "" && params["max_tokens"] == nil {
		add("max_tokens", strconv.AppendInt(nil, int64(maxTokens), 10))
	}
	for _, name := range []string{"bad_words", "stop_words"} {
		if inputs[name] != "" && params[name] == nil {
			add(name, []byte(`""`))
		}
	}
	return marshal(body)
}

// requestBody is a generate request body: text_input first, then the
// other members in alphabetical order (marshal sorts a map's keys).
type requestBody struct {
	TextInput string                `json:"text_input"`
	Members   map[string]json.Value `json:",embed"`
}

// encodeParam renders one parameter as JSON for an input of datatype (""
// when it is not a known input: a Triton request parameter). lists says a
// list of strings may pass without a known datatype.
func encodeParam(v *structpb.Value, raw, datatype string, lists bool) ([]byte, bool) {
	switch datatype {
	case "":
		switch x := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			return marshal(x.StringValue), true
		case *structpb.Value_BoolValue:
			return strconv.AppendBool(nil, x.BoolValue), true
		case *structpb.Value_NumberValue:
			return appendNumber(nil, x.NumberValue, raw)
		case *structpb.Value_ListValue:
			if lists {
				return encodeStrings(x.ListValue)
			}
		}
	case "BYTES":
		switch x := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			return marshal(x.StringValue), true
		case *structpb.Value_ListValue:
			return encodeStrings(x.ListValue)
		}
	case "BOOL":
		switch x := v.GetKind().(type) {
		case *structpb.Value_BoolValue:
			return strconv.AppendBool(nil, x.BoolValue), true
		case *structpb.Value_StringValue:
			if b, err := strconv.ParseBool(x.StringValue); err == nil {
				return strconv.AppendBool(nil, b), true
			}
		}
	default: // numeric
		f, ok := 0.0, false
		switch x := v.GetKind().(type) {
		case *structpb.Value_NumberValue:
			f, ok = x.NumberValue, true
		case *structpb.Value_StringValue:
			var err error
			f, err = strconv.ParseFloat(x.StringValue, 64)
			ok, raw = err == nil, ""
		}
		if !ok {
			return nil, false
		}
		if datatype[0] == 'I' || datatype[0] == 'U' { // INT*, UINT*: integers only
			if f != math.Trunc(f) {
				return nil, false
			}
			if raw != "" && strings.ContainsAny(raw, ".eE") {
				raw = ""
			}
		}
		return appendNumber(nil, f, raw)
	}
	return nil, false
}

// encodeStrings renders a list of strings; other elements refuse it.
func encodeStrings(l *structpb.ListValue) ([]byte, bool) {
	list := make([]string, len(l.GetValues()))
	for i, v := range l.GetValues() {
		s, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, false
		}
		list[i] = s.StringValue
	}
	return marshal(list), true
}

// appendNumber writes v as a JSON number: its original text raw when that
// still reads as v (so ints stay ints and big integers keep their digits),
// else an integer when v is integral, else the shortest float. NaN and
// infinities have no JSON form.
func appendNumber(b []byte, v float64, raw string) ([]byte, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, false
	}
	if raw != "" {
		if f, err := strconv.ParseFloat(raw, 64); err == nil && f == v {
			return append(b, raw...), true
		}
	}
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.AppendInt(b, int64(v), 10), true
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64), true
}
