package anthropic

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// A conversation travels in a canonical request as canonical/conversation.go
// lays it out. Anthropic's own: a tool_result leaf has metadata is_error
// "true" when it failed; a thinking leaf has metadata signature when it
// has one; a redacted_thinking block is a reasoning leaf without text and
// with metadata redacted_data; a tool_result's text leaf has metadata
// tool_references, the names its tool_reference blocks load (comma
// separated: a tool name has no comma); a block's cache_control is
// metadata cache_control (its JSON) on the block's first leaf.
const (
	metaIsError      = "is_error"
	metaSignature    = "signature"
	metaRedacted     = "redacted_data"
	metaToolRefs     = "tool_references"
	metaCacheControl = "cache_control"
)

// Canonical parameter names the frontend sets and the backend reads.
const (
	paramMaxTokens     = "max_tokens"
	paramTemperature   = "temperature"
	paramTopP          = "top_p"
	paramTopK          = "top_k"
	paramStop          = "stop"
	paramToolChoice    = "tool_choice"
	paramParallelTools = "parallel_tool_calls"
	paramUser          = "user"
)

// Extension keys: request members and event facts no canonical field
// holds, kept so an Anthropic backend and frontend pass them on.
const (
	extThinking    = "anthropic.thinking"     // request: the thinking config object
	extServerTools = "anthropic.server_tools" // request: tools of a server type, as sent
	extBeta        = "anthropic.beta"         // request: the anthropic-beta header's values
	// request: top-level objects an Anthropic backend sends on as they are
	extOutputConfig      = "anthropic.output_config"
	extContextManagement = "anthropic.context_management"
	extCacheControl      = "anthropic.cache_control"
	// ExtSignature is the signature of a thinking block, on the reasoning
	// block's BlockFinish event.
	ExtSignature = "anthropic.signature"
	// ExtRedacted is the data of a redacted_thinking block, on a
	// reasoning block's BlockStart event (the block has no deltas).
	ExtRedacted = "anthropic.redacted_thinking"
	// ExtStopReason is the upstream's stop_reason and ExtStopSequence the
	// stop sequence that matched, on MessageFinish.
	ExtStopReason   = "anthropic.stop_reason"
	ExtStopSequence = "anthropic.stop_sequence"
	// ExtServerTool marks a tool call the server ran (server_tool_use),
	// on its BlockStart event: no client is to answer it.
	ExtServerTool = "anthropic.server_tool"
)

// decoded is a create request read and checked.
type decoded struct {
	req    *canonical.Request
	model  string
	stream bool
	// clientTools names the tools the request declared: a tool call of
	// another name is one the bridge runs (encode.go).
	clientTools map[string]bool
	// thinking: the request enabled thinking (enabled or adaptive); only
	// then are reasoning blocks rendered, as Anthropic sends none unasked.
	thinking bool
}

// invalid is an invalid_request_error naming the field (dotted path, as
// Anthropic's validation messages write it).
func invalid(field, format string, args ...any) *canonical.Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return canonical.Errorf(canonical.CodeInvalidArgument, "%s", msg)
}

// jsonError turns a decoding error into a message naming the member;
// at is the dotted path of the value decoded ("" for the body). The
// library words its errors at random: the fields are read, not the text.
func jsonError(err error, at string) *canonical.Error {
	if ptr, kind, ok := json.TypeMismatch(err); ok {
		field := strings.ReplaceAll(strings.TrimPrefix(ptr, "/"), "/", ".")
		if at != "" {
			field = strings.TrimSuffix(at+"."+field, ".")
		}
		return invalid(field, "%s", expected(kind))
	}
	if at != "" {
		return invalid(at, "Input is invalid")
	}
	s := err.Error()
	for _, p := range []string{"json: ", "jsontext: "} {
		s = strings.TrimPrefix(s, p)
	}
	return invalid("", "The request body is not valid JSON: %s", s)
}

