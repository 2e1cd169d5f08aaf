// Package glide speaks Glide's chatStream WebSocket API (EinStack/glide
// 0.1.0-rc.1, commit df6d72d; GEP-8 "The Async API"), in both directions:
// one long-lived WebSocket per application instance carrying any number of
// concurrent streamed chat requests, multiplexed by the request id.
//
// # Frontend
//
// GET /v1/language/{router}/chatStream, where {router} is a bridge target.
// A request that is not a WebSocket upgrade gets 426 "Upgrade Required"
// (checked first, as Glide does); an unknown router gets 404
// {"name":"router_not_found","message":"router is not found"} before the
// handshake.
//
// Each request frame {id, message, message_history, override_params,
// metadata} starts one run in its own goroutine; the 0.0.3 camelCase keys
// (messageHistory, overrideMessage {model_id, message}) are accepted too.
// The conversation becomes one input named "prompt" whose children are the
// history then the message, text leaves with their roles; override_params
// is honoured (the entry for the serving backend's name, else for the
// router name, replaces the message); id, metadata and override_params
// also travel as the request extensions glide.id, glide.metadata and
// glide.override_params. Replies are snake_case ChatStreamMessage frames
// {id, created_at, router_id, metadata (echoed), chunk | error}, encoded as
// encoding/json encodes them (with Glide's trailing newline): a chunk per
// text delta, the final chunk with finish_reason (complete, max_tokens,
// content_filtered, other) and empty content, or a terminal error with
// finish_reason "error"; a non-terminal canonical error event (a fallback
// under way) is a model_unavailable error without finish_reason. chunk
// model_id, provider_id and model_name come from the run's message start
// metadata (keys model_id, provider, model) and default to the backend's
// name, "interlingua" and the router. Every request ends with exactly one
// terminal frame.
//
// Frames of different requests interleave; frames of one request keep
// their order. All are queued on the connection's one internal/wsconn
// writer (the single-writer rule of GEP-8). A request whose frames outpace
// the socket waits for room (backpressure on its run); a client that stops
// reading for the write timeout is cut off with close code 1008.
//
// Unlike Glide: a malformed frame, or one without id or message, or with a
// non-string content, gets a payload_parse_error reply naming the field
// (with the id when it could be read) and the connection keeps working; a
// request reusing an id still in flight is not run: it gets a
// payload_parse_error frame ("request id already in flight: …") without a
// finish_reason, so it does not end the in-flight request's stream, whose
// terminal frame always has one (Glide runs both, with frames no client
// can tell apart); a client disconnect cancels the connection's runs.
//
// Interlingua extension (Glide clients can ignore it; Glide itself has no
// cancel): the frame {"id": "<id>", "cancel": true} cancels the request in
// flight under that id, which then ends with its terminal error frame
// (unknown_error, "canceled: cancelled by the client"). A cancel for an id
// not in flight is ignored, since that request has sent its terminal frame.
//
// Shutdown, GEP-8's rollout rules: Frontend.Shutdown (the server's
// OnShutdown hook) refuses upgrades (503) from then on, closes idle
// connections with 1001 at once, and refuses new requests on busy ones
// (all_models_unavailable, "server is shutting down"). Busy connections
// close with 1001 as soon as their last request has sent its terminal
// frame; runs still going at the shutdown timeout are cancelled by the
// bridge and reply unknown_error "canceled: server is shutting down"
// before their connection closes.
//
// # Backend
//
// Backend is a client of one upstream Glide router (option url): a pool of
// WebSockets (option connections, default 4), each carrying runs as
// requests under generated ids (il-1, il-2, ...). A run goes to the
// connection with the fewest requests in flight; a connection is dialled
// when first needed (so runs one after another keep to one), stays open
// between requests as GEP-8 has it, and is dialled again after it is
// lost (the runs on it fail with unavailable). The text
// leaves of the request (the "prompt" input, else all inputs) become the
// message (the last) and message_history; metadata and override_params come
// from the glide.* extensions. Chunks become text deltas of one message per
// model (message start metadata model_id, provider, model; message id the
// chunk's response_id), the chunk with finish_reason the message finish and
// the completed event, model_unavailable mid-stream a non-terminal error
// event (the message so far finishes with reason error, and the fallback
// model's text follows in a new message), and any other error the failed
// event (all_models_unavailable is unavailable). A 404 router_not_found at
// the handshake fails Start with not_found.
//
// # Errors
//
// errors.go holds the one table each way: canonical codes to Glide error
// names (invalid_argument, out_of_range and already_exists to
// payload_parse_error; not_found to router_not_found; unimplemented to
// no_model_configured; unavailable to all_models_unavailable; every other
// code to unknown_error) and back. Where a name does not determine the
// code the message is prefixed "<code>: " and the backend reads it back;
// Glide's own unknown_error "context canceled" maps to canceled.
//
// # Stated degradations
//
//   - Only the text of the agent's answer reaches a Glide client, as
//     canonical.AnswerStream views the run: the messages of the root
//     namespace and of the graph's own nodes (one-element namespaces such
//     as LangGraph's ["model:<task id>"], unless a tool call started them),
//     one after another; as LangGraph's messages stream mode without
//     subgraphs, a subgraph's own nodes (namespaces two or more deep) are
//     not the answer. Reasoning, tool calls, data and ref blocks, tool,
//     state, checkpoint, custom and sub-agent events are dropped; usage is
//     dropped (chatStream has none).
//   - An interrupted run (input requested) ends with unknown_error
//     "failed_precondition: run interrupted waiting for input, which Glide
//     chatStream cannot carry; interrupt <id>: <payload JSON>" (the last
//     input request's, from any namespace); chatStream cannot ask for
//     input, nor resume.
//   - chunk.model_response.metadata is omitted by the frontend; cached is
//     always false.
//   - Metadata is echoed as the same JSON, not byte for byte: compacted,
//     its strings written as encoding/json writes them.
//   - The backend sends no parameters, tools or non-text content (Glide's
//     request has no place for them) and reads only 0.1.0-rc.1 response
//     shapes. Glide's 0.0.3 camelCase responses are not understood.
//   - Browsers are subject to gorilla/websocket's same-origin check.
//
// # Limits
//
// Frontend: MaxMessageBytes (1 MiB, larger frames close with 1009),
// MaxInFlight per connection (64), MaxConnections (1024; 256 per API key,
// MaxConnectionsPerKey, so one key cannot take them all), SendQueue (1024
// frames), WriteTimeout (10s), PingInterval (30s). Backend: max_message_bytes
// (4 MiB), connections (4), max_in_flight per connection (256),
// max_buffered_frames per run (1024),
// idle_timeout per run (5m), dial_timeout (10s), send_queue (256),
// write_timeout (10s), ping_interval (30s). Breaches are resource_exhausted
// naming the limit.
package glide
