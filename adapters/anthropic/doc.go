// Package anthropic speaks Anthropic's Messages API
// (https://docs.anthropic.com/en/api/messages, anthropic-version
// 2023-06-01; streaming as
// https://docs.anthropic.com/en/docs/build-with-claude/streaming, errors as
// https://platform.claude.com/docs/en/api/errors; types as the official
// SDKs define them, anthropic-sdk-typescript
// src/resources/messages/messages.ts). It works in both directions.
//
// # Frontend: we serve POST /v1/messages
//
//   - Keys come from x-api-key or Authorization: Bearer (the server's
//     auth); a missing anthropic-version is taken as 2023-06-01;
//     anthropic-beta values are kept (extension anthropic.beta) for an
//     Anthropic backend.
//   - The request maps to a canonical request (decode.go states the
//     layout): model is the target; system, messages (text, image and
//     document as data or ref, tool_use, tool_result, thinking with its
//     signature, redacted_thinking; a role "system" message, text only,
//     in its place; a tool_result's tool_reference as its JSON text) the
//     input "prompt"; tools the tool specs (server tools kept as sent; a
//     tool with defer_loading only once a tool_reference in the
//     conversation names it, as Anthropic's tool search loads it);
//     max_tokens (required, >= 1),
//     temperature (0..1), top_p, top_k, stop_sequences (as "stop"),
//     tool_choice (as OpenAI spells it: auto, none, required, a function),
//     disable_parallel_tool_use (parallel_tool_calls false) and
//     metadata.user_id (user) the parameters; thinking the extension
//     anthropic.thinking; output_config, context_management and a
//     top-level cache_control the extensions anthropic.<member>, and a
//     block's cache_control metadata of its leaf, which an Anthropic
//     backend sends on as they are (so prompt caching works through the
//     bridge; other backends have no such thing). Other scalar top-level
//     members pass on as parameters (as vLLM takes extra sampling
//     parameters). Bad input is
//     a 400 invalid_request_error naming the member by its dotted path
//     (messages.0.content.1.source.data); an unknown model a 404
//     not_found_error "model: <name>".
//   - The run is one Message: the root namespace's messages join (a turn
//     in which the bridge ran a tool reads as a server-tool turn); an
//     agent's run is rendered as canonical.AnswerStream views it (the
//     graph's own nodes' messages join on the root), a subgraph's own
//     nodes (two or more deep) are not rendered. Text blocks are text, reasoning blocks
//     (only when the request enabled thinking: Anthropic sends none
//     unasked, and LangChain then joins a message's text into one string)
//     thinking (signature "" at the start, a signature_delta only with an
//     upstream's signature, extension anthropic.signature; never
//     invented) or redacted_thinking (extension
//     anthropic.redacted_thinking), tool-call blocks tool_use (input {},
//     then the argument JSON as input_json_delta fragments in order; none
//     is "{}") when the request declared the tool, else server_tool_use:
//     a call the bridge runs (an agent's, an XML route's action), which
//     the client must not be asked to answer (Claude Code would try to
//     run it); stop_reason is tool_use only when the last message has a
//     tool_use. Blocks follow one another, never interleaved, each delta of
//     its block's own type. Data and ref blocks, tool activity (the
//     bridge's tool runs and their results), input requests, state and
//     non-terminal errors are not carried. An assistant turn sent back
//     with server_tool_use, mcp_tool_use or a server tool's result (type
//     *_tool_result) has those blocks dropped: the text after them is the
//     answer, and no backend could take the call again.
//   - Streaming writes every event as "event: <type>" with matching data
//     and flushes it; message_start goes out with the first block (its
//     usage is what the backend counted at the message's start, as an
//     Anthropic upstream's message_start gives it, else 0: most backends
//     count only at the end), message_delta
//     carries the stop reason (stop -> end_turn, length -> max_tokens,
//     tool calls -> tool_use, content filter -> refusal; an Anthropic
//     upstream's own stop_reason and stop_sequence pass through) and the
//     usage (input_tokens without cached tokens, cache counts, output
//     tokens; added up over the run's messages), then message_stop. A ping
//     follows each 10 s without an event (one before the first block
//     commits the stream to a 200). A run that fails before the first
//     event gets Anthropic's error object with the status of its code
//     (errors.go) and request_id; after it an error event (overloaded,
//     rate-limit, timeout or api_error) and no message_stop. An
//     interrupted run ends like a completed one (end_turn).
//   - Non-streaming answers the Message the stream's events accumulate
//     to, as the SDKs accumulate it; a tool input that is not a JSON
//     object fails it with api_error.
//   - POST /v1/messages/count_tokens answers 404 not_found_error: no
//     backend counts tokens. GET /v1/models is not served (the path is
//     shared with OpenAI's).
//
// # Backend: type anthropic calls a Messages server
//
// Options: base_url (the server's root, without /v1), model (default the
// target), api_key (env or file), auth (x-api-key or bearer),
// anthropic_version (2023-06-01), headers, max_tokens (sent when the
// request has none, default 4096), timeout (10m), max_event_bytes (4
// MiB), max_tool_input_bytes (16 MiB). It sends the canonical request
// back in Anthropic's terms (unsigned thinking is not sent: Anthropic
// checks signatures; system text anywhere in the conversation joins the
// top-level system, as every Messages server takes it; a tool result's
// images go in its tool_result's content) with "stream": true and decodes the stream
// incrementally (LF, CRLF or CR, events cut anywhere), dispatching on the
// data's type: ping, unknown types and [DONE] are ignored; blocks are
// tracked by index (deltas of a block still open after a later one
// started continue in a new canonical block); input_json_delta fragments
// stream on and are checked at the block's stop (empty is {}, not a JSON
// object fails the run with internal, naming the tool); thinking text,
// signature (replaced, not appended) and redacted data are kept in the
// extensions so a later turn can send them back; usage counts overwrite
// when present, the canonical input being input + cache creation + cache
// read. message_stop completes the run; an error event fails it with the
// code of its type; an EOF without message_stop or a broken connection
// fails it unavailable, never completed. An error status fails Start
// with the code of its error type (or of the status).
//
// Limits: FrontendConfig.MaxRequestBytes (32 MiB, 413
// request_too_large), FrontendConfig.MaxOutputBytes (a non-streaming
// answer, 16 MiB), BackendConfig.MaxEventBytes, MaxToolInputBytes and
// Timeout; a breach is resource_exhausted naming the limit.
package anthropic
