package glide

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
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
	Metadata  []byte                 // compact JSON object, or nil
}

// rawRequest is the first decoding pass: every field kept raw so that its
// type can be checked and named. encoding/json matches keys without regard
// to case, as Glide's decoder does. The camelCase keys are the 0.0.3 schema,
// accepted as aliases.
type rawRequest struct {
	ID              json.RawMessage `json:"id"`
	Message         json.RawMessage `json:"message"`
	MessageHistory  json.RawMessage `json:"message_history"`
	MessageHistory3 json.RawMessage `json:"messageHistory"`
	OverrideParams  json.RawMessage `json:"override_params"`
	OverrideMessage json.RawMessage `json:"overrideMessage"`
	Metadata        json.RawMessage `json:"metadata"`
	Cancel          json.RawMessage `json:"cancel"`
}

// frameError is a refused request frame: the id when one could be read,
// the metadata to echo, and why (always naming the field or rule).
type frameError struct {
	ID       string
	Metadata []byte
	Err      *canonical.Error
}

func (e *frameError) Error() string { return e.Err.Error() }

func invalid(format string, args ...any) *canonical.Error {
	return canonical.Errorf(canonical.CodeInvalidArgument, format, args...)
}

// isNull reports whether a raw field is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// decodeRequest decodes and validates one request frame. The whole frame
// is in data (WebSocket delivers whole messages), so there is no partial
// state; the frontend replies to a *frameError with payload_parse_error
// and keeps reading.
func decodeRequest(data []byte) (*requestFrame, *frameError) {
	var raw rawRequest
	if err := json.Unmarshal(data, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return nil, &frameError{Err: invalid("request frame must be a JSON object, got %s", te.Value)}
		}
		return nil, &frameError{Err: invalid("request frame is not valid JSON: %v", err)}
	}
	f := &requestFrame{}
	fe := &frameError{}
	if !isNull(raw.ID) {
		if err := json.Unmarshal(raw.ID, &f.ID); err != nil {
			fe.Err = invalid("id: must be a string")
			return nil, fe
		}
	}
	fe.ID = f.ID
	if !isNull(raw.Metadata) {
		if raw.Metadata[0] != '{' {
			fe.Err = invalid("metadata: must be an object")
			return nil, fe
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw.Metadata); err != nil {
			fe.Err = invalid("metadata: %v", err)
			return nil, fe
		}
		f.Metadata = buf.Bytes()
		fe.Metadata = f.Metadata
	}
	if f.ID == "" {
		fe.Err = invalid("id: required, a non-empty string")
		return nil, fe
	}
	if !isNull(raw.Cancel) {
		if err := json.Unmarshal(raw.Cancel, &f.Cancel); err != nil {
			fe.Err = invalid("cancel: must be a boolean")
			return nil, fe
		}
		if f.Cancel {
			return f, nil // the rest of a cancel frame is ignored
		}
	}
	if isNull(raw.Message) {
		fe.Err = invalid("message: required")
		return nil, fe
	}
	var err *canonical.Error
	if f.Message, err = decodeMessage("message", raw.Message); err != nil {
		fe.Err = err
		return nil, fe
	}
	hist, histName := raw.MessageHistory, "message_history"
	if isNull(hist) {
		hist, histName = raw.MessageHistory3, "messageHistory"
	}
	if !isNull(hist) {
		var items []json.RawMessage
		if json.Unmarshal(hist, &items) != nil {
			fe.Err = invalid("%s: must be an array of messages", histName)
			return nil, fe
		}
		f.History = make([]wireMessage, len(items))
		for i, it := range items {
			if f.History[i], err = decodeMessage(histName+"["+strconv.Itoa(i)+"]", it); err != nil {
				fe.Err = err
				return nil, fe
			}
		}
	}
	if err := f.decodeOverrides(raw); err != nil {
		fe.Err = err
		return nil, fe
	}
	return f, nil
}

