package responses

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Conversation items travel in a canonical request as
// canonical/conversation.go lays them out (instructions first, as a
// system leaf); a reasoning item's leaf holds the summary text, with
// metadata encrypted_content when the client sent it.
const metaEncrypted = "encrypted_content"

// Extension keys of the request members that no canonical field holds, so
// a Responses backend sends them on.
const (
	extText            = "responses.text"
	extInclude         = "responses.include"
	extTruncation      = "responses.truncation"
	extMaxToolCalls    = "responses.max_tool_calls"
	extTopLogprobs     = "responses.top_logprobs"
	extSummary         = "responses.reasoning_summary"
	extPromptCacheKey  = "responses.prompt_cache_key"
	extSafetyID        = "responses.safety_identifier"
	paramMaxTokens     = "max_tokens"
	paramTemperature   = "temperature"
	paramTopP          = "top_p"
	paramToolChoice    = "tool_choice"
	paramParallelTools = "parallel_tool_calls"
	paramEffort        = "reasoning_effort"
	paramUser          = "user"
)

// decodeCreate reads a create request's body.
func decodeCreate(body []byte) (*createRequest, *apiError) {
	var c createRequest
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, invalid("", "We could not parse the JSON body of your request: "+jsonErrorText(err))
	}
	return &c, nil
}

// jsonErrorText is a JSON error's text without the library's prefix.
func jsonErrorText(err error) string {
	s := err.Error()
	for _, p := range []string{"json: ", "jsontext: "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// validate checks the members the frontend reads, naming the first bad
// one.
func (c *createRequest) validate() *apiError {
	switch {
	case c.Model == "":
		return invalid("model", "Missing required parameter: 'model'.")
	case len(c.Input) == 0 && c.PreviousResponseID == nil:
		return invalid("input", "Missing required parameter: 'input'.")
	case len(c.Conversation) > 0 && string(c.Conversation) != "null":
		if c.PreviousResponseID != nil {
			return invalid("previous_response_id", "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.")
		}
		return invalid("conversation", "Unsupported parameter: 'conversation': this server keeps conversations by previous_response_id only.")
	case c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2):
		return invalid("temperature", fmt.Sprintf("Invalid 'temperature': decimal above maximum value or below minimum value. Expected a value between 0 and 2, but got %v instead.", *c.Temperature))
	case c.TopP != nil && (*c.TopP < 0 || *c.TopP > 1):
		return invalid("top_p", fmt.Sprintf("Invalid 'top_p': expected a value between 0 and 1, but got %v instead.", *c.TopP))
	case c.MaxOutputTokens != nil && *c.MaxOutputTokens < 1:
		return invalid("max_output_tokens", fmt.Sprintf("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 1, but got %d instead.", *c.MaxOutputTokens))
	case c.Truncation != nil && *c.Truncation != "auto" && *c.Truncation != "disabled":
		return invalid("truncation", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'auto' and 'disabled'.", *c.Truncation))
	}
	for i, t := range c.Tools {
		if t.Type != "function" && t.Type != "custom" && t.Type != "namespace" {
			continue // not offered (offeredTools)
		}
		if t.Name == "" {
			param := fmt.Sprintf("tools[%d].name", i)
			return invalid(param, "Missing required parameter: '"+param+"'.")
		}
		for j, f := range t.Tools {
			if (f.Type == "function" || f.Type == "custom") && f.Name == "" {
				param := fmt.Sprintf("tools[%d].tools[%d].name", i, j)
				return invalid(param, "Missing required parameter: '"+param+"'.")
			}
		}
	}
	if r := c.Reasoning; r != nil && r.Summary != nil {
		switch *r.Summary {
		case "auto", "concise", "detailed":
		default:
			return invalid("reasoning.summary", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'auto', 'concise' and 'detailed'.", *r.Summary))
		}
	}
	return validToolChoice(c.ToolChoice)
}

// offeredTool is a function or custom tool the request offers the model,
// and the namespace it came in ("" for none).
type offeredTool struct {
	tool      tool
	namespace string
}

// offeredTools is the request's function and custom tools, a namespace's
// among them (Codex's). Other tool types (web_search, file_search, mcp,
// tool_search, ...) run on OpenAI's side, so they are not offered;
// refusing them refused every request of a client that lists them by
// default (Codex).
func offeredTools(ts []tool) []offeredTool {
	var out []offeredTool
	for _, t := range ts {
		switch t.Type {
		case "function", "custom":
			out = append(out, offeredTool{tool: t})
		case "namespace":
			for _, f := range t.Tools {
				if f.Type == "function" || f.Type == "custom" {
					out = append(out, offeredTool{tool: f, namespace: t.Name})
				}
			}
		}
	}
	return out
}

// customSpec is a custom tool as a canonical tool: a function of one
// string, input, which the description says the format of (a backend
// has no grammar-constrained input; encode.go reads input back out).
func customSpec(t tool) *canonical.ToolSpec {
	desc := deref(t.Description, "")
	if f := t.Format; f != nil && f.Definition != "" {
		desc = strings.TrimSpace(desc + "\n\nThe input follows this " + cmp.Or(f.Syntax, "grammar") + " grammar:\n" + f.Definition)
	}
	params := &structpb.Struct{Fields: map[string]*structpb.Value{
		"type":       structpb.NewStringValue("object"),
		"properties": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"input": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("string")}})}}),
		"required":   structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("input")}}),
	}}
	return &canonical.ToolSpec{Name: t.Name, Description: desc, Parameters: params}
}

