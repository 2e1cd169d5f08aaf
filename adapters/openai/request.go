package openai

import (
	"encoding/base64"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// turnBuilder gathers the messages: consecutive leaves of one role and
// one parent node (a turn of the layout of decode.go) join one message;
// each tool result is a message of its own.
type turnBuilder struct {
	key   *canonical.Node // the node holding the leaves being added
	keys  []*canonical.Node
	turns []outTurn
	parts [][]outPart // the pending content parts of each turn
	text  []bool      // whether a turn's parts are all text
}

func (tb *turnBuilder) last(role string) int {
	n := len(tb.turns)
	if n > 0 && tb.turns[n-1].Role == role && tb.keys[n-1] == tb.key && role != "tool" {
		return n - 1
	}
	tb.turns = append(tb.turns, outTurn{Role: role})
	tb.keys = append(tb.keys, tb.key)
	tb.parts = append(tb.parts, nil)
	tb.text = append(tb.text, true)
	return n
}

func (tb *turnBuilder) part(role string, p outPart) {
	i := tb.last(role)
	tb.parts[i] = append(tb.parts[i], p)
	tb.text[i] = tb.text[i] && p.Type == "text"
}

// leaf adds one leaf of the conversation.
func (tb *turnBuilder) leaf(l *canonical.Node) {
	role := l.GetRole()
	meta := l.GetMetadata()
	switch {
	case l.GetMime() == canonical.MimeReasoning:
		// Reasoning of earlier turns is not sent back (servers ignore or
		// refuse it).
	case l.GetMime() == canonical.MimeToolCall:
		i := tb.last("assistant")
		tb.turns[i].ToolCalls = append(tb.turns[i].ToolCalls, wireCall{ID: meta[canonical.MetaToolCallID], Type: "function",
			Function: wireFunction{Name: meta[canonical.MetaToolName], Arguments: string(l.GetData())}})
	case role == "tool":
		i := tb.last("tool")
		tb.turns[i].ToolCallID = meta[canonical.MetaToolCallID]
		if canonical.IsText(l) {
			tb.parts[i] = append(tb.parts[i], outPart{Type: "text", Text: string(l.GetData())})
		}
	case canonical.IsText(l):
		switch {
		case role == "system" && meta[metaRole] == "developer":
			role = "developer"
		case role != "system" && role != "assistant":
			role = "user"
		}
		tb.part(role, outPart{Type: "text", Text: string(l.GetData())})
	case strings.HasPrefix(l.GetMime(), "image/"):
		url := l.GetRef()
		if url == "" {
			url = "data:" + l.GetMime() + ";base64," + base64.StdEncoding.EncodeToString(l.GetData())
		}
		tb.part("user", outPart{Type: "image_url", ImageURL: &imageURL{URL: url}})
	}
	// Other media have no part here: dropped (doc.go).
}

// walk adds n's leaves in order, each keyed by its parent.
func (tb *turnBuilder) walk(n, parent *canonical.Node) {
	if n == nil {
		return
	}
	if len(n.GetChildren()) == 0 {
		tb.key = parent
		tb.leaf(n)
		return
	}
	for _, c := range n.GetChildren() {
		tb.walk(c, n)
	}
}

// finish writes each turn's content: one string when its parts are all
// text, the parts otherwise, null for an assistant turn of calls only.
func (tb *turnBuilder) finish() []outTurn {
	for i := range tb.turns {
		t := &tb.turns[i]
		parts := tb.parts[i]
		switch {
		case len(parts) == 0 && (t.Role == "assistant" && len(t.ToolCalls) > 0):
			t.Content = json.Value("null")
		case tb.text[i]:
			var sb strings.Builder
			for _, p := range parts {
				sb.WriteString(p.Text)
			}
			t.Content = json.Value(json.AppendQuote(nil, sb.String()))
		default:
			b, err := json.Marshal(parts)
			if err != nil {
				b = []byte(`""`)
			}
			t.Content = b
		}
	}
	return tb.turns
}

// encodeRequest is the Chat Completions request for a canonical request:
// every input's leaves in order (the layout of decode.go), the tools, the
// parameters and the extensions an OpenAI frontend kept.
func (b *Backend) encodeRequest(req *canonical.Request, model string) (*outRequest, *canonical.Error) {
	r := &outRequest{Model: model, Stream: true}
	t := true
	r.StreamOptions = &streamOptions{IncludeUsage: &t}
	tb := &turnBuilder{}
	for _, in := range req.GetInputs() {
		tb.walk(in.GetNode(), in.GetNode())
	}
	r.Messages = tb.finish()
	if len(r.Messages) == 0 {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "openai backend: the request has no message content")
	}
	for _, ts := range req.GetTools() {
		fn := &toolFunction{Name: ts.GetName(), Description: ts.GetDescription(), Parameters: json.Value(`{"type":"object","properties":{}}`)}
		if p := ts.GetParameters(); p != nil {
			if v, err := json.Marshal(p.AsMap(), json.Deterministic(true)); err == nil {
				fn.Parameters = v
			}
		}
		fn.Strict = ts.Strict // as the client said, from any frontend that has it
		r.Tools = append(r.Tools, inTool{Type: "function", Function: fn})
	}
	b.parameters(r, req)
	return r, nil
}

