package glide

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// This file turns Glide request frames into canonical requests (the
// frontend's direction) and Glide response frames into canonical events
// (the backend's).

// requestFrame is a decoded, validated request frame.
type requestFrame struct {
	ID        string
	Cancel    bool // the Interlingua cancel extension: {"id": ..., "cancel": true}
	Message   wireMessage
	History   []wireMessage
	Overrides map[string]wireMessage // override_params: model id or name -> message
	Metadata  json.Value             // compact JSON object, or nil
}

// requestOptions read request frames as Glide's decoder (encoding/json)
// does: of duplicate members the last wins, and invalid UTF-8 in a string
// becomes U+FFFD.
var requestOptions = []json.Options{json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true)}

// The members of a request frame. The camelCase names are the 0.0.3
// schema, accepted as aliases.
const (
	memberID = iota
	memberMessage
	memberMessageHistory
	memberMessageHistory3
	memberOverrideParams
	memberOverrideMessage
	memberMetadata
	memberCancel
)

var requestMembers = []string{"id", "message", "message_history", "messageHistory", "override_params", "overrideMessage", "metadata", "cancel"}

// frameError is a refused request frame: the id when one could be read,
// the metadata to echo, and why (always naming the field or rule).
type frameError struct {
	ID       string
	Metadata json.Value
	Err      *canonical.Error
}

func (e *frameError) Error() string { return e.Err.Error() }

func invalid(format string, args ...any) *canonical.Error {
	return canonical.Errorf(canonical.CodeInvalidArgument, format, args...)
}

// isNull reports whether a member's value is absent or JSON null.
func isNull(v json.Value) bool { return len(v) == 0 || v.Kind() == 'n' }

// eachMember calls member with the name and value of each member of obj,
// a valid JSON object, in order. The value is valid until member returns.
func eachMember(obj json.Value, member func(name string, v json.Value)) {
	d := json.NewDecoder(bytes.NewReader(obj), requestOptions...)
	if _, err := d.ReadToken(); err != nil {
		return
	}
	for d.PeekKind() == '"' {
		tok, err := d.ReadToken()
		if err != nil {
			return
		}
		name := tok.String() // (before the next read voids tok)
		v, err := d.ReadValue()
		if err != nil {
			return
		}
		member(name, v)
	}
}

// readMembers returns the values of the members of obj named names[i],
// matched as Glide's decoder (encoding/json) matches them to its fields:
// without regard to case (strings.EqualFold), the last of duplicates
// winning. An absent member's value is nil.
func readMembers(obj json.Value, names ...string) []json.Value {
	vals := make([]json.Value, len(names))
	eachMember(obj, func(name string, v json.Value) {
		for i, n := range names {
			if strings.EqualFold(name, n) {
				vals[i] = v.Clone()
				return
			}
		}
	})
	return vals
}

// readFrame checks that data is one JSON value, as encoding/json does
// before it decodes anything, and returns it.
func readFrame(data []byte) (json.Value, *canonical.Error) {
	d := json.NewDecoder(bytes.NewReader(data), requestOptions...)
	v, err := d.ReadValue()
	var se *json.SyntacticError
	switch {
	case err == nil:
		if rest := bytes.TrimLeft(data[d.InputOffset():], " \t\r\n"); len(rest) > 0 {
			return nil, invalid("request frame is not valid JSON: invalid character %q after top-level value", rest[0])
		}
		return v, nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, invalid("request frame is not valid JSON: unexpected end of JSON input")
	case errors.As(err, &se):
		return nil, invalid("request frame is not valid JSON: %v at offset %d", se.Err, se.ByteOffset)
	}
	return nil, invalid("request frame is not valid JSON: %v", err)
}

