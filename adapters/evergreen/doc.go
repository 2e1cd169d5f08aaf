// Package evergreen speaks Google DeepMind's Evergreen protocol
// (evergreen.v2, https://github.com/google-deepmind/evergreen-spec at
// 56d7b388, 2024-11-05) in both directions; where the spec is silent or
// contradicts itself, the choices made are stated below.
//
// # Frontend: we serve evergreen.v2.EvergreenService/StartSession
//
//   - gRPC, gRPC-Web and Connect on /evergreen.v2.EvergreenService/StartSession
//     (one connect-go handler; bidi streaming needs HTTP/2, h2c or TLS).
//   - The same session as proto3-JSON SessionMessages over a WebSocket at
//     GET /evergreen/ws, as the actionengine-ts client sends them: text or
//     binary frames of JSON, lowerCamelCase or snake_case names, base64
//     bytes (standard or URL-safe), unknown fields ignored, an optional
//     ?key= checked against FrontendConfig.Keys. Frames sent are text, with
//     the chunk metadata repeated on every fragment.
//
// One stream (or socket) is one session. Its node store (store.go)
// assembles fragments by seq and continued; a duplicate (id, seq) keeps the
// first and is not an error; a seq past the final fragment aborts; metadata
// is read from seq 0 (equal metadata later is accepted; different metadata
// aborts on gRPC and starts a new chunk on WebSocket); child_ids and
// chunk_fragment are exclusive per node, the kind fixed by the first
// fragment that carries either; children may arrive before or after their
// parents; a node may be shared by several parents and actions; a cycle
// (INVALID_ARGUMENT) or nesting past Limits.MaxDepth (RESOURCE_EXHAUSTED)
// aborts naming the node ids. Nodes stay until
// the session ends, outputs included, so later actions may use earlier
// outputs as inputs without re-sending them (prompt_2 = prompt_1 +
// response_1 + question_2).
//
// A client's half-close ends its input, not the session: running actions
// finish and stream their outputs, then the stream ends with OK. An action
// whose input can then never complete aborts with FAILED_PRECONDITION. A
// WebSocket has no half-close: the client's close frame ends the session at
// once and is echoed. At server shutdown sessions refuse new actions and end
// (UNAVAILABLE; WebSocket close 1001) once their running actions finish.
//
// # GENERATE
//
// The only action. Exactly one input, named prompt or text; outputs named
// response and/or text (both receive the same content), and the optional
// reasoning and tool_calls, each at most once, with new ids. An identical
// retransmission of an action is ignored. target_spec.id names the target;
// an empty id is FrontendConfig.DefaultTarget ("default": route a target of
// that name); an unknown one aborts with NOT_FOUND. A google.protobuf.Struct
// config gives canonical parameters (temperature, max_tokens, ...); configs
// of other types are logged and kept in the request extension
// "evergreen.configs", which only the Evergreen backend reads. A ready
// action (its whole input tree complete) becomes a canonical Request on the
// session's thread with the flattened prompt as input "prompt"; roles map
// "model" <-> "assistant", and an empty role on a client's chunk is "user".
// EndOfTurn leaves pass as canonical leaves of mime MimeEndOfTurn with no
// payload.
//
// Output shapes (section 4 of the reference):
//
//   - response/text: a text answer streams into one leaf whose id is the
//     output id, metadata {mimetype: "text/plain", role: "model"} on seq 0,
//     a fragment per text delta with continued: true, closed by an empty
//     final fragment: the spec's examples, so simple clients work. If the
//     first part is not text (an image, a ref), or FrontendConfig.
//     ResponseTree is set, the output is a non-leaf root with one child leaf
//     per part (server-minted UUIDv4 ids), closed by an empty final root
//     fragment.
//   - reasoning: a non-leaf root with one text/plain child leaf per
//     reasoning block, streamed.
//   - tool_calls: a non-leaf root with one child leaf per tool event, each a
//     whole JSON object of mime MimeToolEvent ("application/json"):
//     {"type":"tool_call","id","name","arguments":"<argument JSON text>"},
//     {"type":"tool_started","id","name","input"},
//     {"type":"tool_output","id","delta"},
//     {"type":"tool_finished","id","output"},
//     {"type":"tool_failed","id","error":{"code","message"}},
//     {"type":"input_requested","id","payload"}.
//
// Reasoning and tool activity are sent only to clients that request those
// outputs. An output the run leaves empty is closed with one empty final
// fragment.
//
// Aborts (errors.go) end the RPC with a gRPC status, or the socket with
// close code 4000 + the code and the message as reason: protocol
// violations, malformed input and unknown parameter names INVALID_ARGUMENT;
// unknown target NOT_FOUND; limits RESOURCE_EXHAUSTED; an action other than
// GENERATE UNIMPLEMENTED; half-close with an input that cannot complete
// FAILED_PRECONDITION; a failed run UNAVAILABLE when its upstream was
// unreachable and INTERNAL otherwise, the message naming the action's
// output, target and cause.
//
// Refs: http and https refs are passed to backends as refs; the bridge
// fetches one (and passes its bytes inline) only when its scheme and host
// are in FrontendConfig.FetchRefs. file refs are refused, as are other
// schemes, and refs to localhost or a loopback, private, link-local or
// unspecified address unless their origin is in FetchRefs. Fetches follow
// no redirects.
//
// # Backend: we call an Evergreen server
//
// BackendConfig (YAML options of backend type "evergreen": url, target,
// protocol grpc|connect, outputs, max_depth, max_nodes, max_bytes,
// max_message_bytes, fragment_bytes, max_tool_chunk_bytes). Each run is one
// StartSession stream: the GENERATE action first, then the prompt tree
// (parents before children, leaves split at fragment_bytes, shared nodes
// sent once, canonical parameters as a Struct config), then the half-close.
// The upstream's output fragments, in any order and interleaved across
// nodes, are assembled in a store with the same rules and turned into
// canonical events in flattened order; the run completes when every
// requested output is complete, whether or not the upstream has closed.
// An upstream status is the run's error with the same code; actions from
// the upstream fail the run with UNIMPLEMENTED, protocol violations with
// INTERNAL.
//
// # Stated degradations
//
//   - Evergreen has no usage, finish reasons, message ids, namespaces,
//     state, checkpoints, custom or non-terminal error events: the frontend
//     drops them (an agent's run is rendered as canonical.AnswerStream
//     views it: the graph's own nodes' messages are the answer, a
//     subgraph's own nodes' are not); the backend reports finish reason stop (tool_calls after
//     a tool call) and no usage.
//   - Interrupts: a run that ends interrupted aborts the session with
//     FAILED_PRECONDITION (the input_requested event is in tool_calls when
//     requested); the backend refuses requests that resume (UNIMPLEMENTED).
//   - Tools offered in a canonical Request are not sent upstream (GENERATE
//     has no tools).
//   - A response streamed as a text leaf cannot take a later non-text
//     part: the action aborts with UNIMPLEMENTED unless ResponseTree is set.
//   - Backend: parts of different outputs are ordered by the arrival of
//     their first fragment, and a part once started is finished first, so
//     reasoning or tool events that arrive while a response leaf streams
//     are delivered after it. Non-text data parts are delivered whole when
//     their leaf completes; text streams.
//   - ChunkMetadata.capture_time and experimental are dropped;
//     original_file_name travels as canonical Node metadata
//     "original_file_name".
//   - A leaf of several ref fragments becomes one canonical ref leaf per
//     ref (the bridge never concatenates referenced content).
//   - WebSocket/JSON: an Any (configs, experimental) of a type not linked
//     into the daemon cannot be read from proto3 JSON; such a frame aborts
//     with INVALID_ARGUMENT. (actionengine-ts sends no configs.)
//   - Each backend run is a new upstream session: the prompt is re-sent
//     whole, so node sharing across turns is not visible upstream (sharing
//     within one prompt is).
//   - Nesting depth counts turns built the spec's way (prompt_n lists
//     prompt_n-1), so such a conversation is limited to MaxDepth turns.
//   - actionengine-ts closes an output stream only when a final fragment's
//     id equals the output name, and writes an empty chunk for every empty
//     final fragment (reference section 6.5, deviations 5 and 6): the
//     bridge cannot correct these client bugs.
//
// # Limits
//
// Per session (Limits): nesting depth 64, 65,536 nodes, 256 MiB of node
// payload, each also bounding what one action's input expands to with
// shared children counted per use; FrontendConfig: 4 MiB per received
// message, 1,024 actions, 16 running at once, 1 MiB of streamed tool-call
// arguments, 16 MiB per fetched ref; the WebSocket send queue and timeouts
// of internal/wsconn. A breach aborts with RESOURCE_EXHAUSTED naming the
// limit.
//
// # Writes and compression
//
// Over gRPC/Connect, both directions compress a message with gzip (when
// the peer accepts it) only from 1 KiB up: per-token output fragments are
// sent uncompressed, as they would not shrink. The frontend flushes each
// message at once, except while the action's run already holds its next
// event (a bridge run says so): then the messages of the burst share
// HTTP/2 frames and writes, and are flushed before the action waits for
// anything, so none waits for a later one.
package evergreen