// decodeOverrides reads override_params {"<model>": {"message": {...}}},
// or the 0.0.3 overrideMessage {"model_id": ..., "message": {...}}.
func (f *requestFrame) decodeOverrides(raw rawRequest) *canonical.Error {
	if !isNull(raw.OverrideParams) {
		var m map[string]json.RawMessage
		if raw.OverrideParams[0] != '{' || json.Unmarshal(raw.OverrideParams, &m) != nil {
			return invalid("override_params: must be an object keyed by model id or name")
		}
		f.Overrides = make(map[string]wireMessage, len(m))
		for k, v := range m {
			var p struct {
				Message json.RawMessage `json:"message"`
			}
			if isNull(v) || v[0] != '{' || json.Unmarshal(v, &p) != nil {
				return invalid("override_params[%q]: must be an object", k)
			}
			if isNull(p.Message) {
				continue // no message to override
			}
			msg, err := decodeMessage(fmt.Sprintf("override_params[%q].message", k), p.Message)
			if err != nil {
				return err
			}
			f.Overrides[k] = msg
		}
		return nil
	}
	if !isNull(raw.OverrideMessage) {
		var p struct {
			ModelID json.RawMessage `json:"model_id"`
			Message json.RawMessage `json:"message"`
		}
		if raw.OverrideMessage[0] != '{' || json.Unmarshal(raw.OverrideMessage, &p) != nil {
			return invalid("overrideMessage: must be an object")
		}
		var id string
		if json.Unmarshal(p.ModelID, &id) != nil || id == "" {
			return invalid("overrideMessage.model_id: required, a string")
		}
		msg, err := decodeMessage("overrideMessage.message", p.Message)
		if err != nil {
			return err
		}
		f.Overrides = map[string]wireMessage{id: msg}
	}
	return nil
}

// decodeMessage decodes a {role, content} object; content is required and
// a string, role a string ("user" when absent).
func decodeMessage(field string, raw json.RawMessage) (wireMessage, *canonical.Error) {
	var m struct {
		Role    json.RawMessage `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if isNull(raw) || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return wireMessage{}, invalid("%s: must be an object with role and content", field)
	}
	var w wireMessage
	if isNull(m.Content) {
		return w, invalid("%s.content: required", field)
	}
	if json.Unmarshal(m.Content, &w.Content) != nil {
		return w, invalid("%s.content: must be a string", field)
	}
	if !isNull(m.Role) && json.Unmarshal(m.Role, &w.Role) != nil {
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
		var md map[string]any
		if json.Unmarshal(f.Metadata, &md) == nil {
			if v := canonical.Value(md); v != nil {
				req.Extensions[extMetadata] = v
			}
			for k, v := range md {
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

// responseFrame is Glide's ChatStreamMessage, less what the backend does
// not read (created_at, router_id, and the echoed metadata).
type responseFrame struct {
	ID    string     `json:"id"`
	Chunk *wireChunk `json:"chunk"`
	Error *wireError `json:"error"`

	// Used by the fast path only (decode_fast.go), so that a frame is one
	// recycled object: Chunk points at chunk, Chunk.FinishReason at finish,
	// pooled sends the frame back to framePool once Frame has read it, and
	// last is the frame it was decoded from.
	chunk   wireChunk
	finish  string
	pooled  bool
	last    lastFrame
	scratch []byte // an escaped content, unescaped
}

// wireChunk is Glide's ChatStreamChunk.
type wireChunk struct {
	ModelID       string `json:"model_id"`
	ProviderID    string `json:"provider_id"`
	ModelName     string `json:"model_name"`
	Cached        bool   `json:"cached"`
	ModelResponse struct {
		Metadata struct {
			ResponseID string `json:"response_id"` // OpenAI, Azure; Cohere's final chunk
		} `json:"metadata"`
		Message wireMessage `json:"message"`
	} `json:"model_response"`
	FinishReason *string `json:"finish_reason"`
}

// wireError is Glide's ChatStreamError.
type wireError struct {
	Name         string  `json:"name"`
	Message      string  `json:"message"`
	FinishReason *string `json:"finish_reason"`
}

// decodeResponse decodes one response frame. A frame must carry an id and
// exactly one of chunk and error.
//
// The common frame, a chunk carrying plain text, takes the fast path
// (decodeResponseFast); every other frame, and every error, comes from
// decodeResponseJSON, which defines the semantics: the fast path accepts
// only frames on which the two agree.
func decodeResponse(data []byte) (*responseFrame, error) {
	if f, ok := decodeResponseFast(data); ok {
		return f, nil
	}
	return decodeResponseJSON(data)
}

// decodeResponseJSON is decodeResponse with encoding/json.
func decodeResponseJSON(data []byte) (*responseFrame, error) {
	var f responseFrame
	if err := json.Unmarshal(data, &f); err != nil {
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

// Frame appends the events f produces. It consumes f: a frame from the
// fast path is recycled, so the caller must not use f afterwards.
func (d *responseDecoder) Frame(out []*canonical.Event, f *responseFrame) []*canonical.Event {
	out = d.frame(out, f)
	releaseFrame(f)
	return out
}

func (d *responseDecoder) frame(out []*canonical.Event, f *responseFrame) []*canonical.Event {
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
