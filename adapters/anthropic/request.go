package anthropic

import (
	"encoding/base64"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// outRequest is the request the backend sends.
type outRequest struct {
	Model         string         `json:"model"`
	MaxTokens     int64          `json:"max_tokens"`
	System        []textBlock    `json:"system,omitzero"`
	Messages      []outMessage   `json:"messages"`
	Stream        bool           `json:"stream"`
	StopSequences []string       `json:"stop_sequences,omitzero"`
	Temperature   *float64       `json:"temperature,omitzero"`
	TopP          *float64       `json:"top_p,omitzero"`
	TopK          *int64         `json:"top_k,omitzero"`
	Tools         []any          `json:"tools,omitzero"`
	ToolChoice    *toolChoice    `json:"tool_choice,omitzero"`
	Thinking      *structpbValue `json:"thinking,omitzero"`
	Metadata      *requestMeta   `json:"metadata,omitzero"`

	OutputConfig      *structpbValue `json:"output_config,omitzero"`
	ContextManagement *structpbValue `json:"context_management,omitzero"`
	CacheControl      *structpbValue `json:"cache_control,omitzero"`
}

// structpbValue marshals a structpb value as the JSON it holds.
type structpbValue struct{ v *structpb.Value }

// MarshalJSON writes the value's JSON, object members in sorted order.
func (s structpbValue) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.v.AsInterface(), json.Deterministic(true))
}

type outMessage struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type (
	sourceBlock struct {
		Type         string     `json:"type"`
		Source       outSource  `json:"source"`
		CacheControl json.Value `json:"cache_control,omitzero"`
	}
	outSource struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type,omitzero"`
		Data      string `json:"data,omitzero"`
		URL       string `json:"url,omitzero"`
	}
	// toolResultBlock's content is its text, or, when it holds images or
	// documents too, a list of blocks (its text first).
	toolResultBlock struct {
		Type         string     `json:"type"`
		ToolUseID    string     `json:"tool_use_id"`
		Content      any        `json:"content"`
		IsError      bool       `json:"is_error,omitzero"`
		CacheControl json.Value `json:"cache_control,omitzero"`
	}
	outTool struct {
		Name        string        `json:"name"`
		Description string        `json:"description,omitzero"`
		InputSchema structpbValue `json:"input_schema"`
	}
)

// requestBuilder gathers the turns: consecutive leaves of one wire role
// join one message (Anthropic merges them anyway).
type requestBuilder struct {
	r *outRequest
}

func (rb *requestBuilder) add(role string, block any) {
	ms := rb.r.Messages
	if n := len(ms); n > 0 && ms[n-1].Role == role {
		ms[n-1].Content = append(ms[n-1].Content, block)
		return
	}
	rb.r.Messages = append(ms, outMessage{Role: role, Content: []any{block}})
}

// encodeRequest is the Messages request for a canonical request: every
// input's leaves in order (the layout of decode.go), the tools, the
// parameters, and the extensions an Anthropic frontend kept.
func encodeRequest(req *canonical.Request, model string, maxTokens int64) (*outRequest, *canonical.Error) {
	r := &outRequest{Model: model, MaxTokens: maxTokens, Stream: true}
	rb := &requestBuilder{r: r}
	for _, in := range req.GetInputs() {
		for _, l := range canonical.Leaves(nil, in.GetNode()) {
			leaf(rb, l)
		}
	}
	if len(r.Messages) == 0 {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "anthropic backend: the request has no message content")
	}
	for _, t := range req.GetTools() {
		schema := t.GetParameters()
		if schema == nil {
			schema = &structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("object")}}
		}
		r.Tools = append(r.Tools, outTool{Name: t.GetName(), Description: t.GetDescription(), InputSchema: structpbValue{structpb.NewStructValue(schema)}})
	}
	ext := req.GetExtensions()
	for _, v := range ext[extServerTools].GetListValue().GetValues() {
		r.Tools = append(r.Tools, structpbValue{v})
	}
	if v := ext[extThinking]; v != nil {
		r.Thinking = &structpbValue{v}
	}
	for _, o := range []struct {
		to  **structpbValue
		ext string
	}{{&r.OutputConfig, extOutputConfig}, {&r.ContextManagement, extContextManagement}, {&r.CacheControl, extCacheControl}} {
		if v := ext[o.ext]; v != nil {
			*o.to = &structpbValue{v}
		}
	}
	params(r, req.GetParameters())
	return r, nil
}

