package triton

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/textarena"
)

// Extension keys this adapter sets on canonical requests.
const (
	// extRequestID carries the request's "id" (also a string parameter).
	extRequestID = "triton.request_id"
	// extNumbers maps a numeric parameter's name to its JSON text, so an
	// int stays an int and a uint64 seed keeps every digit on the way to a
	// Triton backend (canonical parameters are float64).
	extNumbers = "triton.numbers"
)

// Request parameters the frontend reads itself.
const (
	paramIncludeReasoning = "include_reasoning"
	paramSampling         = "sampling_parameters"
)

// generateRequest is a decoded generate request.
type generateRequest struct {
	id        string
	prompt    string
	stream    bool // the "stream" input
	exclude   bool // the "exclude_input_in_output" input; true unless false was sent
	reasoning bool // parameter include_reasoning is true
	req       *canonical.Request
}

// requestDecoder maps a generate request body onto the virtual model's
// inputs and request parameters as Triton's ConvertGenerateRequest and
// ExactMappingInput do (reference section 2).
type requestDecoder struct {
	maxInput int64
	consumed int64
	added    map[string]bool // inputs added, for the duplicate check
	g        *generateRequest
	params   map[string]*structpb.Value
	numbers  map[string]*structpb.Value
}

func invalid(format string, args ...any) *canonical.Error {
	return canonical.Errorf(canonical.CodeInvalidArgument, format, args...)
}

func internal(msg string) *canonical.Error {
	return &canonical.Error{Code: canonical.CodeInternal, Message: msg}
}

// decodeRequest decodes body, a generate request for model. maxInput bounds
// the inputs' decoded size (Triton's --http-max-input-size; the body itself
// is bounded by the caller). Errors carry Triton's messages and the code
// whose status Triton answers with (errors.go).
func decodeRequest(body []byte, model string, maxInput int64) (*generateRequest, *canonical.Error) {
	root, serr := parseTree(body)
	if serr != nil {
		switch {
		case serr.tooDeep:
			return nil, invalid("%s", serr.msg)
		case serr.tooMany:
			return nil, canonical.Errorf(canonical.CodeResourceExhausted, "%s", serr.msg)
		}
		return nil, internal("failed to parse the request JSON buffer: " + serr.Error())
	}
	g := &generateRequest{exclude: true}
	if root.kind == jObject {
		if v, ok := find(root.obj, "id"); ok {
			if v.kind != jString {
				return nil, internal("Unable to parse 'id': attempt to access JSON non-string as string")
			}
			g.id = v.s
		}
	}
	if root.kind != jObject {
		return nil, internal("attempt to get members for non-object")
	}
	d := &requestDecoder{
		maxInput: maxInput,
		added:    map[string]bool{},
		g:        g,
		params:   map[string]*structpb.Value{},
		numbers:  map[string]*structpb.Value{},
	}
	if err := d.convert(root.obj, true); err != nil {
		return nil, err
	}
	if !d.added["text_input"] {
		return nil, d.missingInputs(model)
	}
	d.expandSampling()
	if v := d.params[paramIncludeReasoning]; v != nil {
		g.reasoning = v.GetBoolValue()
	}
	req := &canonical.Request{
		Target:     model,
		Inputs:     []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", g.prompt)}},
		Parameters: d.params,
	}
	if g.id != "" || len(d.numbers) > 0 {
		req.Extensions = map[string]*structpb.Value{}
		if g.id != "" {
			req.Extensions[extRequestID] = structpb.NewStringValue(g.id)
		}
		if len(d.numbers) > 0 {
			req.Extensions[extNumbers] = structpb.NewStructValue(&structpb.Struct{Fields: d.numbers})
		}
	}
	g.req = req
	return g, nil
}

