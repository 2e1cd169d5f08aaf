package responses

import (
	"encoding/base64"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// encodeCreate is the upstream request for req: the whole conversation as
// input items (see decode.go for how items travel), tools, parameters and
// the extensions a Responses frontend set; stream true.
func encodeCreate(req *canonical.Request, model string, store bool) ([]byte, *canonical.Error) {
	var items []item
	for _, in := range req.GetInputs() {
		items = appendItems(items, in.GetNode(), "user")
	}
	input, err := json.Marshal(items)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "responses backend: the input cannot be encoded: %v", err)
	}
	c := createRequest{Model: model, Input: input, Stream: ptr(true), Store: ptr(store)}
	for _, t := range req.GetTools() {
		w := tool{Type: "function", Name: t.GetName(), Strict: ptr(false)}
		if d := t.GetDescription(); d != "" {
			w.Description = &d
		}
		if p := t.GetParameters(); p != nil {
			w.Parameters, _ = json.Marshal(p.AsMap(), json.Deterministic(true))
		}
		if t.Strict != nil {
			w.Strict = t.Strict
		}
		c.Tools = append(c.Tools, w)
	}
	encodeParameters(req, &c)
	out, merr := json.Marshal(&c, json.Deterministic(true))
	if merr != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "responses backend: the request cannot be encoded: %v", merr)
	}
	return out, nil
}

// encodeParameters sets the request's sampling and tool settings.
func encodeParameters(req *canonical.Request, c *createRequest) {
	p, x := req.GetParameters(), req.GetExtensions()
	num := func(v *structpb.Value) (float64, bool) {
		n, ok := v.GetKind().(*structpb.Value_NumberValue)
		if !ok {
			return 0, false
		}
		return n.NumberValue, true
	}
	if n, ok := num(p[paramMaxTokens]); ok && n >= 1 {
		c.MaxOutputTokens = ptr(int64(n))
	}
	if n, ok := num(p[paramTemperature]); ok {
		c.Temperature = &n
	}
	if n, ok := num(p[paramTopP]); ok {
		c.TopP = &n
	}
	if b, ok := p[paramParallelTools].GetKind().(*structpb.Value_BoolValue); ok {
		c.ParallelToolCalls = &b.BoolValue
	}
	if s := p[paramUser].GetStringValue(); s != "" {
		c.User = &s
	}
	c.ToolChoice = toolChoice(p[paramToolChoice])
	effort, summary := p[paramEffort].GetStringValue(), x[extSummary].GetStringValue()
	if effort != "" || summary != "" {
		c.Reasoning = &reasoningConfig{}
		if effort != "" {
			c.Reasoning.Effort = &effort
		}
		if summary != "" {
			c.Reasoning.Summary = &summary
		}
	}
	if v := x[extText]; v != nil {
		c.Text, _ = json.Marshal(v.AsInterface(), json.Deterministic(true))
	}
	for _, v := range x[extInclude].GetListValue().GetValues() {
		c.Include = append(c.Include, v.GetStringValue())
	}
	if s := x[extTruncation].GetStringValue(); s != "" {
		c.Truncation = &s
	}
	if n, ok := num(x[extMaxToolCalls]); ok {
		c.MaxToolCalls = ptr(int64(n))
	}
	if n, ok := num(x[extTopLogprobs]); ok {
		c.TopLogprobs = ptr(int64(n))
	}
	if s := x[extPromptCacheKey].GetStringValue(); s != "" {
		c.PromptCacheKey = &s
	}
	if s := x[extSafetyID].GetStringValue(); s != "" {
		c.SafetyIdentifier = &s
	}
}

// toolChoice is a tool_choice parameter in Responses' form: a string, or
// a function choice (Chat Completions' nested form flattened).
func toolChoice(v *structpb.Value) json.Value {
	if v == nil {
		return nil
	}
	if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
		out, _ := json.Marshal(s.StringValue)
		return out
	}
	m := v.GetStructValue().AsMap()
	if m == nil {
		return nil
	}
	if fn, ok := m["function"].(map[string]any); ok && m["name"] == nil {
		m["name"] = fn["name"]
		delete(m, "function")
	}
	out, _ := json.Marshal(m, json.Deterministic(true))
	return out
}

