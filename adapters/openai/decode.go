package openai

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// A conversation travels in a canonical request as canonical/conversation.go
// lays it out. Chat Completions' own: an assistant's reasoning of an
// earlier turn is reasoning_content or reasoning; a developer message has
// role system and metadata openai.role=developer, so every backend reads
// it as a system prompt and ours sends it back as developer.
const metaRole = "openai.role"

// Canonical parameter names the frontend sets and the backend reads (the
// names other adapters use for the same facts).
const (
	paramMaxTokens     = "max_tokens"
	paramTemperature   = "temperature"
	paramTopP          = "top_p"
	paramStop          = "stop"
	paramSeed          = "seed"
	paramPresence      = "presence_penalty"
	paramFrequency     = "frequency_penalty"
	paramToolChoice    = "tool_choice"
	paramParallelTools = "parallel_tool_calls"
	paramEffort        = "reasoning_effort"
	paramUser          = "user"
)

// Extension keys of request members no canonical field holds, which an
// OpenAI backend sends on as they came.
const (
	extResponseFormat = "openai.response_format"
	extLogitBias      = "openai.logit_bias"
	extLogprobs       = "openai.logprobs"
	extTopLogprobs    = "openai.top_logprobs"
)

// decoded is a create request read and checked.
type decoded struct {
	req          *canonical.Request
	model        string
	stream       bool
	includeUsage bool
	// clientTools names the tools the request declared: a call of
	// another is one the bridge runs, which is not sent (encode.go).
	clientTools map[string]bool
}