// expected says what a member should have been, from the kind of the Go
// type it decodes into (pydantic's words, as Anthropic's API answers).
func expected(kind reflect.Kind) string {
	switch kind {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "Input should be a valid integer"
	case reflect.Float32, reflect.Float64:
		return "Input should be a valid number"
	case reflect.String:
		return "Input should be a valid string"
	case reflect.Bool:
		return "Input should be a valid boolean"
	case reflect.Slice, reflect.Array:
		return "Input should be a valid list"
	}
	return "Input should be a valid dictionary"
}

// decodeRequest reads a create request's body into a canonical request.
func decodeRequest(body []byte) (*decoded, *canonical.Error) {
	var c createRequest
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, jsonError(err, "")
	}
	if e := c.validate(); e != nil {
		return nil, e
	}
	req := &canonical.Request{Target: c.Model, Parameters: map[string]*structpb.Value{}, Extensions: map[string]*structpb.Value{}}
	prompt := &canonical.Node{}
	sys, e := systemLeaves(c.System)
	if e != nil {
		return nil, e
	}
	prompt.Children = sys
	for i, m := range c.Messages {
		n, e := turn(m, i)
		if e != nil {
			return nil, e
		}
		prompt.Children = append(prompt.Children, n)
	}
	req.Inputs = []*canonical.NamedNode{{Name: canonical.InputPrompt, Node: prompt}}
	clientTools, e := c.tools(req, referencedTools(prompt))
	if e != nil {
		return nil, e
	}
	c.parameters(req)
	if e := c.passedObjects(req); e != nil {
		return nil, e
	}
	if e := extraParameters(body, req); e != nil {
		return nil, e
	}
	thinking := c.Thinking != nil && c.Thinking.Type != "disabled"
	return &decoded{req: req, model: c.Model, stream: c.Stream, clientTools: clientTools, thinking: thinking}, nil
}

// validate checks the members the frontend reads, naming the first bad
// one, in Anthropic's words where they are known (reference section 2).
func (c *createRequest) validate() *canonical.Error {
	switch {
	case c.Model == "":
		return invalid("model", "Field required")
	case c.MaxTokens == nil:
		return invalid("max_tokens", "Field required")
	case *c.MaxTokens < 1:
		return invalid("max_tokens", "Input should be greater than or equal to 1")
	case c.Messages == nil:
		return invalid("messages", "Field required")
	case len(c.Messages) == 0:
		return invalid("messages", "List should have at least 1 item after validation, not 0")
	case c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 1):
		return invalid("temperature", "Input should be between 0 and 1, got %v", *c.Temperature)
	case c.TopP != nil && (*c.TopP < 0 || *c.TopP > 1):
		return invalid("top_p", "Input should be between 0 and 1, got %v", *c.TopP)
	case c.TopK != nil && *c.TopK < 0:
		return invalid("top_k", "Input should be greater than or equal to 0")
	}
	for i, m := range c.Messages {
		if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
			return invalid(fmt.Sprintf("messages.%d.role", i), "Input should be 'user', 'assistant' or 'system'")
		}
		if len(m.Content) == 0 {
			return invalid(fmt.Sprintf("messages.%d.content", i), "Field required")
		}
	}
	if t := c.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			switch {
			case t.BudgetTokens == nil:
				return invalid("thinking.enabled.budget_tokens", "Field required")
			case *t.BudgetTokens < 1024:
				return invalid("thinking.enabled.budget_tokens", "Input should be greater than or equal to 1024")
			case *t.BudgetTokens >= *c.MaxTokens:
				return invalid("", "`max_tokens` must be greater than `thinking.budget_tokens`")
			}
		case "disabled", "adaptive":
		default:
			return invalid("thinking.type", "Input tag '%s' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'", t.Type)
		}
	}
	if tc := c.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "any", "none":
		case "tool":
			if tc.Name == "" {
				return invalid("tool_choice.tool.name", "Field required")
			}
		default:
			return invalid("tool_choice.type", "Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", tc.Type)
		}
	}
	return nil
}