// validToolChoice checks tool_choice: none, auto, required, or an object
// with a type.
func validToolChoice(v json.Value) *apiError {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch s {
		case "none", "auto", "required":
			return nil
		}
		return invalid("tool_choice", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'auto' and 'required'.", s))
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(v, &o) != nil || o.Type == "" {
		return invalid("tool_choice", "Invalid 'tool_choice': expected a string or an object with a type.")
	}
	if o.Type == "function" && o.Name == "" {
		return invalid("tool_choice.name", "Missing required parameter: 'tool_choice.name'.")
	}
	return nil
}

// inputItems reads input: a string is one user message.
func (c *createRequest) inputItems() ([]item, *apiError) {
	if len(c.Input) == 0 || string(c.Input) == "null" {
		return nil, nil
	}
	if c.Input.Kind() == '"' {
		var s string
		if err := json.Unmarshal(c.Input, &s); err != nil {
			return nil, invalid("input", "Invalid 'input': "+jsonErrorText(err))
		}
		return []item{{Type: "message", Role: "user", Content: parts{{Type: "input_text", Text: &s}}}}, nil
	}
	var items []item
	if err := json.Unmarshal(c.Input, &items); err != nil {
		return nil, invalid("input", "Invalid 'input': expected a string or an array of input items: "+jsonErrorText(err))
	}
	for i := range items {
		if e := checkItem(&items[i], i); e != nil {
			return nil, e
		}
	}
	return items, nil
}

// checkItem checks one input item, filling in the type of an untyped
// message (EasyInputMessage).
func checkItem(it *item, i int) *apiError {
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	at := func(m string) string { return fmt.Sprintf("input[%d].%s", i, m) }
	switch it.Type {
	case "message":
		switch it.Role {
		case "user", "assistant", "system", "developer":
		default:
			return invalid(at("role"), fmt.Sprintf("Invalid value: '%s'. Supported values are: 'user', 'assistant', 'system', and 'developer'.", it.Role))
		}
		for j, p := range it.Content {
			if e := checkPart(p, fmt.Sprintf("input[%d].content[%d]", i, j)); e != nil {
				return e
			}
		}
	case "function_call":
		if it.CallID == "" || it.Name == "" || it.Arguments == nil {
			return invalid(at("call_id"), fmt.Sprintf("Missing required parameter: 'input[%d]': a function_call needs call_id, name and arguments.", i))
		}
	case "custom_tool_call":
		if it.CallID == "" || it.Name == "" || it.Input == nil {
			return invalid(at("call_id"), fmt.Sprintf("Missing required parameter: 'input[%d]': a custom_tool_call needs call_id, name and input.", i))
		}
	case "function_call_output", "custom_tool_call_output":
		if it.CallID == "" {
			return invalid(at("call_id"), fmt.Sprintf("Missing required parameter: '%s'.", at("call_id")))
		}
		if _, ok := outputText(it.Output); !ok {
			return invalid(at("output"), fmt.Sprintf("Invalid '%s': expected a string or an array of input_text parts.", at("output")))
		}
	case "reasoning":
	case "item_reference": // resolved from the store (Frontend.resolveReferences)
		if it.ID == "" {
			return invalid(at("id"), fmt.Sprintf("Missing required parameter: '%s'.", at("id")))
		}
	case "":
		return invalid(at("type"), fmt.Sprintf("Missing required parameter: '%s'.", at("type")))
	default:
		return invalid(at("type"), fmt.Sprintf("Unsupported input item type '%s'.", it.Type))
	}
	return nil
}

// checkPart checks a message's content part.
func checkPart(p part, at string) *apiError {
	switch p.Type {
	case "input_text", "output_text", "summary_text", "reasoning_text":
		if p.Text == nil {
			return invalid(at+".text", fmt.Sprintf("Missing required parameter: '%s.text'.", at))
		}
	case "refusal":
	case "input_image":
		if p.ImageURL == nil || *p.ImageURL == "" {
			return invalid(at+".image_url", fmt.Sprintf("Missing required parameter: '%s.image_url' (file_id is not supported by this server).", at))
		}
	case "input_file":
		if p.FileData == nil && p.FileURL == nil {
			return invalid(at+".file_data", fmt.Sprintf("Missing required parameter: '%s.file_data' or '%s.file_url' (file_id is not supported by this server).", at, at))
		}
	default:
		return invalid(at+".type", fmt.Sprintf("Unsupported content part type '%s'.", p.Type))
	}
	return nil
}

// outputText is a function_call_output's output as text: a string, or the
// text of its input_text parts.
func outputText(v json.Value) (string, bool) {
	if len(v) == 0 {
		return "", true
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true
	}
	var ps []part
	if json.Unmarshal(v, &ps) != nil {
		return "", false
	}
	var sb strings.Builder
	for _, p := range ps {
		if p.Text != nil {
			sb.WriteString(*p.Text)
		}
	}
	return sb.String(), true
}

// canonicalRole is a message role as canonical names it: developer is
// system.
func canonicalRole(r string) string {
	if r == "developer" {
		return "system"
	}
	return r
}

// itemNode is an item as a canonical node (see the constants above).
func itemNode(it *item) *canonical.Node {
	switch it.Type {
	case "function_call", "custom_tool_call":
		args := ""
		if it.Arguments != nil {
			args = *it.Arguments
		}
		if it.Input != nil { // a custom tool's input is the function's one argument (customSpec)
			args = customArguments(*it.Input)
		}
		return &canonical.Node{Id: it.ID, Role: "assistant", Mime: canonical.MimeToolCall, Payload: canonical.DataPayload([]byte(args)),
			Metadata: map[string]string{canonical.MetaToolCallID: it.CallID, canonical.MetaToolName: it.Name}}
	case "function_call_output", "custom_tool_call_output":
		s, _ := outputText(it.Output)
		n := canonical.TextNode("tool", s)
		n.Id, n.Metadata = it.ID, map[string]string{canonical.MetaToolCallID: it.CallID}
		return n
	case "reasoning":
		var sb strings.Builder
		for _, p := range it.Summary {
			if p.Text != nil {
				sb.WriteString(*p.Text)
			}
		}
		for _, p := range it.Content {
			if p.Text != nil && sb.Len() == 0 {
				sb.WriteString(*p.Text)
			}
		}
		n := &canonical.Node{Id: it.ID, Role: "assistant", Mime: canonical.MimeReasoning, Payload: canonical.DataPayload([]byte(sb.String()))}
		if it.EncryptedContent != nil {
			n.Metadata = map[string]string{metaEncrypted: *it.EncryptedContent}
		}
		return n
	}
	role := canonicalRole(it.Role)
	n := &canonical.Node{Id: it.ID, Role: role}
	for _, p := range it.Content {
		n.Children = append(n.Children, partNode(p, role))
	}
	return n
}

// partNode is a content part as a leaf: text, or an image or file as data
// (a data: URL) or a ref.
func partNode(p part, role string) *canonical.Node {
	switch p.Type {
	case "input_image":
		n := urlNode(*p.ImageURL, "image/*", role)
		if p.Detail != nil {
			n.Metadata = map[string]string{"detail": *p.Detail}
		}
		return n
	case "input_file":
		src := p.FileData
		if src == nil {
			src = p.FileURL
		}
		n := urlNode(*src, "application/octet-stream", role)
		if p.Filename != nil {
			n.Metadata = map[string]string{"original_file_name": *p.Filename}
		}
		return n
	case "refusal":
		if p.Refusal != nil {
			return canonical.TextNode(role, *p.Refusal)
		}
		return canonical.TextNode(role, "")
	}
	text := ""
	if p.Text != nil {
		text = *p.Text
	}
	return canonical.TextNode(role, text)
}

// urlNode is a leaf for a URL: the bytes of a base64 data: URL with its
// mime type, else a ref.
func urlNode(u, mime, role string) *canonical.Node {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		if mt, ok2 := strings.CutSuffix(meta, ";base64"); ok && ok2 {
			if b, err := base64.StdEncoding.DecodeString(data); err == nil {
				if mt == "" {
					mt = mime
				}
				return &canonical.Node{Role: role, Mime: mt, Payload: canonical.DataPayload(b)}
			}
		}
	}
	if !strings.Contains(u, ":") { // file_data as bare base64
		if b, err := base64.StdEncoding.DecodeString(u); err == nil {
			return &canonical.Node{Role: role, Mime: mime, Payload: canonical.DataPayload(b)}
		}
	}
	return &canonical.Node{Role: role, Mime: mime, Payload: canonical.RefPayload(u)}
}

