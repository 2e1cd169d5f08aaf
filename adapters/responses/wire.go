package responses

import (
	"github.com/interlingua-dev/interlingua/internal/json"
)

// The Responses API's wire types, as openai-node's
// src/resources/responses/responses.ts and Open Responses'
// ResponseResource.json define them. Each is what we read or write; the
// members we do not use are not declared (unknown members of a request are
// ignored, as OpenAI's SDKs send members newer than ours).

// createRequest is the body of POST /v1/responses
// (ResponseCreateParamsBase).
type createRequest struct {
	Model              string            `json:"model"`
	Input              json.Value        `json:"input,omitzero"`
	Instructions       *string           `json:"instructions,omitzero"`
	PreviousResponseID *string           `json:"previous_response_id,omitzero"`
	Conversation       json.Value        `json:"conversation,omitzero"`
	Store              *bool             `json:"store,omitzero"`
	Background         *bool             `json:"background,omitzero"`
	Stream             *bool             `json:"stream,omitzero"`
	Include            []string          `json:"include,omitzero"`
	Tools              []tool            `json:"tools,omitzero"`
	ToolChoice         json.Value        `json:"tool_choice,omitzero"`
	Reasoning          *reasoningConfig  `json:"reasoning,omitzero"`
	Text               json.Value        `json:"text,omitzero"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls,omitzero"`
	MaxToolCalls       *int64            `json:"max_tool_calls,omitzero"`
	MaxOutputTokens    *int64            `json:"max_output_tokens,omitzero"`
	Temperature        *float64          `json:"temperature,omitzero"`
	TopP               *float64          `json:"top_p,omitzero"`
	TopLogprobs        *int64            `json:"top_logprobs,omitzero"`
	Truncation         *string           `json:"truncation,omitzero"`
	Metadata           map[string]string `json:"metadata,omitzero"`
	User               *string           `json:"user,omitzero"`
	SafetyIdentifier   *string           `json:"safety_identifier,omitzero"`
	PromptCacheKey     *string           `json:"prompt_cache_key,omitzero"`
	// Generate false, over a WebSocket, warms up: the response is
	// answered with no output, and only its input is kept to continue.
	Generate *bool `json:"generate,omitzero"`
}

// tool is a function tool: flat, unlike Chat Completions'; a custom tool
// (free-form input, its Format a grammar or text); or a namespace of tools
// (Tools), as Codex groups some.
type tool struct {
	Type        string       `json:"type"`
	Name        string       `json:"name"`
	Description *string      `json:"description,omitzero"`
	Parameters  json.Value   `json:"parameters,omitzero"`
	Strict      *bool        `json:"strict,omitzero"`
	Format      *inputFormat `json:"format,omitzero"`
	Tools       []tool       `json:"tools,omitzero"`
}

// customArgs is the arguments of a custom tool's call as a function's
// (decode.go customSpec).
type customArgs struct {
	Input string `json:"input"`
}

// inputFormat is a custom tool's input format: text, or a grammar
// (syntax lark or regex) its definition states.
type inputFormat struct {
	Type       string `json:"type"`
	Syntax     string `json:"syntax,omitzero"`
	Definition string `json:"definition,omitzero"`
}

// echoedTool is a function tool as a response echoes it: with every
// member Open Responses' FunctionTool requires, null where the request
// set none (https://www.openresponses.org/reference, FunctionTool). The
// bridge enforces no schema, so an unset strict stays null, not
// OpenAI's default true.
type echoedTool struct {
	Type        string      `json:"type"`
	Name        string      `json:"name"`
	Description *string     `json:"description"`
	Parameters  *json.Value `json:"parameters"`
	Strict      *bool       `json:"strict"`
	// Namespace is the namespace the request offered the function in:
	// its calls name it too.
	Namespace string `json:"namespace,omitzero"`
}

// reasoningConfig is the request's reasoning member and the response's.
type reasoningConfig struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// item is any input or output item, read as one union (its type says
// which members apply). Content is a string or a list of parts on input;
// we always write a list.
type item struct {
	Type             string     `json:"type,omitzero"`
	ID               string     `json:"id,omitzero"`
	Status           string     `json:"status,omitzero"`
	Role             string     `json:"role,omitzero"`
	Content          parts      `json:"content,omitzero"`
	CallID           string     `json:"call_id,omitzero"`
	Namespace        string     `json:"namespace,omitzero"` // a function_call's, of a namespace's function
	Name             string     `json:"name,omitzero"`
	Arguments        *string    `json:"arguments,omitzero"`
	Input            *string    `json:"input,omitzero"` // a custom_tool_call's
	Output           json.Value `json:"output,omitzero"`
	Summary          []part     `json:"summary,omitzero"`
	EncryptedContent *string    `json:"encrypted_content,omitzero"`
}