// systemLeaves reads system: a string or an array of text blocks.
func systemLeaves(v json.Value) ([]*canonical.Node, *canonical.Error) {
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	if v.Kind() == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, invalid("system", "Input should be a valid string")
		}
		return []*canonical.Node{canonical.TextNode("system", s)}, nil
	}
	var blocks []inputBlock
	if err := json.Unmarshal(v, &blocks); err != nil {
		return nil, invalid("system", "Input should be a valid string or a list of text blocks")
	}
	var out []*canonical.Node
	for i, b := range blocks {
		if b.Type != "text" || b.Text == nil {
			return nil, invalid(fmt.Sprintf("system.%d", i), "Input should be a text block with a text")
		}
		n := canonical.TextNode("system", *b.Text)
		if e := markCache(n, b.CacheControl, fmt.Sprintf("system.%d", i)); e != nil {
			return nil, e
		}
		out = append(out, n)
	}
	return out, nil
}

// markCache keeps a block's cache_control (an object) in n's metadata.
func markCache(n *canonical.Node, cc json.Value, at string) *canonical.Error {
	if len(cc) == 0 || string(cc) == "null" {
		return nil
	}
	cc = slices.Clone(cc)
	if cc.Kind() != '{' || cc.Compact() != nil {
		return invalid(at+".cache_control", "Input should be a valid dictionary")
	}
	if n.Metadata == nil {
		n.Metadata = map[string]string{}
	}
	n.Metadata[metaCacheControl] = string(cc)
	return nil
}

// passedObjects keeps the top-level objects an Anthropic backend sends on
// as they are: output_config (effort), context_management, cache_control
// (automatic caching).
func (c *createRequest) passedObjects(req *canonical.Request) *canonical.Error {
	for _, o := range []struct {
		name, ext string
		v         json.Value
	}{{"output_config", extOutputConfig, c.OutputConfig}, {"context_management", extContextManagement, c.ContextManagement}, {"cache_control", extCacheControl, c.CacheControl}} {
		if len(o.v) == 0 || string(o.v) == "null" {
			continue
		}
		var m map[string]any
		if o.v.Kind() != '{' || json.Unmarshal(o.v, &m) != nil {
			return invalid(o.name, "Input should be a valid dictionary")
		}
		if v := canonical.Value(m); v != nil {
			req.Extensions[o.ext] = v
		}
	}
	return nil
}

// turn reads one message into a node of its role.
func turn(m inputMessage, i int) (*canonical.Node, *canonical.Error) {
	n := &canonical.Node{Role: m.Role}
	at := fmt.Sprintf("messages.%d.content", i)
	if m.Content.Kind() == '"' {
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			return nil, invalid(at, "Input should be a valid string")
		}
		n.Children = []*canonical.Node{canonical.TextNode(m.Role, s)}
		return n, nil
	}
	var blocks []inputBlock
	if m.Content.Kind() != '[' {
		return nil, invalid(at, "Input should be a valid string or a list of content blocks")
	}
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, jsonError(err, at)
	}
	for j := range blocks {
		if m.Role == "system" && blocks[j].Type != "text" {
			return nil, invalid(fmt.Sprintf("%s.%d.type", at, j), "Input tag '%s' found using 'type' does not match the expected tag of a system message: 'text'", blocks[j].Type)
		}
		leaves, e := blockLeaves(&blocks[j], m.Role, fmt.Sprintf("%s.%d", at, j))
		if e != nil {
			return nil, e
		}
		n.Children = append(n.Children, leaves...)
	}
	return n, nil
}

// blockLeaves reads one content block of a turn of role, its
// cache_control kept on its first leaf (thinking takes none).
func blockLeaves(b *inputBlock, role, at string) ([]*canonical.Node, *canonical.Error) {
	leaves, e := blockLeavesOf(b, role, at)
	if e == nil && len(leaves) > 0 && b.Type != "thinking" && b.Type != "redacted_thinking" {
		e = markCache(leaves[0], b.CacheControl, at)
	}
	return leaves, e
}