// canonicalRequest builds the run's request: the conversation (the items
// continued from a stored response, then the new input), instructions
// first, tools and parameters from this request only.
func (c *createRequest) canonicalRequest(conversation []item) *canonical.Request {
	root := &canonical.Node{}
	if c.Instructions != nil && *c.Instructions != "" {
		root.Children = append(root.Children, canonical.TextNode("system", *c.Instructions))
	}
	for i := range conversation {
		root.Children = append(root.Children, itemNode(&conversation[i]))
	}
	req := &canonical.Request{
		Target:     c.Model,
		Inputs:     []*canonical.NamedNode{{Name: canonical.InputPrompt, Node: root}},
		Parameters: map[string]*structpb.Value{},
		Extensions: map[string]*structpb.Value{},
		Metadata:   c.Metadata,
	}
	for _, o := range offeredTools(c.Tools) {
		t := o.tool
		if t.Type == "custom" {
			req.Tools = append(req.Tools, customSpec(t))
			continue
		}
		spec := &canonical.ToolSpec{Name: t.Name, Parameters: jsonStruct(t.Parameters), Strict: t.Strict}
		if t.Description != nil {
			spec.Description = *t.Description
		}
		req.Tools = append(req.Tools, spec)
	}
	c.parameters(req)
	return req
}