// leaf adds one leaf of the conversation.
func leaf(rb *requestBuilder, l *canonical.Node) {
	role := l.GetRole()
	meta := l.GetMetadata()
	cc := cacheControlOf(l)
	switch {
	case role == "system":
		if canonical.IsText(l) {
			rb.r.System = append(rb.r.System, textBlock{Type: "text", Text: string(l.GetData()), CacheControl: cc})
		}
	case l.GetMime() == canonical.MimeToolCall:
		in := json.Value(l.GetData())
		if in.Kind() != '{' || !json.Valid(in) {
			in = json.Value("{}")
		}
		rb.add("assistant", toolUseBlock{Type: "tool_use", ID: meta[canonical.MetaToolCallID], Name: meta[canonical.MetaToolName], Input: in, CacheControl: cc})
	case l.GetMime() == canonical.MimeReasoning:
		// Thinking goes back only with the signature Anthropic checks.
		if d := meta[metaRedacted]; d != "" {
			rb.add("assistant", redactedBlock{Type: "redacted_thinking", Data: d})
		} else if s := meta[metaSignature]; s != "" {
			rb.add("assistant", thinkingBlock{Type: "thinking", Thinking: string(l.GetData()), Signature: s})
		}
	case role == "tool" && canonical.IsText(l):
		rb.add("user", toolResultBlock{Type: "tool_result", ToolUseID: meta[canonical.MetaToolCallID], Content: string(l.GetData()), IsError: meta[metaIsError] == "true", CacheControl: cc})
	case canonical.IsText(l):
		if role != "assistant" {
			role = "user"
		}
		rb.add(role, textBlock{Type: "text", Text: string(l.GetData()), CacheControl: cc})
	default:
		b, ok := mediaBlock(l)
		switch {
		case !ok:
		case role == "tool" && rb.addToToolResult(meta[canonical.MetaToolCallID], b):
		default:
			rb.add("user", b)
		}
	}
}

// addToToolResult adds b to the content of the tool_result for call id
// that ends the conversation so far (a tool result's images follow its
// text, decode.go), so the image stays the tool's answer; false when
// there is none.
func (rb *requestBuilder) addToToolResult(id string, b any) bool {
	ms := rb.r.Messages
	if len(ms) == 0 || ms[len(ms)-1].Role != "user" {
		return false
	}
	content := ms[len(ms)-1].Content
	tr, ok := content[len(content)-1].(toolResultBlock)
	if !ok || tr.ToolUseID != id {
		return false
	}
	switch c := tr.Content.(type) {
	case string:
		tr.Content = []any{b}
		if c != "" {
			tr.Content = []any{textBlock{Type: "text", Text: c}, b}
		}
	case []any:
		tr.Content = append(c, b)
	}
	content[len(content)-1] = tr
	return true
}

// cacheControlOf is the prompt-caching breakpoint an Anthropic client set
// on the leaf's block (decode.go), nil when none.
func cacheControlOf(l *canonical.Node) json.Value {
	if cc := l.GetMetadata()[metaCacheControl]; cc != "" {
		return json.Value(cc)
	}
	return nil
}

// mediaBlock is an image or PDF leaf as a block; other media are not
// carried.
func mediaBlock(l *canonical.Node) (any, bool) {
	mime := l.GetMime()
	typ := "image"
	switch {
	case mime == "application/pdf":
		typ = "document"
	case !strings.HasPrefix(mime, "image/"):
		return nil, false
	}
	cc := cacheControlOf(l)
	if ref := l.GetRef(); ref != "" {
		return sourceBlock{Type: typ, Source: outSource{Type: "url", URL: ref}, CacheControl: cc}, true
	}
	return sourceBlock{Type: typ, Source: outSource{Type: "base64", MediaType: mime, Data: base64.StdEncoding.EncodeToString(l.GetData())}, CacheControl: cc}, true
}

// params sets the sampling members, stop sequences, tool choice and user.
func params(r *outRequest, p map[string]*structpb.Value) {
	num := func(name string) *float64 {
		if v, ok := p[name].GetKind().(*structpb.Value_NumberValue); ok {
			return &v.NumberValue
		}
		return nil
	}
	if v := num(paramMaxTokens); v != nil && *v >= 1 {
		r.MaxTokens = int64(*v)
	}
	r.Temperature, r.TopP = num(paramTemperature), num(paramTopP)
	if v := num(paramTopK); v != nil {
		k := int64(*v)
		r.TopK = &k
	}
	switch s := p[paramStop]; {
	case s.GetListValue() != nil:
		for _, v := range s.GetListValue().GetValues() {
			if v.GetStringValue() != "" {
				r.StopSequences = append(r.StopSequences, v.GetStringValue())
			}
		}
	case s.GetStringValue() != "":
		r.StopSequences = []string{s.GetStringValue()}
	}
	r.ToolChoice = toolChoiceOf(p[paramToolChoice])
	if v, ok := p[paramParallelTools].GetKind().(*structpb.Value_BoolValue); ok && !v.BoolValue {
		if r.ToolChoice == nil {
			r.ToolChoice = &toolChoice{Type: "auto"}
		}
		t := true
		r.ToolChoice.DisableParallelToolUse = &t
	}
	if u := p[paramUser].GetStringValue(); u != "" {
		r.Metadata = &requestMeta{UserID: u}
	}
}

// toolChoiceOf reads the canonical tool_choice (OpenAI's spelling).
func toolChoiceOf(v *structpb.Value) *toolChoice {
	switch v.GetStringValue() {
	case "auto":
		return &toolChoice{Type: "auto"}
	case "none":
		return &toolChoice{Type: "none"}
	case "required", "any":
		return &toolChoice{Type: "any"}
	}
	if s := v.GetStructValue(); s != nil {
		name := s.GetFields()["name"].GetStringValue()
		if f := s.GetFields()["function"].GetStructValue(); name == "" && f != nil {
			name = f.GetFields()["name"].GetStringValue()
		}
		if name != "" {
			return &toolChoice{Type: "tool", Name: name}
		}
	}
	return nil
}