func blockLeavesOf(b *inputBlock, role, at string) ([]*canonical.Node, *canonical.Error) {
	switch b.Type {
	case "text":
		if b.Text == nil {
			return nil, invalid(at+".text", "Field required")
		}
		return []*canonical.Node{canonical.TextNode(role, *b.Text)}, nil
	case "image", "document":
		n, e := sourceLeaf(b, role, at)
		if e != nil {
			return nil, e
		}
		return []*canonical.Node{n}, nil
	case "tool_use":
		return toolUseLeaf(b, role, at)
	case "tool_result":
		return toolResultLeaves(b, at)
	case "thinking":
		if b.Thinking == nil {
			return nil, invalid(at+".thinking", "Field required")
		}
		n := &canonical.Node{Mime: canonical.MimeReasoning, Role: role, Payload: canonical.DataPayload([]byte(*b.Thinking))}
		if b.Signature != "" {
			n.Metadata = map[string]string{metaSignature: b.Signature}
		}
		return []*canonical.Node{n}, nil
	case "server_tool_use", "mcp_tool_use":
		if role == "assistant" {
			// A call the server ran (the bridge, encode.go, or Anthropic's
			// own tools) and its result: the answer after them says what
			// came of it, and no backend could take the call again.
			return nil, nil
		}
	case "redacted_thinking":
		if b.Data == "" {
			return nil, invalid(at+".data", "Field required")
		}
		return []*canonical.Node{{Mime: canonical.MimeReasoning, Role: role, Payload: canonical.DataPayload(nil), Metadata: map[string]string{metaRedacted: b.Data}}}, nil
	}
	if role == "assistant" && strings.HasSuffix(b.Type, "_tool_result") {
		return nil, nil // a server tool's result (web_search_tool_result, ...): see server_tool_use
	}
	return nil, invalid(at+".type", "Input tag '%s' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'", b.Type)
}

// sourceLeaf reads an image or document: base64 data, a URL, or (a
// document) plain text.
func sourceLeaf(b *inputBlock, role, at string) (*canonical.Node, *canonical.Error) {
	s := b.Source
	if s == nil {
		return nil, invalid(at+".source", "Field required")
	}
	switch s.Type {
	case "base64":
		if s.MediaType == "" {
			return nil, invalid(at+".source.media_type", "Field required")
		}
		data, err := base64.StdEncoding.DecodeString(s.Data)
		if err != nil {
			return nil, invalid(at+".source.data", "Input is not valid base64")
		}
		return &canonical.Node{Mime: s.MediaType, Role: role, Payload: canonical.DataPayload(data)}, nil
	case "url":
		if s.URL == "" {
			return nil, invalid(at+".source.url", "Field required")
		}
		mime := "image/*"
		if b.Type == "document" {
			mime = "application/pdf"
		}
		return &canonical.Node{Mime: mime, Role: role, Payload: canonical.RefPayload(s.URL)}, nil
	case "text":
		if b.Type == "document" {
			return canonical.TextNode(role, s.Data), nil
		}
	}
	return nil, invalid(at+".source.type", "Input tag '%s' found using 'type' does not match any of the expected tags: 'base64', 'url'", s.Type)
}

// toolUseLeaf reads a tool_use block of an assistant turn.
func toolUseLeaf(b *inputBlock, role, at string) ([]*canonical.Node, *canonical.Error) {
	switch {
	case b.ID == "":
		return nil, invalid(at+".id", "Field required")
	case b.Name == "":
		return nil, invalid(at+".name", "Field required")
	case len(b.Input) == 0:
		return nil, invalid(at+".input", "Field required")
	case b.Input.Kind() != '{':
		return nil, invalid(at+".input", "Input should be a valid dictionary")
	}
	return []*canonical.Node{{
		Mime: canonical.MimeToolCall, Role: role, Payload: canonical.DataPayload([]byte(b.Input)),
		Metadata: map[string]string{canonical.MetaToolCallID: b.ID, canonical.MetaToolName: b.Name},
	}}, nil
}