// parameters sets the request's parameters and extensions.
func (c *createRequest) parameters(req *canonical.Request) {
	p, x := req.Parameters, req.Extensions
	setNum := func(m map[string]*structpb.Value, k string, v *float64) {
		if v != nil && !math.IsNaN(*v) {
			m[k] = structpb.NewNumberValue(*v)
		}
	}
	setInt := func(m map[string]*structpb.Value, k string, v *int64) {
		if v != nil {
			m[k] = structpb.NewNumberValue(float64(*v))
		}
	}
	setStr := func(m map[string]*structpb.Value, k string, v *string) {
		if v != nil {
			m[k] = structpb.NewStringValue(*v)
		}
	}
	setInt(p, paramMaxTokens, c.MaxOutputTokens)
	setNum(p, paramTemperature, c.Temperature)
	setNum(p, paramTopP, c.TopP)
	setStr(p, paramUser, c.User)
	if c.ParallelToolCalls != nil {
		p[paramParallelTools] = structpb.NewBoolValue(*c.ParallelToolCalls)
	}
	if v := jsonValue(c.ToolChoice); v != nil {
		p[paramToolChoice] = v
	}
	if r := c.Reasoning; r != nil {
		setStr(p, paramEffort, r.Effort)
		setStr(x, extSummary, r.Summary)
	}
	if v := jsonValue(c.Text); v != nil {
		x[extText] = v
	}
	if len(c.Include) > 0 {
		list := make([]any, len(c.Include))
		for i, s := range c.Include {
			list[i] = s
		}
		x[extInclude] = canonical.Value(list)
	}
	setStr(x, extTruncation, c.Truncation)
	setInt(x, extMaxToolCalls, c.MaxToolCalls)
	setInt(x, extTopLogprobs, c.TopLogprobs)
	setStr(x, extPromptCacheKey, c.PromptCacheKey)
	setStr(x, extSafetyID, c.SafetyIdentifier)
}

// jsonValue is raw JSON as a structpb value; nil for none or null.
func jsonValue(v json.Value) *structpb.Value {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	var a any
	if json.Unmarshal(v, &a) != nil {
		return nil
	}
	return canonical.Value(a)
}

// jsonStruct is a raw JSON object as a structpb struct; nil otherwise.
func jsonStruct(v json.Value) *structpb.Struct {
	if len(v) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(v, &m) != nil || m == nil {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}
