package openai

import "github.com/interlingua-dev/interlingua/internal/json"

// Input side of the frontend: what a client sends.

// chatRequest is ChatCompletionCreateParams as the frontend reads it.
// Members it does not know are kept as canonical parameters when scalar
// (extraParameters).
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []inMessage    `json:"messages"`
	Stream              *bool          `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	MaxTokens           *int64         `json:"max_tokens"`
	MaxCompletionTokens *int64         `json:"max_completion_tokens"`
	Temperature         *float64       `json:"temperature"`
	TopP                *float64       `json:"top_p"`
	N                   *int64         `json:"n"`
	Stop                json.Value     `json:"stop"`
	Seed                *int64         `json:"seed"`
	PresencePenalty     *float64       `json:"presence_penalty"`
	FrequencyPenalty    *float64       `json:"frequency_penalty"`
	LogitBias           json.Value     `json:"logit_bias"`
	Logprobs            *bool          `json:"logprobs"`
	TopLogprobs         *int64         `json:"top_logprobs"`
	Tools               []inTool       `json:"tools"`
	ToolChoice          json.Value     `json:"tool_choice"`
	ParallelToolCalls   *bool          `json:"parallel_tool_calls"`
	ResponseFormat      json.Value     `json:"response_format"`
	ReasoningEffort     *string        `json:"reasoning_effort"`
	User                *string        `json:"user"`
}

// knownMembers are the request members chatRequest reads, plus OpenAI's
// own extras that are accepted and not passed on.
var knownMembers = map[string]bool{
	"model": true, "messages": true, "stream": true, "stream_options": true, "max_tokens": true,
	"max_completion_tokens": true, "temperature": true, "top_p": true, "n": true, "stop": true, "seed": true,
	"presence_penalty": true, "frequency_penalty": true, "logit_bias": true, "logprobs": true, "top_logprobs": true,
	"tools": true, "tool_choice": true, "parallel_tool_calls": true, "response_format": true, "reasoning_effort": true,
	"user": true, "metadata": true, "store": true, "service_tier": true, "modalities": true, "audio": true,
	"prediction": true, "functions": true, "function_call": true, "web_search_options": true, "verbosity": true,
	"prompt_cache_key": true, "safety_identifier": true,
}

type streamOptions struct {
	IncludeUsage       *bool `json:"include_usage,omitzero"`
	IncludeObfuscation *bool `json:"include_obfuscation,omitzero"`
}

// inMessage is one ChatCompletionMessageParam, every role's members.
type inMessage struct {
	Role             string        `json:"role"`
	Content          json.Value    `json:"content"`
	Name             string        `json:"name"`
	ToolCalls        []wireCall    `json:"tool_calls"`
	ToolCallID       string        `json:"tool_call_id"`
	ReasoningContent *string       `json:"reasoning_content"`
	Reasoning        *string       `json:"reasoning"`
	Refusal          *string       `json:"refusal"`
	FunctionCall     *wireFunction `json:"function_call"`
}

// inPart is one content part.
type inPart struct {
	Type       string      `json:"type"`
	Text       *string     `json:"text"`
	ImageURL   *imageURL   `json:"image_url"`
	InputAudio *inputAudio `json:"input_audio"`
	Refusal    *string     `json:"refusal"`
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitzero"`
}

type inputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// inTool is a ChatCompletionTool.
type inTool struct {
	Type     string        `json:"type"`
	Function *toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string     `json:"name"`
	Description string     `json:"description,omitzero"`
	Parameters  json.Value `json:"parameters,omitzero"`
	Strict      *bool      `json:"strict,omitzero"`
}

// wireCall is a complete tool call (assistant input messages, the
// non-streaming answer, the backend's request).
type wireCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Output side of the frontend: what it writes (and the backend reads).

// completion is ChatCompletion, the non-streaming answer.
type completion struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []choice   `json:"choices"`
	Usage   *wireUsage `json:"usage,omitzero"`
}

