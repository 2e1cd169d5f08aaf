package openai

import (
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// parameters sets the canonical parameters and extensions of the typed
// members.
func (c *chatRequest) parameters(req *canonical.Request) *apiError {
	p, ext := req.Parameters, req.Extensions
	num := func(name string, v *float64) {
		if v != nil {
			p[name] = structpb.NewNumberValue(*v)
		}
	}
	switch {
	case c.MaxCompletionTokens != nil:
		p[paramMaxTokens] = structpb.NewNumberValue(float64(*c.MaxCompletionTokens))
	case c.MaxTokens != nil:
		p[paramMaxTokens] = structpb.NewNumberValue(float64(*c.MaxTokens))
	}
	num(paramTemperature, c.Temperature)
	num(paramTopP, c.TopP)
	num(paramPresence, c.PresencePenalty)
	num(paramFrequency, c.FrequencyPenalty)
	if c.Seed != nil {
		p[paramSeed] = structpb.NewNumberValue(float64(*c.Seed))
	}
	stop, e := stopList(c.Stop)
	if e != nil {
		return e
	}
	if len(stop) > 0 {
		p[paramStop] = structpb.NewListValue(&structpb.ListValue{Values: stop})
	}
	if e := c.toolChoice(p); e != nil {
		return e
	}
	if c.ParallelToolCalls != nil {
		p[paramParallelTools] = structpb.NewBoolValue(*c.ParallelToolCalls)
	}
	if c.ReasoningEffort != nil && *c.ReasoningEffort != "" {
		p[paramEffort] = structpb.NewStringValue(*c.ReasoningEffort)
	}
	if c.User != nil && *c.User != "" {
		p[paramUser] = structpb.NewStringValue(*c.User)
	}
	for key, v := range map[string]json.Value{extResponseFormat: c.ResponseFormat, extLogitBias: c.LogitBias} {
		if v.Kind() == '{' {
			var x any
			if json.Unmarshal(v, &x) == nil {
				ext[key] = canonical.Value(x)
			}
		}
	}
	if c.Logprobs != nil && *c.Logprobs {
		ext[extLogprobs] = structpb.NewBoolValue(true)
	}
	if c.TopLogprobs != nil {
		ext[extTopLogprobs] = structpb.NewNumberValue(float64(*c.TopLogprobs))
	}
	return nil
}

// stopList reads stop: null, a string, or up to 4 strings.
func stopList(v json.Value) ([]*structpb.Value, *apiError) {
	switch v.Kind() {
	case 0, 'n':
		return nil, nil
	case '"':
		var s string
		_ = json.Unmarshal(v, &s)
		if s == "" {
			return nil, nil
		}
		return []*structpb.Value{structpb.NewStringValue(s)}, nil
	case '[':
		var l []string
		if err := json.Unmarshal(v, &l); err != nil {
			return nil, invalid("stop", "invalid_type", "Invalid type for 'stop': expected a string or an array of strings.")
		}
		if len(l) > 4 {
			return nil, invalid("stop", "array_above_max_length", fmt.Sprintf("Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length %d instead.", len(l)))
		}
		var out []*structpb.Value
		for _, s := range l {
			if s != "" {
				out = append(out, structpb.NewStringValue(s))
			}
		}
		return out, nil
	}
	return nil, invalid("stop", "invalid_type", "Invalid type for 'stop': expected a string or an array of strings.")
}

// toolChoice reads tool_choice into the canonical parameter (OpenAI's
// spelling: "none", "auto", "required", or {"type":"function",
// "function":{"name"}}, which the other adapters read too).
func (c *chatRequest) toolChoice(p map[string]*structpb.Value) *apiError {
	v := c.ToolChoice
	switch v.Kind() {
	case 0, 'n':
		return nil
	case '"':
		var s string
		_ = json.Unmarshal(v, &s)
		switch s {
		case "none", "auto", "required":
			p[paramToolChoice] = structpb.NewStringValue(s)
			return nil
		}
		return invalid("tool_choice", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", s))
	case '{':
		var tc struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(v, &tc); err != nil || tc.Type != "function" || tc.Function == nil || tc.Function.Name == "" {
			return invalid("tool_choice.function.name", "missing_required_parameter", "Missing required parameter: 'tool_choice.function.name'.")
		}
		if !c.hasTool(tc.Function.Name) {
			return invalid("tool_choice", "invalid_value", fmt.Sprintf("Invalid value for 'tool_choice': tool '%s' is not in 'tools'.", tc.Function.Name))
		}
		p[paramToolChoice] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"type": structpb.NewStringValue("function"),
			"function": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				"name": structpb.NewStringValue(tc.Function.Name)}}),
		}})
		return nil
	}
	return invalid("tool_choice", "invalid_type", "Invalid type for 'tool_choice': expected a string or an object.")
}

func (c *chatRequest) hasTool(name string) bool {
	for _, t := range c.Tools {
		if t.Function != nil && t.Function.Name == name {
			return true
		}
	}
	return false
}

// extraParameters keeps the scalar members the frontend does not know as
// canonical parameters (vLLM's top_k and min_p, the scripted backend's
// fault injection), as vLLM accepts extra members; objects and arrays are
// ignored.
func extraParameters(body []byte, req *canonical.Request) *apiError {
	extra, err := json.UnknownScalars(body, knownMembers)
	if err != nil {
		return jsonError(err)
	}
	for k, x := range extra {
		if pv := canonical.Value(x); pv != nil {
			req.Parameters[k] = pv
		}
	}
	return nil
}
