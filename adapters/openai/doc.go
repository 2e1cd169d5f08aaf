// Package openai is OpenAI Chat Completions (POST /v1/chat/completions,
// https://platform.openai.com/docs/api-reference/chat, as the OpenAPI spec
// github.com/openai/openai-openapi and the openai-node and openai-go SDKs
// read it) in both directions:
//
//   - Frontend: POST /v1/chat/completions, streamed (stream: true, SSE
//     "data:" chunks of chat.completion.chunk ending "data: [DONE]") and
//     not (chat.completion); GET /v1/models and GET /v1/models/{model}
//     list the routed targets the caller's key may use. Messages of roles
//     system, developer, user, assistant and tool, content as a string or
//     parts (text, image_url as data or ref, input_audio, refusal), tools
//     and tool_choice, stream_options.include_usage, and the sampling
//     members as typed canonical parameters; scalar members it does not
//     know pass on as parameters, as vLLM accepts them.
//   - Backend type "openai": a client of any OpenAI-compatible server
//     (OpenAI, vLLM, TGI, llama.cpp, Ollama, sglang, OpenRouter, our own
//     frontend). It always streams with include_usage and tolerates the
//     variants real servers send (usage on a choices:[] chunk, on the
//     finish chunk or absent; tool-call ids once or on every chunk, a
//     whole call in one chunk, a call repeated at another index, LiteLLM's
//     summary chunk; reasoning_content or reasoning; [DONE] missing or
//     without its blank line; SSE comments; an error object, a flat
//     {"object":"error"} or an "event: error" mid-stream).
//
// Choices this package makes (reference section 10, written for the
// bridge):
//
//   - The first chunk is delta {"role":"assistant","content":""}; the
//     finish chunk has an empty delta; with include_usage every chunk has
//     "usage":null and a choices:[] usage chunk precedes [DONE] (its counts
//     are zero when the backend reported none); without it no usage key
//     is sent.
//   - A tool call's first chunk has index, id (the canonical id, or call_
//     and 24 characters when it is empty or over 40), type and the whole
//     name with arguments ""; later chunks only index and arguments.
//     finish_reason is tool_calls when a call the client must run was sent
//     and the model stopped normally. A call of a tool the request did not
//     declare is one the bridge runs itself (an agent's, an XML route's
//     action): this wire has no server-run call, and a client handed it
//     would try to run it (the AI SDK fails with NoSuchToolError and asks
//     again), so it is not sent and does not count.
//   - Reasoning goes in delta.reasoning_content (frontends.openai
//     reasoning_field: reasoning_content, reasoning or both), never in
//     content.
//   - Errors before the first chunk are OpenAI's {"error":{"message",
//     "type","param","code"}} with its status (400, 401, 403, 404, 409,
//     429, 500, 503); code is OpenAI's where one applies (model_not_found,
//     invalid_api_key, invalid_type, ...) and the canonical code's name
//     otherwise. A failure after it is one "data:" error object (type
//     server_error, code the canonical code's name) and the end of the
//     stream, without [DONE]: never a made-up finish_reason.
//   - The backend's stream is complete at [DONE], or at EOF (or a reset)
//     after a finish_reason; an EOF or reset before one fails the run
//     unavailable ("upstream stream truncated"). A client that leaves
//     closes the upstream request.
//
// Stated degradations: one choice only (n other than 1 is refused with
// OpenAI's 400); an agent's run is rendered as canonical.AnswerStream
// views it (the root's and the graph's own nodes' messages on the root; a
// subgraph's own nodes, two or more deep, are not the answer); tool
// activity (ToolStarted/Finished), the bridge's own calls, state and
// custom events are not on this wire;
// the backend does not send reasoning of earlier turns back, sends only
// image media (other data leaves are dropped), and reads choice 0 only;
// a refusal reads as text with finish content_filter; arguments that are
// not JSON pass through as the model wrote them; interleaved argument
// fragments of an earlier call after a later block started fail the run
// (internal); OpenRouter's reuse of one index and id for two calls merges
// them.
//
// Limits: max_request_bytes (32 MiB) per request body, max_output_bytes
// (16 MiB) of a non-streaming answer, the backend's max_event_bytes
// (4 MiB) per SSE event and max_tool_args_bytes (16 MiB) of arguments per
// answer; a breach is resource_exhausted naming the option. Streams send a
// ": keepalive" comment after 15 s (keepalive) without a chunk.
package openai