// convert maps the members of one object in document order. top is true
// for the request object, whose "parameters" key is a nested schema.
func (d *requestDecoder) convert(obj []jmember, top bool) *canonical.Error {
	for _, m := range obj {
		if top && m.key == "parameters" {
			v, _ := find(obj, m.key)
			if v.kind != jObject {
				return internal("Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object")
			}
			if err := d.convert(v.obj, false); err != nil {
				err.Message = "Converting keyword: 'parameters': " + err.Message
				return err
			}
			continue
		}
		v, _ := find(obj, m.key) // Triton reads the first of duplicate keys
		var err *canonical.Error
		if spec := inputSpec(m.key); spec != nil {
			err = d.tensor(spec, v)
		} else {
			err = d.param(m.key, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// param sets a request parameter: string, int, bool or double.
func (d *requestDecoder) param(name string, v jvalue) *canonical.Error {
	switch v.kind {
	case jString:
		d.params[name] = structpb.NewStringValue(v.s)
	case jTrue, jFalse:
		d.params[name] = structpb.NewBoolValue(v.kind == jTrue)
	case jNumber:
		d.params[name] = structpb.NewNumberValue(v.f)
		d.numbers[name] = structpb.NewStringValue(v.s)
	default:
		return invalid("parameter '%s' has invalid type. It should be either 'int', 'bool', or 'string'.", name)
	}
	return nil
}

// leaves appends the non-array values of v in order (Triton reads nested
// arrays recursively).
func leaves(out []jvalue, v jvalue) []jvalue {
	if v.kind != jArray {
		return append(out, v)
	}
	for _, el := range v.arr {
		out = leaves(out, el)
	}
	return out
}

// tensor converts an input as ExactMappingInput does: size, shape, then
// data, each with Triton's message; then records it as the prompt or a
// typed parameter.
func (d *requestDecoder) tensor(spec *tensorSpec, v jvalue) *canonical.Error {
	count := 1
	if v.kind == jArray {
		count = len(v.arr)
	}
	vals := leaves(nil, v)
	var size int64
	if spec.datatype == "BYTES" {
		for _, l := range vals {
			if l.kind != jString {
				return internal("Unable to parse JSON bytes array: attempt to access JSON non-string as string")
			}
			size += int64(len(l.s)) + 4
		}
	} else {
		size = int64(count) * int64(spec.elemSize)
	}
	if size == 0 {
		if err := d.add(spec.name); err != nil {
			return err
		}
		if spec.single() {
			return invalid("input '%s' must have exactly 1 element", spec.name)
		}
		d.params[spec.name] = structpb.NewListValue(&structpb.ListValue{})
		return nil
	}
	if size+d.consumed > d.maxInput {
		return invalid("request size of %d bytes with input '%s' of size %d bytes exceeds the maximum allowed input size of %d. Use --http-max-input-size to increase the limit.",
			d.consumed, spec.name, size, d.maxInput)
	}
	d.consumed += size
	if spec.single() && count != 1 {
		return invalid("input '%s' must have exactly 1 element", spec.name)
	}
	if spec.datatype == "BYTES" {
		if spec.single() && len(vals) != 1 {
			return invalid("input '%s' must have exactly 1 element", spec.name)
		}
	} else {
		for i, l := range vals {
			if i >= count {
				return internal("Unable to parse 'data': Shape does not match true shape of 'data' field")
			}
			if msg := checkElement(spec.datatype, l); msg != "" {
				return internal("Unable to parse 'data': " + msg)
			}
		}
		if len(vals) != count {
			return internal("Failed to parse 'data' field: shape does not match true shape")
		}
	}
	if err := d.add(spec.name); err != nil {
		return err
	}
	d.record(spec, vals)
	return nil
}

// checkElement is TritonJson's type check for one tensor element.
func checkElement(datatype string, v jvalue) string {
	switch datatype {
	case "BOOL":
		if v.kind != jTrue && v.kind != jFalse {
			return "attempt to access JSON non-boolean as boolean"
		}
	case "INT32":
		if v.kind != jNumber || v.num != numInt {
			return "attempt to access JSON non-signed-integer as signed-integer"
		}
	case "UINT64":
		if v.kind != jNumber || v.num == numDouble || (v.num == numInt && v.i < 0) {
			return "attempt to access JSON non-unsigned-integer as unsigned-integer"
		}
	case "FP32":
		if v.kind != jNumber {
			return "attempt to access JSON non-number as double"
		}
	}
	return ""
}

func (d *requestDecoder) add(name string) *canonical.Error {
	if d.added[name] {
		return invalid("input '%s' already exists in request", name)
	}
	d.added[name] = true
	return nil
}

// record keeps a converted input: text_input is the prompt, the others
// become typed parameters.
func (d *requestDecoder) record(spec *tensorSpec, vals []jvalue) {
	switch spec.name {
	case "text_input":
		d.g.prompt = vals[0].s
		return
	case "stream":
		d.g.stream = vals[0].kind == jTrue
	case "exclude_input_in_output":
		d.g.exclude = vals[0].kind == jTrue
	}
	if !spec.single() {
		list := make([]*structpb.Value, len(vals))
		for i, l := range vals {
			list[i] = structpb.NewStringValue(l.s)
		}
		d.params[spec.name] = structpb.NewListValue(&structpb.ListValue{Values: list})
		return
	}
	d.param(spec.name, vals[0])
}

// missingInputs is the core's error for a request without text_input.
func (d *requestDecoder) missingInputs(model string) *canonical.Error {
	id := d.g.id
	if id == "" {
		id = "<id_unknown>"
	}
	names := make([]string, 0, len(d.added))
	for n := range d.added {
		names = append(names, "'"+n+"'")
	}
	slices.Sort(names)
	return invalid("[request id: %s] expected number of inputs between 1 and %d but got %d inputs for model '%s'. Got input(s) [%s], but missing required input(s) ['text_input']. Please provide all required input(s).",
		id, len(virtualInputs), len(names), model, strings.Join(names, ","))
}

// expandSampling copies the scalar members of a vLLM-style
// sampling_parameters JSON string into parameters not set otherwise, so
// backends other than vLLM see max_tokens, temperature and the rest.
func (d *requestDecoder) expandSampling() {
	s := d.params[paramSampling].GetStringValue()
	if s == "" {
		return
	}
	// The first JSON value of the string, the last of duplicate members
	// winning, as our reading of it always had it.
	var m map[string]json.Value
	if json.UnmarshalDecode(json.NewDecoder(strings.NewReader(s), json.AllowDuplicateNames(true)), &m) != nil {
		return
	}
	for k, raw := range m {
		if _, set := d.params[k]; set {
			continue
		}
		switch raw.Kind() {
		case '"':
			var x string
			if json.Unmarshal(raw, &x) == nil {
				d.params[k] = structpb.NewStringValue(x)
			}
		case 't', 'f':
			d.params[k] = structpb.NewBoolValue(raw.Kind() == 't')
		case '0':
			f, err := strconv.ParseFloat(string(raw), 64)
			if err != nil {
				continue
			}
			d.params[k] = structpb.NewNumberValue(f)
			d.numbers[k] = structpb.NewStringValue(string(raw))
		}
	}
}

// responseFields are the members of one Triton response object the backend
// reads; text is the responseReader's buffer.
type responseFields struct {
	text         []byte
	hasText      bool
	err          string
	hasErr       bool
	modelName    string
	modelVersion string
	finishReason string
	numInput     int64
	numOutput    int64
}

// setAny reports whether f holds anything but its text (which only
// text_output sets).
func (f *responseFields) setAny() bool {
	return f.hasErr || f.modelName != "" || f.modelVersion != "" || f.finishReason != "" || f.numInput != 0 || f.numOutput != 0
}

// validUTF8 is s as a string with invalid bytes replaced: messages and
// names end up in protobuf strings, which must be UTF-8.
func validUTF8(s []byte) string {
	if utf8.Valid(s) {
		return string(s)
	}
	return strings.ToValidUTF8(string(s), "\uFFFD")
}

// streamDecoder turns one upstream Triton response stream into canonical
// events: the SSE body of /generate_stream fed in chunks cut anywhere
// (Feed, End), or the one JSON object of /generate (Object). Text passes
// through a UTF-8 accumulator, so a rune split across responses or reads is
// held back, never emitted broken. One per stream; not safe for concurrent
// use.
type streamDecoder struct {
	sse        sse.Parser
	events     []sse.Event
	cumulative bool
	status     int // the response's HTTP status; an in-band error's code derives from it
	b          *canonical.Builder
	acc        canonical.TextAccumulator
	arena      textarena.Arena // the strings of text deltas
	slowText   bool            // every text through acc.Append (tests compare the two)
	f          responseFields
	resp       responseReader
	prev       []byte // cumulative mode: the text so far
	started    bool   // the message is open
	reason     canonical.FinishReason
	usage      *canonical.Usage
}

// newStreamDecoder returns a decoder for a response with HTTP status;
// maxEvent bounds one SSE event (sse.Parser.MaxEventBytes); messageID
// prefixes the message ids it makes.
func newStreamDecoder(cumulative bool, maxEvent, status int, messageID string) *streamDecoder {
	d := &streamDecoder{cumulative: cumulative, status: status, b: canonical.NewBuilder()}
	d.sse.MaxEventBytes = maxEvent
	d.sse.DispatchIncompleteAtEnd = true
	d.sse.BorrowData = true // each event is decoded before the next Feed
	d.b.MessageID = messageID
	return d
}

// Ended reports whether the terminal event has been produced.
func (d *streamDecoder) Ended() bool { return d.b.Ended() }

// Feed parses chunk, cut anywhere, and appends the events it completes. An
// in-band error appends the run's failed terminal event; later input is
// ignored, as Triton ends the stream after it. A malformed response or an
// event over the limit is returned as an error; the caller then ends the
// run with Fail.
func (d *streamDecoder) Feed(chunk []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	if d.b.Ended() {
		return out, nil
	}
	var perr error
	d.events, perr = d.sse.Feed(chunk, d.events[:0])
	return d.dispatch(out, perr)
}

// End ends the input: an event still pending is taken as complete, held
// bytes of an incomplete rune become U+FFFD, the message is finished and
// the run completed.
func (d *streamDecoder) End(out []*canonical.Event) ([]*canonical.Event, error) {
	if d.b.Ended() {
		return out, nil
	}
	var perr error
	d.events, perr = d.sse.End(d.events[:0])
	out, err := d.dispatch(out, perr)
	if err != nil || d.b.Ended() {
		return out, err
	}
	return d.complete(out), nil
}

// Object decodes the one JSON response of /generate and ends the run.
func (d *streamDecoder) Object(body []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	out, err := d.response(body, out)
	if err != nil || d.b.Ended() {
		return out, err
	}
	return d.complete(out), nil
}

// Fail ends the run failed with err (or cancelled, for a cancellation).
func (d *streamDecoder) Fail(out []*canonical.Event, err error) []*canonical.Event {
	ce := canonical.AsError(err)
	st := canonical.StatusFailed
	if ce.Code == canonical.CodeCanceled {
		st = canonical.StatusCancelled
	}
	return d.b.End(out, st, ce)
}

func (d *streamDecoder) dispatch(out []*canonical.Event, perr error) ([]*canonical.Event, error) {
	for i := range d.events {
		ev := &d.events[i]
		if !d.b.Ended() {
			var err error
			if out, err = d.event(ev, out); err != nil {
				clear(d.events[i:])
				return out, err
			}
		}
		*ev = sse.Event{} // drop the data reference
	}
	return out, perr
}

// event handles one SSE event: a Triton response object; an "event:
// error" event (not Triton's, but genai-perf counts it) or a "[DONE]"
// terminator (some proxies add one) are understood too.
func (d *streamDecoder) event(ev *sse.Event, out []*canonical.Event) ([]*canonical.Event, error) {
	if strings.Contains(ev.Event, "error") {
		msg := validUTF8(ev.Data)
		return d.b.End(out, canonical.StatusFailed, canonical.WireError(d.inBandCode(msg), msg)), nil
	}
	if string(bytes.TrimSpace(ev.Data)) == "[DONE]" {
		return out, nil
	}
	return d.response(ev.Data, out)
}

// inBandCode is the code of an error object the upstream sent: its HTTP
// status says, unless that was 200 (a failure after the first response,
// which Triton sends with no code), then Internal.
func (d *streamDecoder) inBandCode(msg string) canonical.Code {
	if d.status >= 200 && d.status < 300 {
		return canonical.CodeInternal
	}
	return codeOf(d.status, msg)
}

func (d *streamDecoder) response(data []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	if err := d.resp.read(data, &d.f, !d.started); err != nil {
		return out, err
	}
	f := &d.f
	if f.hasErr {
		return d.b.End(out, canonical.StatusFailed, canonical.WireError(d.inBandCode(f.err), f.err)), nil
	}
	if !d.started {
		d.started = true
		out = d.b.StartMessage(out, "", "assistant")
		md := map[string]*structpb.Value{"provider": structpb.NewStringValue("triton")}
		if f.modelName != "" {
			md["model"] = structpb.NewStringValue(f.modelName)
		}
		if f.modelVersion != "" {
			md["model_version"] = structpb.NewStringValue(f.modelVersion)
		}
		out[len(out)-1].GetMessageStart().Metadata = md
	}
	if f.hasText {
		text := f.text
		if d.cumulative {
			if !bytes.HasPrefix(text, d.prev) {
				return out, canonical.Errorf(canonical.CodeInternal, "cumulative text_output does not extend the text received so far")
			}
			text = text[len(d.prev):]
			d.prev = append(d.prev, text...)
		}
		out = d.b.Text(out, d.text(text))
	}
	switch f.finishReason {
	case "":
	case "stop":
		d.reason = canonical.FinishStop
	case "length":
		d.reason = canonical.FinishLength
	default:
		d.reason = canonical.FinishOther
	}
	if f.numInput != 0 || f.numOutput != 0 {
		d.usage = &canonical.Usage{InputTokens: f.numInput, OutputTokens: f.numOutput, TotalTokens: f.numInput + f.numOutput}
	}
	return out, nil
}

// text returns the whole runes of a text_output chunk as a string, as
// acc.Append does. The common chunk, whole UTF-8 with nothing held back,
// takes its string from the arena: no allocation of its own.
func (d *streamDecoder) text(b []byte) string {
	if !d.slowText && d.acc.Pending() == 0 && utf8.Valid(b) {
		return d.arena.String(b)
	}
	return d.acc.Append(b)
}

// complete flushes the text held back and ends the run completed.
func (d *streamDecoder) complete(out []*canonical.Event) []*canonical.Event {
	if !d.started {
		d.started = true
		out = d.b.StartMessage(out, "", "assistant")
	}
	out = d.b.Text(out, d.acc.Flush())
	reason := d.reason
	if reason == 0 {
		reason = canonical.FinishStop
	}
	out = d.b.FinishMessage(out, reason, d.usage)
	return d.b.End(out, canonical.StatusCompleted, nil)
}