// part is a content part: input_text, input_image, input_file,
// output_text, refusal, summary_text, reasoning_text.
type part struct {
	Type        string       `json:"type"`
	Text        *string      `json:"text,omitzero"`
	Annotations []json.Value `json:"annotations,omitzero"`
	Logprobs    []json.Value `json:"logprobs,omitzero"`
	Refusal     *string      `json:"refusal,omitzero"`
	ImageURL    *string      `json:"image_url,omitzero"`
	FileID      *string      `json:"file_id,omitzero"`
	FileData    *string      `json:"file_data,omitzero"`
	FileURL     *string      `json:"file_url,omitzero"`
	Filename    *string      `json:"filename,omitzero"`
	Detail      *string      `json:"detail,omitzero"`
}

// response is the Response object; every member Open Responses'
// ResponseResource requires is written, null where it has no value.
type response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	CompletedAt        *int64             `json:"completed_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	MaxToolCalls       *int64             `json:"max_tool_calls"`
	Model              string             `json:"model"`
	Output             []item             `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          reasoningConfig    `json:"reasoning"`
	ServiceTier        string             `json:"service_tier"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               json.Value         `json:"text"`
	ToolChoice         json.Value         `json:"tool_choice"`
	Tools              []echoedTool       `json:"tools"`
	TopLogprobs        int64              `json:"top_logprobs"`
	TopP               float64            `json:"top_p"`
	PresencePenalty    float64            `json:"presence_penalty"`
	FrequencyPenalty   float64            `json:"frequency_penalty"`
	Truncation         string             `json:"truncation"`
	Usage              *usage             `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
	SafetyIdentifier   *string            `json:"safety_identifier"`
	PromptCacheKey     *string            `json:"prompt_cache_key"`
}

// responseError is a failed response's error.
type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// incompleteDetails says why a response is incomplete.
type incompleteDetails struct {
	Reason string `json:"reason"`
}

// usage is the Responses usage object.
type usage struct {
	InputTokens         int64               `json:"input_tokens"`
	InputTokensDetails  inputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int64               `json:"output_tokens"`
	OutputTokensDetails outputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int64               `json:"total_tokens"`
}

type inputTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type outputTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// streamEvent is every streaming event, one struct: its type says which
// members are present (nil pointers and empty strings are left out).
type streamEvent struct {
	Type           string    `json:"type"`
	SequenceNumber int64     `json:"sequence_number"`
	Response       *response `json:"response,omitzero"`
	OutputIndex    *int      `json:"output_index,omitzero"`
	Item           *item     `json:"item,omitzero"`
	ItemID         string    `json:"item_id,omitzero"`
	ContentIndex   *int      `json:"content_index,omitzero"`
	SummaryIndex   *int      `json:"summary_index,omitzero"`
	Part           *part     `json:"part,omitzero"`
	Delta          *string   `json:"delta,omitzero"`
	Text           *string   `json:"text,omitzero"`
	Name           string    `json:"name,omitzero"`
	Arguments      *string   `json:"arguments,omitzero"`
	Input          *string   `json:"input,omitzero"`
	Logprobs       *[]int    `json:"logprobs,omitzero"`
	// The error event's members (ResponseErrorEvent), flat or nested.
	Code    *string         `json:"code,omitzero"`
	Message *string         `json:"message,omitzero"`
	Param   json.Value      `json:"param,omitzero"` // null on our error events
	Error   *errorBodyError `json:"error,omitzero"`
}

// errorBody is OpenAI's error form, {"error": {...}}.
type errorBody struct {
	Error errorBodyError `json:"error"`
}

// wsError is a WebSocket's error message (a request refused before its
// response began), as OpenAI's WebSocket mode sends it: Codex reads the
// status (codex-rs codex-api endpoint/responses_websocket.rs,
// WrappedWebsocketErrorEvent).
type wsError struct {
	Type   string         `json:"type"`
	Status int            `json:"status"`
	Error  errorBodyError `json:"error"`
}

// errorBodyError is the error object inside it.
type errorBodyError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// deleted is DELETE /v1/responses/{id}'s answer.
type deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// inputItemList is GET /v1/responses/{id}/input_items' answer.
type inputItemList struct {
	Object  string  `json:"object"`
	Data    []item  `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// parts is an item's content: a list of parts, or on input a string,
// read as one input_text part.
type parts []part

// UnmarshalJSONFrom reads a string or a list of parts.
func (p *parts) UnmarshalJSONFrom(dec *json.Decoder) error {
	if dec.PeekKind() == '"' {
		var s string
		if err := json.UnmarshalDecode(dec, &s); err != nil {
			return err
		}
		*p = parts{{Type: "input_text", Text: &s}}
		return nil
	}
	var list []part
	if err := json.UnmarshalDecode(dec, &list); err != nil {
		return err
	}
	*p = list
	return nil
}

func ptr[T any](v T) *T { return &v }