var (
	toolNameRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// jsonError turns a decoding error into OpenAI's "Invalid type for
// '<param>'" naming the member (messages[0].content), or a parse error.
// The library words its errors at random: the fields are read, not the text.
func jsonError(err error) *apiError {
	if ptr, kind, ok := json.TypeMismatch(err); ok {
		param := paramPath(ptr)
		return invalid(param, "invalid_type", fmt.Sprintf("Invalid type for '%s': expected %s.", param, expected(kind)))
	}
	s := err.Error()
	for _, p := range []string{"json: ", "jsontext: "} {
		s = strings.TrimPrefix(s, p)
	}
	return invalid("", "", "We could not parse the JSON body of your request: "+s)
}

// paramPath writes a JSON pointer as OpenAI names parameters:
// /messages/0/content is messages[0].content.
func paramPath(ptr string) string {
	var sb strings.Builder
	for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if seg != "" && strings.Trim(seg, "0123456789") == "" {
			sb.WriteString("[" + seg + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(seg)
	}
	return sb.String()
}

// expected says what a member should have been, from the kind of the Go
// type it decodes into.
func expected(kind reflect.Kind) string {
	switch kind {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a decimal"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// decodeRequest reads a create request's body into a canonical request.
func decodeRequest(body []byte) (*decoded, *apiError) {
	var c chatRequest
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, jsonError(err)
	}
	if e := c.validate(); e != nil {
		return nil, e
	}
	req := &canonical.Request{Target: c.Model, Parameters: map[string]*structpb.Value{}, Extensions: map[string]*structpb.Value{}}
	prompt := &canonical.Node{}
	for i := range c.Messages {
		n, e := turn(&c.Messages[i], i)
		if e != nil {
			return nil, e
		}
		prompt.Children = append(prompt.Children, n)
	}
	req.Inputs = []*canonical.NamedNode{{Name: canonical.InputPrompt, Node: prompt}}
	if e := c.tools(req); e != nil {
		return nil, e
	}
	if e := c.parameters(req); e != nil {
		return nil, e
	}
	if e := extraParameters(body, req); e != nil {
		return nil, e
	}
	d := &decoded{req: req, model: c.Model, stream: c.Stream != nil && *c.Stream, clientTools: canonical.ToolNames(req.GetTools())}
	if so := c.StreamOptions; so != nil && so.IncludeUsage != nil {
		d.includeUsage = *so.IncludeUsage
	}
	return d, nil
}

// validate checks the members the frontend reads, naming the first bad
// one (OpenAI's and vLLM's messages where they are known, reference 2).
func (c *chatRequest) validate() *apiError {
	inRange := func(v *float64, lo, hi float64) bool { return v == nil || (*v >= lo && *v <= hi) }
	switch {
	case c.Model == "":
		return invalid("model", "missing_required_parameter", "Missing required parameter: 'model'.")
	case c.Messages == nil:
		return invalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	case len(c.Messages) == 0:
		return invalid("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	case c.StreamOptions != nil && (c.Stream == nil || !*c.Stream):
		return invalid("stream_options", "invalid_value", "Invalid value for 'stream_options': stream_options can only be defined when `stream=True`.")
	case c.N != nil && *c.N != 1:
		return invalid("n", "unsupported_value", fmt.Sprintf("Unsupported value: 'n' is %d: this server returns one choice (n must be 1).", *c.N))
	case !inRange(c.Temperature, 0, 2):
		return invalid("temperature", "decimal_above_max_value", fmt.Sprintf("Invalid 'temperature': %v is outside [0, 2].", *c.Temperature))
	case !inRange(c.TopP, 0, 1):
		return invalid("top_p", "invalid_value", fmt.Sprintf("Invalid 'top_p': %v is outside [0, 1].", *c.TopP))
	case !inRange(c.PresencePenalty, -2, 2):
		return invalid("presence_penalty", "invalid_value", fmt.Sprintf("Invalid 'presence_penalty': %v is outside [-2, 2].", *c.PresencePenalty))
	case !inRange(c.FrequencyPenalty, -2, 2):
		return invalid("frequency_penalty", "invalid_value", fmt.Sprintf("Invalid 'frequency_penalty': %v is outside [-2, 2].", *c.FrequencyPenalty))
	case c.MaxTokens != nil && *c.MaxTokens < 1:
		return invalid("max_tokens", "integer_below_min_value", "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1.")
	case c.MaxCompletionTokens != nil && *c.MaxCompletionTokens < 1:
		return invalid("max_completion_tokens", "integer_below_min_value", "Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1.")
	case c.TopLogprobs != nil && (*c.TopLogprobs < 0 || *c.TopLogprobs > 20):
		return invalid("top_logprobs", "invalid_value", "Invalid 'top_logprobs': expected an integer in [0, 20].")
	}
	for i, m := range c.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		case "":
			return invalid(fmt.Sprintf("messages[%d].role", i), "missing_required_parameter", fmt.Sprintf("Missing required parameter: 'messages[%d].role'.", i))
		default:
			return invalid(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.", m.Role))
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return invalid(fmt.Sprintf("messages[%d].tool_call_id", i), "missing_required_parameter", fmt.Sprintf("Missing required parameter: 'messages[%d].tool_call_id'.", i))
		}
	}
	return nil
}

// turn reads one message into a node of its role.
func turn(m *inMessage, i int) (*canonical.Node, *apiError) {
	role := m.Role
	var meta map[string]string
	if role == "developer" {
		role, meta = "system", map[string]string{metaRole: "developer"}
	}
	n := &canonical.Node{Role: role, Metadata: meta}
	at := fmt.Sprintf("messages[%d]", i)
	if m.Role == "assistant" {
		if r := firstNonEmpty(m.ReasoningContent, m.Reasoning); r != "" {
			n.Children = append(n.Children, &canonical.Node{Mime: canonical.MimeReasoning, Role: role, Payload: canonical.DataPayload([]byte(r))})
		}
	}
	leaves, e := contentLeaves(m.Content, role, at+".content", m.Role == "assistant" && (len(m.ToolCalls) > 0 || m.FunctionCall != nil))
	if e != nil {
		return nil, e
	}
	for _, l := range leaves {
		l.Metadata = meta
		if m.Role == "tool" {
			l.Metadata = map[string]string{canonical.MetaToolCallID: m.ToolCallID}
		}
	}
	n.Children = append(n.Children, leaves...)
	if m.Role == "tool" && len(leaves) == 0 { // an empty result still answers its call
		n.Children = append(n.Children, &canonical.Node{Mime: "text/plain", Role: role, Payload: canonical.DataPayload(nil),
			Metadata: map[string]string{canonical.MetaToolCallID: m.ToolCallID}})
	}
	if m.Role != "assistant" && len(m.ToolCalls) > 0 {
		return nil, invalid(at+".tool_calls", "invalid_value", fmt.Sprintf("Invalid parameter: '%s.tool_calls' is only allowed on messages with role 'assistant'.", at))
	}
	calls := m.ToolCalls
	if m.FunctionCall != nil { // the deprecated single call
		calls = append(calls, wireCall{Type: "function", Function: *m.FunctionCall})
	}
	for j, tc := range calls {
		if tc.Function.Name == "" {
			return nil, invalid(fmt.Sprintf("%s.tool_calls[%d].function.name", at, j), "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: '%s.tool_calls[%d].function.name'.", at, j))
		}
		n.Children = append(n.Children, &canonical.Node{Mime: canonical.MimeToolCall, Role: role, Payload: canonical.DataPayload([]byte(tc.Function.Arguments)),
			Metadata: map[string]string{canonical.MetaToolCallID: tc.ID, canonical.MetaToolName: tc.Function.Name}})
	}
	return n, nil
}

func firstNonEmpty(ps ...*string) string {
	for _, p := range ps {
		if p != nil && *p != "" {
			return *p
		}
	}
	return ""
}

// contentLeaves reads a message's content: a string, an array of parts,
// or null (allowed only on an assistant message with tool calls).
func contentLeaves(v json.Value, role, at string, mayBeNull bool) ([]*canonical.Node, *apiError) {
	switch v.Kind() {
	case 0, 'n':
		if mayBeNull || role == "assistant" || role == "tool" {
			return nil, nil
		}
		return nil, invalid(at, "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s'.", at))
	case '"':
		var s string
		if err := json.Unmarshal(v, &s, json.AllowInvalidUTF8(true)); err != nil {
			return nil, invalid(at, "invalid_type", fmt.Sprintf("Invalid type for '%s': expected a string.", at))
		}
		return []*canonical.Node{canonical.TextNode(role, s)}, nil
	case '[':
	default:
		return nil, invalid(at, "invalid_type", fmt.Sprintf("Invalid type for '%s': expected one of a string or an array of objects.", at))
	}
	var parts []inPart
	if err := json.Unmarshal(v, &parts, json.AllowInvalidUTF8(true)); err != nil {
		e := jsonError(err)
		if e.param != "" {
			e.param = at + e.param
			e.msg = fmt.Sprintf("Invalid type for '%s'.", e.param)
		}
		return nil, e
	}
	out := make([]*canonical.Node, 0, len(parts))
	for j := range parts {
		l, e := partLeaf(&parts[j], role, fmt.Sprintf("%s[%d]", at, j))
		if e != nil {
			return nil, e
		}
		out = append(out, l)
	}
	return out, nil
}

// partLeaf reads one content part.
func partLeaf(p *inPart, role, at string) (*canonical.Node, *apiError) {
	missing := func(field string) *apiError {
		return invalid(at+"."+field, "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s.%s'.", at, field))
	}
	switch p.Type {
	case "text":
		if p.Text == nil {
			return nil, missing("text")
		}
		return canonical.TextNode(role, *p.Text), nil
	case "refusal":
		if p.Refusal == nil {
			return nil, missing("refusal")
		}
		return canonical.TextNode(role, *p.Refusal), nil
	case "image_url":
		if p.ImageURL == nil || p.ImageURL.URL == "" {
			return nil, missing("image_url.url")
		}
		return imageLeaf(p.ImageURL.URL, role, at+".image_url.url")
	case "input_audio":
		if p.InputAudio == nil || p.InputAudio.Data == "" {
			return nil, missing("input_audio.data")
		}
		data, err := base64.StdEncoding.DecodeString(p.InputAudio.Data)
		if err != nil {
			return nil, invalid(at+".input_audio.data", "invalid_value", fmt.Sprintf("Invalid '%s.input_audio.data': not base64.", at))
		}
		return &canonical.Node{Mime: "audio/" + p.InputAudio.Format, Role: role, Payload: canonical.DataPayload(data)}, nil
	case "":
		return nil, missing("type")
	}
	return nil, invalid(at+".type", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'text', 'image_url', 'input_audio' and 'refusal'.", p.Type))
}

// imageLeaf is an image_url: a data: URL becomes inline data of its mime
// type, any other URL a ref.
func imageLeaf(url, role, at string) (*canonical.Node, *apiError) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return &canonical.Node{Mime: "image/*", Role: role, Payload: canonical.RefPayload(url)}, nil
	}
	meta, data, ok := strings.Cut(rest, ",")
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isB64 || mime == "" {
		return nil, invalid(at, "invalid_image_url", fmt.Sprintf("Invalid '%s': expected a base64 data URL (data:<mime>;base64,<data>).", at))
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, invalid(at, "invalid_image_url", fmt.Sprintf("Invalid '%s': the data is not base64.", at))
	}
	return &canonical.Node{Mime: mime, Role: role, Payload: canonical.DataPayload(b)}, nil
}

// tools reads tools into canonical tool specs.
func (c *chatRequest) tools(req *canonical.Request) *apiError {
	for i, t := range c.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return invalid(at+".type", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function'.", t.Type))
		}
		if t.Function == nil {
			return invalid(at+".function", "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s.function'.", at))
		}
		if !toolNameRe.MatchString(t.Function.Name) {
			return invalid(at+".function.name", "invalid_value",
				fmt.Sprintf("Invalid '%s.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.", at))
		}
		spec := &canonical.ToolSpec{Name: t.Function.Name, Description: t.Function.Description}
		if len(t.Function.Parameters) > 0 {
			var m map[string]any
			if err := json.Unmarshal(t.Function.Parameters, &m); err != nil {
				return invalid(at+".function.parameters", "invalid_type", fmt.Sprintf("Invalid type for '%s.function.parameters': expected an object.", at))
			}
			s, err := structpb.NewStruct(m)
			if err != nil {
				return invalid(at+".function.parameters", "invalid_value", fmt.Sprintf("Invalid '%s.function.parameters': %v.", at, err))
			}
			spec.Parameters = s
		}
		spec.Strict = t.Function.Strict
		req.Tools = append(req.Tools, spec)
	}
	return nil
}