// parameters sets the sampling members and the extensions.
func (b *Backend) parameters(r *outRequest, req *canonical.Request) {
	p := req.GetParameters()
	num := func(name string) *float64 {
		if v, ok := p[name].GetKind().(*structpb.Value_NumberValue); ok {
			return &v.NumberValue
		}
		return nil
	}
	integer := func(name string) *int64 {
		if v := num(name); v != nil {
			n := int64(*v)
			return &n
		}
		return nil
	}
	if n := integer(paramMaxTokens); n != nil && *n >= 1 {
		if b.cfg.MaxTokensField == "max_completion_tokens" {
			r.MaxCompletionTokens = n
		} else {
			r.MaxTokens = n
		}
	}
	r.Temperature, r.TopP = num(paramTemperature), num(paramTopP)
	r.PresencePenalty, r.FrequencyPenalty = num(paramPresence), num(paramFrequency)
	r.Seed = integer(paramSeed)
	switch s := p[paramStop]; {
	case s.GetListValue() != nil:
		for _, v := range s.GetListValue().GetValues() {
			if v.GetStringValue() != "" && len(r.Stop) < 4 {
				r.Stop = append(r.Stop, v.GetStringValue())
			}
		}
	case s.GetStringValue() != "":
		r.Stop = []string{s.GetStringValue()}
	}
	if len(r.Tools) > 0 {
		r.ToolChoice = toolChoiceOf(p[paramToolChoice])
		if v, ok := p[paramParallelTools].GetKind().(*structpb.Value_BoolValue); ok {
			r.ParallelToolCalls = &v.BoolValue
		}
	}
	r.ReasoningEffort = p[paramEffort].GetStringValue()
	r.User = p[paramUser].GetStringValue()
	ext := req.GetExtensions()
	r.ResponseFormat = jsonOf(ext[extResponseFormat])
	r.LogitBias = jsonOf(ext[extLogitBias])
	if ext[extLogprobs].GetBoolValue() {
		t := true
		r.Logprobs = &t
		r.TopLogprobs = integerOf(ext[extTopLogprobs])
	}
	for _, name := range b.cfg.PassParameters {
		if v, ok := p[name]; ok && r.Extra[name] == nil && !knownMembers[name] {
			if r.Extra == nil {
				r.Extra = map[string]json.Value{}
			}
			r.Extra[name] = jsonOf(v)
		}
	}
}

// toolChoiceOf writes the canonical tool_choice (OpenAI's spelling; the
// Anthropic adapter's "any" is "required", {"name"} a function).
func toolChoiceOf(v *structpb.Value) json.Value {
	switch s := v.GetStringValue(); s {
	case "auto", "none", "required":
		return json.Value(json.AppendQuote(nil, s))
	case "any":
		return json.Value(`"required"`)
	}
	st := v.GetStructValue()
	if st == nil {
		return nil
	}
	name := st.GetFields()["name"].GetStringValue()
	if f := st.GetFields()["function"].GetStructValue(); f != nil {
		name = f.GetFields()["name"].GetStringValue()
	}
	if name == "" {
		return nil
	}
	out, err := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}}, json.Deterministic(true))
	if err != nil {
		return nil
	}
	return out
}

// jsonOf is a structpb value's JSON, nil for nil.
func jsonOf(v *structpb.Value) json.Value {
	if v == nil {
		return nil
	}
	out, err := json.Marshal(v.AsInterface(), json.Deterministic(true))
	if err != nil {
		return nil
	}
	return out
}

func integerOf(v *structpb.Value) *int64 {
	if n, ok := v.GetKind().(*structpb.Value_NumberValue); ok {
		i := int64(n.NumberValue)
		return &i
	}
	return nil
}