// toolResultLeaves reads a tool_result: its text as one tool leaf, its
// images as tool leaves after it.
func toolResultLeaves(b *inputBlock, at string) ([]*canonical.Node, *canonical.Error) {
	if b.ToolUseID == "" {
		return nil, invalid(at+".tool_use_id", "Field required")
	}
	meta := map[string]string{canonical.MetaToolCallID: b.ToolUseID}
	if b.IsError {
		meta[metaIsError] = "true"
	}
	text := &canonical.Node{Mime: "text/plain", Role: "tool", Metadata: meta}
	var extra []*canonical.Node
	var sb strings.Builder
	var refs []string
	switch {
	case len(b.Content) == 0 || string(b.Content) == "null":
	case b.Content.Kind() == '"':
		var s string
		if err := json.Unmarshal(b.Content, &s); err != nil {
			return nil, invalid(at+".content", "Input should be a valid string")
		}
		sb.WriteString(s)
	default:
		var parts []inputBlock
		if err := json.Unmarshal(b.Content, &parts); err != nil {
			return nil, invalid(at+".content", "Input should be a valid string or a list of content blocks")
		}
		for k := range parts {
			p := &parts[k]
			pat := fmt.Sprintf("%s.content.%d", at, k)
			switch p.Type {
			case "text":
				if p.Text == nil {
					return nil, invalid(pat+".text", "Field required")
				}
				sb.WriteString(*p.Text)
			case "image", "document":
				n, e := sourceLeaf(p, "tool", pat)
				if e != nil {
					return nil, e
				}
				n.Metadata = map[string]string{canonical.MetaToolCallID: b.ToolUseID}
				extra = append(extra, n)
			case "tool_reference":
				if p.ToolName == "" {
					return nil, invalid(pat+".tool_name", "Field required")
				}
				// The model reads the reference as sent; the tool it names
				// is loaded (see tools).
				ref, _ := json.Marshal(toolReference{Type: p.Type, ToolName: p.ToolName})
				if sb.Len() > 0 {
					sb.WriteByte('\n')
				}
				sb.Write(ref)
				refs = append(refs, p.ToolName)
			default:
				return nil, invalid(pat+".type", "Input tag '%s' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'tool_reference'", p.Type)
			}
		}
	}
	if len(refs) > 0 {
		meta[metaToolRefs] = strings.Join(refs, ",")
	}
	text.Payload = canonical.DataPayload([]byte(sb.String()))
	return append([]*canonical.Node{text}, extra...), nil
}

// referencedTools is the names the conversation's tool_reference blocks
// name.
func referencedTools(prompt *canonical.Node) map[string]bool {
	var refs map[string]bool
	for _, l := range canonical.Leaves(nil, prompt) {
		if names := l.GetMetadata()[metaToolRefs]; names != "" {
			if refs == nil {
				refs = map[string]bool{}
			}
			for n := range strings.SplitSeq(names, ",") {
				refs[n] = true
			}
		}
	}
	return refs
}

