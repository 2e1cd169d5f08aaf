package canonical

// How a conversation travels in a request, for the protocols whose
// clients send one (OpenAI Chat Completions, OpenAI Responses, Anthropic
// Messages), so a backend of any of them reads a frontend's of another:
// the input named InputPrompt is a node whose children are the turns in
// order, system prompts first as system leaves. A turn is a node of its
// role whose leaves carry the role too: text/plain text; an image, audio
// or document as data (decoded bytes) or ref (a URL). An assistant's tool
// call of an earlier turn is a leaf of role assistant and mime
// MimeToolCall holding the arguments' JSON, with metadata MetaToolCallID
// and MetaToolName; a tool's result is a text leaf of role tool with
// metadata MetaToolCallID. An assistant's reasoning of an earlier turn is
// a leaf of role assistant and mime MimeReasoning holding its text.
// Protocol-only facts (a signature, encrypted content, a developer role)
// travel as metadata keys of the protocol's own, prefixed or named for it.
const (
	// InputPrompt names the input holding the conversation.
	InputPrompt = "prompt"
	// MimeToolCall marks a leaf that is a tool call of an earlier turn.
	MimeToolCall = "application/vnd.interlingua.tool-call+json"
	// MimeReasoning marks a leaf that is reasoning of an earlier turn.
	MimeReasoning = "application/vnd.interlingua.reasoning+text"
	// MetaToolCallID is the metadata key of a tool call's id, on the call
	// and on its result.
	MetaToolCallID = "tool_call_id"
	// MetaToolName is the metadata key of a tool call's tool name.
	MetaToolName = "tool_name"
)

// ToolNames is the names of the tools a client's request declares. A tool
// call of another name is one the bridge runs itself (an agent's, an XML
// route's action): a frontend does not hand it to the client to answer.
func ToolNames(tools []*ToolSpec) map[string]bool {
	names := make(map[string]bool, len(tools))
	for _, t := range tools {
		names[t.GetName()] = true
	}
	return names
}