// decodeRequest decodes and validates one request frame. The whole frame
// is in data (WebSocket delivers whole messages), so there is no partial
// state; the frontend replies to a *frameError with payload_parse_error
// and keeps reading.
func decodeRequest(data []byte) (*requestFrame, *frameError) {
	frame, err := readFrame(data)
	if err != nil {
		return nil, &frameError{Err: err}
	}
	var raw []json.Value
	switch k := frame.Kind(); k {
	case '{':
		raw = readMembers(frame, requestMembers...)
	case 'n': // encoding/json decodes null into a struct as nothing
		raw = make([]json.Value, len(requestMembers))
	default:
		return nil, &frameError{Err: invalid("request frame must be a JSON object, got %s", kindName(k))}
	}
	f := &requestFrame{}
	fe := &frameError{}
	if !isNull(raw[memberID]) && json.Unmarshal(raw[memberID], &f.ID, requestOptions...) != nil {
		fe.Err = invalid("id: must be a string")
		return nil, fe
	}
	fe.ID = f.ID
	if md := raw[memberMetadata]; !isNull(md) {
		if md.Kind() != '{' {
			fe.Err = invalid("metadata: must be an object")
			return nil, fe
		}
		_ = md.Compact(requestOptions...) // (valid JSON: it cannot fail)
		f.Metadata, fe.Metadata = md, md
	}
	if f.ID == "" {
		fe.Err = invalid("id: required, a non-empty string")
		return nil, fe
	}
	if !isNull(raw[memberCancel]) {
		if json.Unmarshal(raw[memberCancel], &f.Cancel) != nil {
			fe.Err = invalid("cancel: must be a boolean")
			return nil, fe
		}
		if f.Cancel {
			return f, nil // the rest of a cancel frame is ignored
		}
	}
	if fe.Err = f.decodeMessages(raw); fe.Err != nil {
		return nil, fe
	}
	if fe.Err = f.decodeOverrides(raw); fe.Err != nil {
		return nil, fe
	}
	return f, nil
}

// kindName names a JSON kind as encoding/json's type errors do.
func kindName(k json.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case '[':
		return "array"
	}
	return "bool"
}

// decodeMessages reads the message and message_history (or the 0.0.3
// messageHistory).
func (f *requestFrame) decodeMessages(raw []json.Value) *canonical.Error {
	if isNull(raw[memberMessage]) {
		return invalid("message: required")
	}
	var err *canonical.Error
	if f.Message, err = decodeMessage("message", raw[memberMessage]); err != nil {
		return err
	}
	hist, histName := raw[memberMessageHistory], "message_history"
	if isNull(hist) {
		hist, histName = raw[memberMessageHistory3], "messageHistory"
	}
	if isNull(hist) {
		return nil
	}
	var items []json.Value
	if json.Unmarshal(hist, &items, requestOptions...) != nil {
		return invalid("%s: must be an array of messages", histName)
	}
	f.History = make([]wireMessage, len(items))
	for i, it := range items {
		if f.History[i], err = decodeMessage(histName+"["+strconv.Itoa(i)+"]", it); err != nil {
			return err
		}
	}
	return nil
}

// decodeOverrides reads override_params {"<model>": {"message": {...}}},
// or the 0.0.3 overrideMessage {"model_id": ..., "message": {...}}.
func (f *requestFrame) decodeOverrides(raw []json.Value) *canonical.Error {
	if params := raw[memberOverrideParams]; !isNull(params) {
		if params.Kind() != '{' {
			return invalid("override_params: must be an object keyed by model id or name")
		}
		var names []string // in order; of duplicates the last value counts
		values := map[string]json.Value{}
		eachMember(params, func(name string, v json.Value) {
			if _, ok := values[name]; !ok {
				names = append(names, name)
			}
			values[name] = v.Clone()
		})
		f.Overrides = make(map[string]wireMessage, len(values))
		for _, k := range names {
			v := values[k]
			if v.Kind() != '{' {
				return invalid("override_params[%q]: must be an object", k)
			}
			msg := readMembers(v, "message")[0]
			if isNull(msg) {
				continue // no message to override
			}
			m, err := decodeMessage(fmt.Sprintf("override_params[%q].message", k), msg)
			if err != nil {
				return err
			}
			f.Overrides[k] = m
		}
		return nil
	}
	if om := raw[memberOverrideMessage]; !isNull(om) {
		if om.Kind() != '{' {
			return invalid("overrideMessage: must be an object")
		}
		p := readMembers(om, "model_id", "message")
		var id string
		if len(p[0]) == 0 || json.Unmarshal(p[0], &id, requestOptions...) != nil || id == "" {
			return invalid("overrideMessage.model_id: required, a string")
		}
		msg, err := decodeMessage("overrideMessage.message", p[1])
		if err != nil {
			return err
		}
		f.Overrides = map[string]wireMessage{id: msg}
	}
	return nil
}