// tools reads tools: custom tools become ToolSpecs, server tools are kept
// as sent for an Anthropic backend. A custom tool with defer_loading is
// given to the backend only once a tool_reference in the conversation
// names it, as Anthropic's tool search loads it
// (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/tool-search-tool).
// It returns the names of every tool the request declares, deferred and
// server tools too: the client's (encode.go).
func (c *createRequest) tools(req *canonical.Request, referenced map[string]bool) (map[string]bool, *canonical.Error) {
	var server []any
	names := make(map[string]bool, len(c.Tools))
	for i, raw := range c.Tools {
		var t toolDef
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, invalid(fmt.Sprintf("tools.%d", i), "Input should be a valid tool definition")
		}
		names[t.Name] = true
		if t.Type != "" && t.Type != "custom" {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, invalid(fmt.Sprintf("tools.%d", i), "Input should be a valid dictionary")
			}
			server = append(server, v)
			continue
		}
		if t.Name == "" {
			return nil, invalid(fmt.Sprintf("tools.%d.custom.name", i), "Field required")
		}
		if len(t.InputSchema) == 0 {
			return nil, invalid(fmt.Sprintf("tools.%d.custom.input_schema", i), "Field required")
		}
		var schema map[string]any
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
			return nil, invalid(fmt.Sprintf("tools.%d.custom.input_schema", i), "Input should be a valid dictionary")
		}
		ps, err := structpb.NewStruct(schema)
		if err != nil {
			return nil, invalid(fmt.Sprintf("tools.%d.custom.input_schema", i), "Input should be a valid JSON Schema object")
		}
		if t.DeferLoading && !referenced[t.Name] {
			continue
		}
		req.Tools = append(req.Tools, &canonical.ToolSpec{Name: t.Name, Description: t.Description, Parameters: ps})
	}
	if len(server) > 0 {
		if v := canonical.Value(server); v != nil {
			req.Extensions[extServerTools] = v
		}
	}
	return names, nil
}

// knownMembers are the request members MessageCreateParamsBase defines;
// the others are extra sampling parameters (as vLLM's Messages endpoint
// takes them).
var knownMembers = map[string]bool{
	"model": true, "max_tokens": true, "messages": true, "system": true, "stream": true,
	"stop_sequences": true, "temperature": true, "top_p": true, "top_k": true, "tools": true,
	"tool_choice": true, "thinking": true, "metadata": true, "service_tier": true,
	"cache_control": true, "container": true, "inference_geo": true, "output_config": true,
	"mcp_servers": true, "context_management": true,
}

// extraParameters passes the request's other scalar members on as
// canonical parameters (strings, numbers, booleans; others are ignored).
func extraParameters(body []byte, req *canonical.Request) *canonical.Error {
	extra, err := json.UnknownScalars(body, knownMembers)
	if err != nil {
		return jsonError(err, "")
	}
	for k, x := range extra {
		if pv := canonical.Value(x); pv != nil {
			req.Parameters[k] = pv
		}
	}
	return nil
}

// parameters sets the canonical parameters and extensions.
func (c *createRequest) parameters(req *canonical.Request) {
	p := req.Parameters
	p[paramMaxTokens] = structpb.NewNumberValue(float64(*c.MaxTokens))
	if c.Temperature != nil {
		p[paramTemperature] = structpb.NewNumberValue(*c.Temperature)
	}
	if c.TopP != nil {
		p[paramTopP] = structpb.NewNumberValue(*c.TopP)
	}
	if c.TopK != nil {
		p[paramTopK] = structpb.NewNumberValue(float64(*c.TopK))
	}
	if len(c.StopSequences) > 0 {
		l := make([]*structpb.Value, len(c.StopSequences))
		for i, s := range c.StopSequences {
			l[i] = structpb.NewStringValue(s)
		}
		p[paramStop] = structpb.NewListValue(&structpb.ListValue{Values: l})
	}
	if tc := c.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "none":
			p[paramToolChoice] = structpb.NewStringValue(tc.Type)
		case "any":
			p[paramToolChoice] = structpb.NewStringValue("required")
		case "tool":
			p[paramToolChoice] = canonical.Value(map[string]any{"type": "function", "name": tc.Name})
		}
		if tc.DisableParallelToolUse != nil && *tc.DisableParallelToolUse {
			p[paramParallelTools] = structpb.NewBoolValue(false)
		}
	}
	if c.Metadata != nil && c.Metadata.UserID != "" {
		p[paramUser] = structpb.NewStringValue(c.Metadata.UserID)
	}
	if t := c.Thinking; t != nil {
		m := map[string]any{"type": t.Type}
		if t.BudgetTokens != nil {
			m["budget_tokens"] = float64(*t.BudgetTokens)
		}
		if t.Display != "" {
			m["display"] = t.Display
		}
		req.Extensions[extThinking] = canonical.Value(m)
	}
}