type choice struct {
	Index        int        `json:"index"`
	Message      outMessage `json:"message"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason string     `json:"finish_reason"`
}

// outMessage is ChatCompletionMessage.
type outMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	Refusal          *string    `json:"refusal"`
	ReasoningContent *string    `json:"reasoning_content,omitzero"`
	Reasoning        *string    `json:"reasoning,omitzero"`
	ToolCalls        []wireCall `json:"tool_calls,omitzero"`
	Annotations      []struct{} `json:"annotations"`
}

// wireUsage is CompletionUsage.
type wireUsage struct {
	PromptTokens            int64         `json:"prompt_tokens"`
	CompletionTokens        int64         `json:"completion_tokens"`
	TotalTokens             int64         `json:"total_tokens"`
	PromptTokensDetails     promptDetails `json:"prompt_tokens_details"`
	CompletionTokensDetails outputDetails `json:"completion_tokens_details"`
}

type promptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type outputDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// errorBody is ErrorResponse: {"error":{"message","type","param","code"}},
// every key present, param and code null when unset.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// modelList is ListModelsResponse; model is Model.
type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// Backend side: what an upstream sends, every variant's members optional.

// inChunk is a ChatCompletionChunk (or an error object) as read: the
// error members cover {"error":{...}} and the flat {"object":"error"}.
type inChunk struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Model   string     `json:"model"`
	Choices []inChoice `json:"choices"`
	Usage   *inUsage   `json:"usage"`
	Error   json.Value `json:"error"`
	Message string     `json:"message"`
	Type    string     `json:"type"`
	Code    json.Value `json:"code"`
}

// inChoice and inDelta hold values, not pointers: a member that is null
// or absent reads as "", which the decoder treats as the empty string it
// also ignores, and a chunk decodes without allocating (streamDecoder
// reuses one inChunk).
type inChoice struct {
	Index        int     `json:"index"`
	Delta        inDelta `json:"delta"`
	FinishReason string  `json:"finish_reason"`
}

type inDelta struct {
	Role             string        `json:"role"`
	Content          string        `json:"content"`
	Refusal          string        `json:"refusal"`
	ReasoningContent string        `json:"reasoning_content"`
	Reasoning        string        `json:"reasoning"`
	ToolCalls        []inCallDelta `json:"tool_calls"`
}

type inCallDelta struct {
	Index    *int             `json:"index"`
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function *inFunctionDelta `json:"function"`
}

type inFunctionDelta struct {
	Name      string     `json:"name"`
	Arguments json.Value `json:"arguments"`
}

// inUsage is CompletionUsage plus sglang's top-level reasoning_tokens.
type inUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	ReasoningTokens     int64 `json:"reasoning_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// inError is an error object's members, code a string, an integer or null.
type inError struct {
	Message string     `json:"message"`
	Type    string     `json:"type"`
	Code    json.Value `json:"code"`
}

// Backend request.

// outRequest is the request the backend sends.
type outRequest struct {
	Model               string         `json:"model"`
	Messages            []outTurn      `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options,omitzero"`
	MaxTokens           *int64         `json:"max_tokens,omitzero"`
	MaxCompletionTokens *int64         `json:"max_completion_tokens,omitzero"`
	Temperature         *float64       `json:"temperature,omitzero"`
	TopP                *float64       `json:"top_p,omitzero"`
	Stop                []string       `json:"stop,omitzero"`
	Seed                *int64         `json:"seed,omitzero"`
	PresencePenalty     *float64       `json:"presence_penalty,omitzero"`
	FrequencyPenalty    *float64       `json:"frequency_penalty,omitzero"`
	LogitBias           json.Value     `json:"logit_bias,omitzero"`
	Logprobs            *bool          `json:"logprobs,omitzero"`
	TopLogprobs         *int64         `json:"top_logprobs,omitzero"`
	Tools               []inTool       `json:"tools,omitzero"`
	ToolChoice          json.Value     `json:"tool_choice,omitzero"`
	ParallelToolCalls   *bool          `json:"parallel_tool_calls,omitzero"`
	ResponseFormat      json.Value     `json:"response_format,omitzero"`
	ReasoningEffort     string         `json:"reasoning_effort,omitzero"`
	User                string         `json:"user,omitzero"`
	// Extra are pass_parameters members, appended by marshalRequest.
	Extra map[string]json.Value `json:"-"`
}

// outTurn is one message the backend sends.
type outTurn struct {
	Role       string     `json:"role"`
	Content    json.Value `json:"content"`
	ToolCalls  []wireCall `json:"tool_calls,omitzero"`
	ToolCallID string     `json:"tool_call_id,omitzero"`
}

// outPart is a content part the backend sends.
type outPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitzero"`
	ImageURL *imageURL `json:"image_url,omitzero"`
}
