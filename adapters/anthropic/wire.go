package anthropic

import "github.com/interlingua-dev/interlingua/internal/json"

// The Messages API's JSON, as typed structs (anthropic-sdk-typescript,
// src/resources/messages/messages.ts: MessageCreateParamsBase, Message,
// RawMessageStreamEvent and their members).

// createRequest is MessageCreateParamsBase: the members the bridge reads.
// Other members (cache_control, container, service_tier, ...) are ignored.
type createRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int64          `json:"max_tokens"`
	Messages      []inputMessage  `json:"messages"`
	System        json.Value      `json:"system,omitzero"`
	Stream        bool            `json:"stream,omitzero"`
	StopSequences []string        `json:"stop_sequences,omitzero"`
	Temperature   *float64        `json:"temperature,omitzero"`
	TopP          *float64        `json:"top_p,omitzero"`
	TopK          *int64          `json:"top_k,omitzero"`
	Tools         []json.Value    `json:"tools,omitzero"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitzero"`
	Thinking      *thinkingConfig `json:"thinking,omitzero"`
	Metadata      *requestMeta    `json:"metadata,omitzero"`
	// Objects passed to an Anthropic backend as they are (extensions).
	OutputConfig      json.Value `json:"output_config,omitzero"`
	ContextManagement json.Value `json:"context_management,omitzero"`
	CacheControl      json.Value `json:"cache_control,omitzero"`
}

// requestMeta is the request's metadata object.
type requestMeta struct {
	UserID string `json:"user_id,omitzero"`
}

// inputMessage is one turn: content is a string or an array of blocks.
type inputMessage struct {
	Role    string     `json:"role"`
	Content json.Value `json:"content"`
}

// inputBlock is any content block of a request, every member optional:
// which are required depends on the type.
type inputBlock struct {
	Type      string       `json:"type"`
	Text      *string      `json:"text,omitzero"`
	Source    *blockSource `json:"source,omitzero"`
	ID        string       `json:"id,omitzero"`
	Name      string       `json:"name,omitzero"`
	Input     json.Value   `json:"input,omitzero"`
	ToolUseID string       `json:"tool_use_id,omitzero"`
	Content   json.Value   `json:"content,omitzero"`
	IsError   bool         `json:"is_error,omitzero"`
	Thinking  *string      `json:"thinking,omitzero"`
	Signature string       `json:"signature,omitzero"`
	Data      string       `json:"data,omitzero"`
	ToolName  string       `json:"tool_name,omitzero"`
	// CacheControl marks a prompt-caching breakpoint (kept in the leaf's
	// metadata for an Anthropic backend).
	CacheControl json.Value `json:"cache_control,omitzero"`
}

// toolReference is a tool_result's tool_reference block: it loads the
// deferred tool it names.
type toolReference struct {
	Type     string `json:"type"`
	ToolName string `json:"tool_name"`
}

// blockSource is an image's or document's source.
type blockSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitzero"`
	Data      string `json:"data,omitzero"`
	URL       string `json:"url,omitzero"`
}

// toolDef is a custom tool (Tool); server tools carry another type.
type toolDef struct {
	Type         string     `json:"type,omitzero"`
	Name         string     `json:"name"`
	Description  string     `json:"description,omitzero"`
	InputSchema  json.Value `json:"input_schema,omitzero"`
	DeferLoading bool       `json:"defer_loading,omitzero"`
}

// toolChoice is ToolChoice: auto, any, tool (with name) or none.
type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitzero"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use,omitzero"`
}

// thinkingConfig is ThinkingConfigParam.
type thinkingConfig struct {
	Type         string `json:"type"`
	BudgetTokens *int64 `json:"budget_tokens,omitzero"`
	Display      string `json:"display,omitzero"`
}

// Output side: what the frontend writes and the backend reads.

// message is the Message object (non-streaming answer; message_start).
type message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

// usage is Usage; the frontend writes every count.
type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// Content blocks as written.
type (
	textBlock struct {
		Type         string     `json:"type"`
		Text         string     `json:"text"`
		CacheControl json.Value `json:"cache_control,omitzero"` // in a request
	}
	toolUseBlock struct {
		Type         string     `json:"type"`
		ID           string     `json:"id"`
		Name         string     `json:"name"`
		Input        json.Value `json:"input"`
		CacheControl json.Value `json:"cache_control,omitzero"` // in a request
	}
	thinkingBlock struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	redactedBlock struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
)

// Stream events as written.
type (
	messageStartEvent struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}
	blockStartEvent struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	blockDeltaEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	blockStopEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	messageDeltaEvent struct {
		Type  string       `json:"type"`
		Delta messageDelta `json:"delta"`
		Usage usage        `json:"usage"`
	}
	messageDelta struct {
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	typeOnly struct {
		Type string `json:"type"`
	}
)

// Deltas as written.
type (
	textDelta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	inputJSONDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	thinkingDelta struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	signatureDelta struct {
		Type      string `json:"type"`
		Signature string `json:"signature"`
	}
)

// errorBody is ErrorResponse: {"type":"error","error":{"type","message"}}
// (request_id only on HTTP answers).
type errorBody struct {
	Type      string      `json:"type"`
	Error     errorDetail `json:"error"`
	RequestID string      `json:"request_id,omitzero"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// streamEvent is any event the backend reads: every member of every
// event type, optional (dispatch is on Type). Delta is a value: an absent
// or null delta reads as one of no type, which every event ignores as it
// ignored nil.
type streamEvent struct {
	Type         string       `json:"type"`
	Index        *int         `json:"index,omitzero"`
	Message      *inMessage   `json:"message,omitzero"`
	ContentBlock *inputBlock  `json:"content_block,omitzero"`
	Delta        inDelta      `json:"delta,omitzero"`
	Usage        *inUsage     `json:"usage,omitzero"`
	Error        *errorDetail `json:"error,omitzero"`
}

// inMessage is a Message as read (message_start; a non-streaming answer).
type inMessage struct {
	ID           string       `json:"id"`
	Model        string       `json:"model,omitzero"`
	Role         string       `json:"role,omitzero"`
	Content      []inputBlock `json:"content,omitzero"`
	StopReason   *string      `json:"stop_reason,omitzero"`
	StopSequence *string      `json:"stop_sequence,omitzero"`
	Usage        *inUsage     `json:"usage,omitzero"`
}

// inDelta is any delta (content_block_delta) or a message_delta's delta.
type inDelta struct {
	Type         string  `json:"type,omitzero"`
	Text         string  `json:"text,omitzero"`
	PartialJSON  string  `json:"partial_json,omitzero"`
	Thinking     string  `json:"thinking,omitzero"`
	Signature    string  `json:"signature,omitzero"`
	StopReason   *string `json:"stop_reason,omitzero"`
	StopSequence *string `json:"stop_sequence,omitzero"`
}

// inUsage is Usage or MessageDeltaUsage as read: every count nullable
// (a null or absent one leaves the total as it was).
type inUsage struct {
	InputTokens              *int64 `json:"input_tokens,omitzero"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens,omitzero"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens,omitzero"`
	OutputTokens             *int64 `json:"output_tokens,omitzero"`
}