// appendItems appends the items of node n: a leaf is an item of its own
// (a message of one part, a function call or its output); a node with
// children is a message of its role when its leaves are plain content,
// else its children in turn.
func appendItems(out []item, n *canonical.Node, role string) []item {
	if n == nil {
		return out
	}
	if r := n.GetRole(); r != "" {
		role = r
	}
	if len(n.GetChildren()) == 0 {
		return appendLeaf(out, n, role)
	}
	if n.GetRole() != "" && plainLeaves(n) {
		msg := item{Type: "message", Role: wireRole(role), Content: parts{}}
		for _, c := range n.GetChildren() {
			if p, ok := contentPart(c, msg.Role); ok {
				msg.Content = append(msg.Content, p)
			}
		}
		return append(out, msg)
	}
	for _, c := range n.GetChildren() {
		out = appendItems(out, c, role)
	}
	return out
}

// plainLeaves reports whether every child of n is a content leaf of n's
// role.
func plainLeaves(n *canonical.Node) bool {
	for _, c := range n.GetChildren() {
		if len(c.GetChildren()) != 0 || (c.GetRole() != "" && c.GetRole() != n.GetRole()) {
			return false
		}
		if m := c.GetMime(); m == canonical.MimeToolCall || m == canonical.MimeReasoning || c.GetRole() == "tool" {
			return false
		}
	}
	return true
}

// wireRole is a canonical role as a message role.
func wireRole(r string) string {
	switch r {
	case "assistant", "system", "developer", "user":
		return r
	case "model", "ai":
		return "assistant"
	}
	return "user"
}

// appendLeaf appends the item a leaf is.
func appendLeaf(out []item, n *canonical.Node, role string) []item {
	md := n.GetMetadata()
	switch {
	case n.GetMime() == canonical.MimeToolCall:
		args := string(n.GetData())
		return append(out, item{Type: "function_call", CallID: md[canonical.MetaToolCallID], Name: md[canonical.MetaToolName], Arguments: &args})
	case role == "tool":
		s, _ := json.Marshal(string(n.GetData()))
		return append(out, item{Type: "function_call_output", CallID: md[canonical.MetaToolCallID], Output: s})
	case n.GetMime() == canonical.MimeReasoning:
		return out // reasoning of earlier turns is not sent back (no upstream id)
	}
	p, ok := contentPart(n, wireRole(role))
	if !ok {
		return out
	}
	return append(out, item{Type: "message", Role: wireRole(role), Content: parts{p}})
}

// contentPart is a leaf as a message part: text, or an image or file.
func contentPart(n *canonical.Node, role string) (part, bool) {
	if canonical.IsText(n) {
		s := string(n.GetData())
		if role == "assistant" {
			return part{Type: "output_text", Text: &s, Annotations: []json.Value{}}, true
		}
		return part{Type: "input_text", Text: &s}, true
	}
	if role == "assistant" {
		return part{}, false
	}
	src := n.GetRef()
	if src == "" && n.GetData() != nil {
		src = "data:" + n.GetMime() + ";base64," + base64.StdEncoding.EncodeToString(n.GetData())
	}
	if src == "" {
		return part{}, false
	}
	if strings.HasPrefix(n.GetMime(), "image/") {
		p := part{Type: "input_image", ImageURL: &src}
		if d, ok := n.GetMetadata()["detail"]; ok {
			p.Detail = &d
		}
		return p, true
	}
	p := part{Type: "input_file"}
	if n.GetRef() != "" {
		p.FileURL = &src
	} else {
		p.FileData = &src
	}
	if name, ok := n.GetMetadata()["original_file_name"]; ok {
		p.Filename = &name
	}
	return p, true
}