// decodeMessage decodes a {role, content} object; content is required and
// a string, role a string ("user" when absent).
func decodeMessage(field string, raw json.Value) (wireMessage, *canonical.Error) {
	if isNull(raw) || raw.Kind() != '{' {
		return wireMessage{}, invalid("%s: must be an object with role and content", field)
	}
	m := readMembers(raw, "role", "content")
	var w wireMessage
	if isNull(m[1]) {
		return w, invalid("%s.content: required", field)
	}
	if json.Unmarshal(m[1], &w.Content, requestOptions...) != nil {
		return w, invalid("%s.content: must be a string", field)
	}
	if !isNull(m[0]) && json.Unmarshal(m[0], &w.Role, requestOptions...) != nil {
		return w, invalid("%s.role: must be a string", field)
	}
	if w.Role == "" {
		w.Role = "user"
	}
	return w, nil
}

// message is the message to send to a model: the override for its id if
// any, else for its name, else the request's (the precedence Glide's
// ChatRequest.Params intends).
func (f *requestFrame) message(modelID, modelName string) wireMessage {
	if m, ok := f.Overrides[modelID]; ok {
		return m
	}
	if m, ok := f.Overrides[modelName]; ok {
		return m
	}
	return f.Message
}

// canonical builds the canonical request for router, whose model has id
// modelID (the serving backend) and name router. The conversation is one
// input named "prompt" whose children are the history then the message,
// each a text leaf with its role. The id, metadata and override_params
// travel as extensions; metadata's scalar values also as Request.Metadata.
func (f *requestFrame) canonical(router, modelID string) *canonical.Request {
	leaves := make([]*canonical.Node, 0, len(f.History)+1)
	for _, m := range f.History {
		leaves = append(leaves, canonical.TextNode(m.Role, m.Content))
	}
	m := f.message(modelID, router)
	leaves = append(leaves, canonical.TextNode(m.Role, m.Content))
	req := &canonical.Request{
		Target:     router,
		Inputs:     []*canonical.NamedNode{{Name: "prompt", Node: &canonical.Node{Children: leaves}}},
		Extensions: map[string]*structpb.Value{extID: structpb.NewStringValue(f.ID)},
	}
	if len(f.Metadata) > 0 {
		if md, err := readAny(json.NewDecoder(bytes.NewReader(f.Metadata), requestOptions...)); err == nil {
			if v := canonical.Value(md); v != nil {
				req.Extensions[extMetadata] = v
			}
			for k, v := range md.(map[string]any) {
				switch x := v.(type) {
				case string:
					if req.Metadata == nil {
						req.Metadata = map[string]string{}
					}
					req.Metadata[k] = x
				case float64, bool:
					if req.Metadata == nil {
						req.Metadata = map[string]string{}
					}
					b, _ := json.Marshal(x)
					req.Metadata[k] = string(b)
				}
			}
		}
	}
	if len(f.Overrides) > 0 {
		ov := make(map[string]any, len(f.Overrides))
		for k, m := range f.Overrides {
			ov[k] = map[string]any{"message": map[string]any{"role": m.Role, "content": m.Content}}
		}
		if v := canonical.Value(ov); v != nil {
			req.Extensions[extOverrideParams] = v
		}
	}
	return req
}

