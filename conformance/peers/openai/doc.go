// Package openai is a reference OpenAI Chat Completions upstream: an
// http.Handler serving POST /v1/chat/completions (streaming only, as the
// openai backend always asks) and GET /v1/models, playing scripted models
// with the chunk sequences real servers send, for the openai backend's
// tests.
//
// What it reproduces, and where from:
//
//   - The framing and chunk shapes of the OpenAPI spec
//     (https://github.com/openai/openai-openapi, createChatCompletion,
//     ChatCompletionChunk, ChatCompletionStreamOptions): every chunk
//     "data: <json>\n\n" with the same id, object, created and model;
//     the first delta {"role":"assistant","content":""}; finish_reason
//     null until the finish chunk with an empty delta; with
//     stream_options.include_usage "usage":null on every chunk and one
//     chunk with "choices":[] and the usage before "data: [DONE]".
//   - Tool calls as OpenAI streams them: a call's first chunk has index,
//     id, type and function.name with arguments "", later chunks only
//     index and an arguments fragment (openai-node
//     src/lib/ChatCompletionStream.ts merges them by index).
//   - Variants, each a Model option: usage on the finish chunk or not at
//     all (vLLM's and Ollama's; vLLM serving.py should_include_usage,
//     Ollama middleware/openai.go); id, type and name repeated on every
//     tool-call chunk (Fireworks, DeepSeek, LiteLLM: SillyTavern#5948,
//     langchain4j#4544, BerriAI/litellm#20480); a whole call in one chunk
//     (Ollama openai/openai.go ToToolCalls); reasoning as
//     reasoning_content (DeepSeek, llama.cpp, sglang) or reasoning (vLLM
//     since PR #27752, Ollama); a first delta with "content":null and
//     "data: [DONE]" without the blank line at EOF (llama.cpp,
//     darshi1337/apogee#139); SSE comments (OpenRouter's
//     ": OPENROUTER PROCESSING", openrouter.ai/docs/api-reference/streaming);
//     an error object mid-stream in vLLM's form
//     {"error":{"message","type":"InternalServerError","param":null,"code":500}}
//     followed by "data: [DONE]" (serving.py); a stream that ends without
//     [DONE]; a connection reset after N chunks.
//   - Errors before the stream: the status and
//     {"error":{"message","type","param","code"}} of OpenAI (code a string
//     or null), or vLLM's with the integer status as code.
//   - The key from Authorization: Bearer when the peer has one (401
//     invalid_api_key otherwise, as OpenAI answers).
package openai
