// Package responses speaks the OpenAI Responses API
// (https://platform.openai.com/docs/api-reference/responses; the shapes
// followed are openai-node's src/resources/responses/responses.ts and Open
// Responses' specification, https://www.openresponses.org) in both
// directions, with its state kept in the bridge's thread store.
//
// # Frontend: we serve /v1/responses
//
//   - POST /v1/responses: input as a string or a list of items (messages
//     with input_text / input_image / input_file parts, function_call,
//     function_call_output, reasoning), instructions, function tools,
//     tool_choice, max_output_tokens, temperature, top_p, reasoning,
//     text, store, stream. Unknown members are ignored (the SDKs send
//     members newer than ours); a member of the wrong type or value is
//     refused with 400 in OpenAI's error form, its param naming it.
//   - Streaming follows the order of the reference: response.created and
//     response.in_progress carrying the whole object (output [], usage
//     null), per item output_item.added, content_part.added, deltas,
//     .done, content_part.done, output_item.done, then response.completed
//     (response.incomplete for max tokens or a content filter; an error
//     event then response.failed on failure), then data: [DONE] (Open
//     Responses; frontends.responses.no_done leaves it out). A stream silent
//     for keepalive (15s: a backend thinking) gets an SSE comment
//     ": keepalive" (a keepalive event would fail Open Responses'
//     compliance checks). Every event
//     has sequence_number from 0 and an event: line equal to its type.
//     The response echoes the request's settings, each function tool with
//     description, parameters and strict (null where unset: the bridge
//     enforces no schema, so not OpenAI's default strict true).
//     Text blocks are output_text parts (annotations and logprobs [], as
//     Open Responses' OutputTextContent requires) of one message item; reasoning is
//     a reasoning item, as summary parts when the request set
//     reasoning.summary, else as reasoning_text; a tool call is a
//     function_call item whose call_id is the backend's (call_ + 24
//     characters when it had none). A call of a tool the request did not
//     declare is one the bridge runs itself (an agent's, an XML route's
//     action): a function_call asks the client to run it (Codex answered
//     "unsupported call" and looped), so it is not rendered.
//   - Ids: resp_ + 128 random bits; the ids of a response's items (msg_,
//     fc_, fco_, rs_) are the prefix, the response id's random part and
//     where the item stands (_o3: output item 3, _i0: input item 0), so
//     they are as unguessable, a replay of the run's events reproduces
//     them, and an input item_reference (the AI SDK sends earlier turns'
//     items so) is read from the caller's stored response its id names;
//     another key's, or none, is 400 "Item with id '...' not found.".
//   - store (default true): the response, its input items and the items
//     before them in its conversation are one record of the thread store,
//     in the thread named by the response id, which is also the run's
//     thread: the bridge claims it for the API key that created it, and
//     another key gets 404 on GET, DELETE and input_items and 400
//     previous_response_not_found continuing it (the record names its key
//     too). previous_response_id continues with the stored input and
//     output, then the new input; instructions, tools and sampling come
//     from the new request only. store:false writes nothing. The record is
//     written when the run starts (status in_progress) and when it ends,
//     before the stream's end events (error, response.completed, .failed,
//     .incomplete) are sent: a client that read the end and at once
//     retrieves or continues the response finds it ended.
//     A record an instance left unfinished when it stopped (kill -9) is
//     ended from the bridge's replay log by the next instance that reads
//     it: its run ends failed (unavailable) once its owner has been quiet
//     for twice nats.owner_timeout, and that end is recorded (settle.go;
//     the read that finds it answers it as it is).
//     Without a thread store (a frontend mounted outside the daemon, which
//     always has one) every response is answered with store false.
//   - GET /v1/responses/{id}, DELETE /v1/responses/{id} (the record and
//     the thread's other records), GET /v1/responses/{id}/input_items
//     (order asc or desc, no paging).
//   - GET /v1/responses/{id}?stream=true&starting_after=N resumes a stored
//     response's stream: its run is read again from the bridge's replay
//     log (then live while it runs) and rendered by the same deterministic
//     encoder, so the events after N are byte for byte those first sent.
//     A finished response whose events have left the log (replay_max_age)
//     is rendered from the stored response after replay_wait (3s); its
//     sequence numbers then count one delta per part. When a response's
//     owner died, the end another instance appended skips the seqs the
//     owner may have given its own clients (README, Cluster), and the
//     end's sequence numbers skip 16 for each, so that a client of the
//     dead owner resuming from the last number it read reads the end.
//   - WebSocket mode (GET /v1/responses upgraded, as
//     https://developers.openai.com/api/docs/guides/websocket-mode): each
//     response.create message (a POST body, stream implied) is answered
//     one at a time with the stream's events, one message each, the same
//     bytes as the SSE data, no [DONE]. previous_response_id naming the
//     response the socket answered last continues it even with store
//     false (the socket keeps it); generate: false answers a response
//     with no output and runs nothing, its input kept to continue. A
//     request refused before its response begins is the message
//     {"type":"error","status":<HTTP status>,"error":{...}}, as Codex
//     reads it, and the socket goes on; background is refused so;
//     response.processed (Codex's) is answered with nothing. At most
//     max_websockets (1024) sockets are open; one more is refused 429.
//   - background: true answers the queued response at once (or streams
//     it, the run going on when the client leaves); the run ends and is
//     recorded on the instance that started it. POST
//     /v1/responses/{id}/cancel cancels it through any instance (the
//     bridge cancels the response's thread wherever it runs) and answers
//     the cancelled record once recorded; cancel of a foreground response
//     is refused as OpenAI refuses it.
//
// Stated degradations: conversation is refused; only function and
// custom tools (a namespace's among them, whose calls name the
// namespace) are offered to the model: a custom tool as a function of one
// string, input, its grammar stated in the description (no backend
// constrains its output to it), its call a custom_tool_call whose input
// is that string, sent whole at the call's end; web_search, file_search,
// mcp, tool_search and the other types run on OpenAI's side, and are
// left out rather than refusing the request (Codex lists several by
// default); file_id parts are refused (send
// file_data or image_url); data and ref blocks of the output, tool
// activity run by the bridge, nested runs' content and interrupts are not
// rendered (an interrupted run reads as completed; an agent's run is
// rendered as canonical.AnswerStream views it: the graph's own nodes'
// messages are the output, a subgraph's own nodes' are not); reasoning
// state of earlier turns (encrypted_content) is not sent to a backend.
//
// # Canonical form of a conversation
//
// As canonical/conversation.go lays it out for every protocol that sends
// a conversation, instructions first as a system leaf. The
// request members no canonical field holds travel as extensions
// responses.* (text, include, truncation, max_tool_calls, top_logprobs,
// reasoning_summary, prompt_cache_key, safety_identifier); a function
// tool's strict is the canonical tool's.
//
// # Backend: type responses
//
// POST <base_url>/responses with stream true and store false (option store):
// the bridge keeps the conversation and sends it whole as input items, as
// it does for a stateless upstream. The stream is decoded by type (the
// data's, not the event name): unknown types, keepalive and [DONE] are
// ignored; a repeated sequence_number is dropped and a gap fails the run;
// an item whose .added never came starts at its first delta (Ollama);
// .done payloads and the terminal response add what the deltas left out;
// error (flat or nested) and response.failed fail the run with the code
// read from their code (errors.go); response.completed, .incomplete and
// the Codex response.done end it, and the read stops there even if the
// body stays open. A body that ends without a terminal event fails the
// run with unavailable "upstream stream truncated". A server that answers
// with one JSON response instead of a stream is read whole.
//
// Limits: max_input_bytes (16 MiB) of a request body, max_output_bytes
// (16 MiB) of a response's text and arguments, max_stored_bytes (32 MiB)
// of a stored record (a response whose conversation outgrows it is stored
// without the conversation, so it can be read but not continued);
// backends: max_event_bytes (4 MiB) of one SSE event, max_output_bytes,
// max_response_bytes (16 MiB), timeout (10m).
package responses