// readAny reads the next value of d as encoding/json decodes it into an
// any: objects as map[string]any, of duplicate names the last one whole
// (json/v2 would merge two objects), arrays as []any, numbers as float64.
func readAny(d *json.Decoder) (any, error) {
	switch d.PeekKind() {
	case '{':
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for d.PeekKind() == '"' {
			tok, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			name := tok.String()
			if m[name], err = readAny(d); err != nil {
				return nil, err
			}
		}
		_, err := d.ReadToken()
		return m, err
	case '[':
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		a := []any{}
		for d.PeekKind() != ']' {
			v, err := readAny(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.ReadToken()
		return a, err
	}
	var v any
	err := json.UnmarshalDecode(d, &v, requestOptions...)
	return v, err
}

// responseFrame is Glide's ChatStreamMessage as the backend reads it: less
// created_at, router_id and the echoed metadata, which it has no use for
// (replyFrame is the whole of it).
type responseFrame struct {
	ID    string     `json:"id"`
	Chunk *wireChunk `json:"chunk"`
	Error *wireError `json:"error"`
}

// wireChunk is Glide's ChatStreamChunk. The frontend leaves
// model_response.metadata out.
type wireChunk struct {
	ModelID       string `json:"model_id"`
	ProviderID    string `json:"provider_id"`
	ModelName     string `json:"model_name"`
	Cached        bool   `json:"cached"`
	ModelResponse struct {
		Metadata struct {
			ResponseID string `json:"response_id"` // OpenAI, Azure; Cohere's final chunk
		} `json:"metadata,omitzero"`
		Message wireMessage `json:"message"`
	} `json:"model_response"`
	FinishReason *string `json:"finish_reason,omitzero"`
}

// wireError is Glide's ChatStreamError.
type wireError struct {
	Name         string  `json:"name"`
	Message      string  `json:"message"`
	FinishReason *string `json:"finish_reason,omitzero"`
}

// responseOptions read response frames as our reading of them always
// had it (encoding/json's): member names match without regard to case, of
// duplicates the last wins, invalid UTF-8 becomes U+FFFD. (json/v2's
// folding also ignores '_' and '-', which encoding/json's did not: no
// difference for an upstream Glide, which writes names as tagged.)
var responseOptions = json.JoinOptions(json.MatchCaseInsensitiveNames(true),
	json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

// decodeResponse decodes one response frame. A frame must carry an id and
// exactly one of chunk and error.
func decodeResponse(data []byte) (*responseFrame, error) {
	var f responseFrame
	if err := json.Unmarshal(data, &f, responseOptions); err != nil {
		return nil, canonical.Errorf(canonical.CodeInternal, "upstream frame is not a Glide ChatStreamMessage: %v", err)
	}
	switch {
	case f.ID == "":
		return &f, canonical.Errorf(canonical.CodeInternal, "upstream frame has no id")
	case f.Chunk == nil && f.Error == nil:
		return &f, canonical.Errorf(canonical.CodeInternal, "upstream frame for %q has neither chunk nor error", f.ID)
	case f.Chunk != nil && f.Error != nil:
		return &f, canonical.Errorf(canonical.CodeInternal, "upstream frame for %q has both chunk and error", f.ID)
	}
	return &f, nil
}

// responseDecoder turns one request's response frames into its canonical
// run: chunks become text deltas of a message per model (a fallback model
// starts a new message), model_unavailable without finish_reason a
// non-terminal error event, the chunk with finish_reason the message finish
// and the completed event, and any other error the failed (or cancelled)
// terminal event. It is not safe for concurrent use.
type responseDecoder struct {
	b       *canonical.Builder
	msgOpen bool
	model   model // of the open message

	// The open message's text block, once Builder.Text has opened it. The
	// deltas that follow are made with canonical.NewTextDelta: the same
	// events (b has no namespace; Builder keeps no state for deltas), less
	// the block lookup and checks Builder.Text repeats on every delta.
	textOpen  bool
	textIndex uint32
}

// newResponseDecoder returns a decoder and the run's first events.
func newResponseDecoder(out []*canonical.Event) (*responseDecoder, []*canonical.Event) {
	d := &responseDecoder{b: canonical.NewBuilder()}
	return d, d.b.Lifecycle(out, canonical.StatusRunning)
}

// Ended reports whether the run's terminal event has been produced.
func (d *responseDecoder) Ended() bool { return d.b.Ended() }

// Frame appends the events f produces.
func (d *responseDecoder) Frame(out []*canonical.Event, f *responseFrame) []*canonical.Event {
	if d.b.Ended() {
		return out
	}
	if c := f.Chunk; c != nil {
		return d.chunk(out, c)
	}
	e := f.Error
	code, msg := codeOf(e.Name, e.Message)
	if e.Name == nameModelUnavailable && e.FinishReason == nil {
		// Not terminal: the router falls back to its next model, whose
		// output starts again in a new message.
		out = d.b.FinishMessage(out, canonical.FinishError, nil)
		d.msgOpen, d.textOpen = false, false
		return d.b.Emit(out, &canonical.Event{Kind: &canonical.KindError{Error: &canonical.ErrorProto{Code: uint32(code), Message: msg}}})
	}
	status := canonical.StatusFailed
	if code == canonical.CodeCanceled {
		status = canonical.StatusCancelled
	}
	return d.b.End(out, status, canonical.WireError(code, msg))
}

func (d *responseDecoder) chunk(out []*canonical.Event, c *wireChunk) []*canonical.Event {
	m := model{ID: c.ModelID, Provider: c.ProviderID, Name: c.ModelName}
	if d.msgOpen && m != d.model {
		out = d.b.FinishMessage(out, canonical.FinishOther, nil)
		d.msgOpen, d.textOpen = false, false
	}
	if !d.msgOpen {
		d.model, d.msgOpen = m, true
		id := c.ModelResponse.Metadata.ResponseID
		role := c.ModelResponse.Message.Role
		if role == "" || role == "model" { // Cohere's name for the assistant
			role = "assistant"
		}
		out = d.b.StartMessage(out, id, role)
		ms := out[len(out)-1].GetMessageStart()
		ms.Metadata = map[string]*structpb.Value{}
		for k, v := range map[string]string{metaModelID: m.ID, metaProvider: m.Provider, metaModel: m.Name} {
			if v != "" {
				ms.Metadata[k] = structpb.NewStringValue(v)
			}
		}
	}
	switch text := c.ModelResponse.Message.Content; {
	case text == "":
	case d.textOpen:
		out = append(out, canonical.NewTextDelta(d.textIndex, text))
	default:
		out = d.b.Text(out, text)
		d.textOpen, d.textIndex = true, out[len(out)-1].GetBlockDelta().GetIndex()
	}
	if c.FinishReason == nil {
		return out
	}
	reason := finishReason(*c.FinishReason)
	out = d.b.FinishMessage(out, reason, nil)
	d.msgOpen, d.textOpen = false, false
	if reason == canonical.FinishError {
		return d.b.End(out, canonical.StatusFailed, canonical.WireError(canonical.CodeUnknown, "upstream chunk finished with finish_reason \"error\""))
	}
	return d.b.End(out, canonical.StatusCompleted, nil)
}

// End appends the finishes still owed and the terminal event (status, err)
// unless the run has ended.
func (d *responseDecoder) End(out []*canonical.Event, status canonical.RunStatus, err *canonical.Error) []*canonical.Event {
	return d.b.End(out, status, err)
}
