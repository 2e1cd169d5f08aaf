// Package agent speaks the LangChain agent streaming protocol, in both
// directions, with the choices where the protocol is silent stated below.
// Versions: the schema is
// https://github.com/langchain-ai/agent-protocol streaming/protocol.cddl at d9fd23d; the
// wire is the one of the generated bindings @langchain/protocol 0.0.21
// (snake_case keys, tool-call-delta, input.answered) and of the real client
// @langchain/langgraph-sdk 1.15.0 (ThreadStream), which the tests run.
//
// # Frontend (we serve threads)
//
// NewFrontend(Config).Mount serves, for any assistant_id the bridge routes:
//
//   - POST /threads/{thread_id}/stream and /stream/events: an SSE stream
//     per EventStreamRequest (channels, namespaces, depth, since; since
//     may also come as Last-Event-ID). Frames are "id: <event_id>",
//     "event: <method>", "data: <envelope>", each flushed; ": heartbeat"
//     every 5 s; the stream stays open across runs.
//   - GET on the same paths with Upgrade: a WebSocket taking every command
//     in band, with subscription.subscribe / unsubscribe / reconnect (the
//     CDDL shape, and langgraph-api's shape when params carry since). GET
//     without Upgrade is 426. A live event goes once per connection however
//     many of its subscriptions match (LangGraph sends one copy per
//     matching subscription); a new subscription's replay is its own and
//     may repeat what the connection got before, as LangGraph's does and as
//     the SDK needs (it resubscribes after an interrupt and reads the
//     interrupted lifecycle from the replay). TestLangGraphOverlappingSubscriptions.
//   - POST /threads/{thread_id}/commands: one command, answered 200 with a
//     CommandResponse (meta {thread_id, applied_through_seq}: the CDDL's
//     ResponseMeta, Extensible, with the thread's id as LangGraph sends
//     it) or ErrorResponse; HTTP
//     4xx only for transport failures (body not JSON, no integer id or
//     string method, body too large) with {"error","message"}.
//   - GET /threads/{thread_id}/state and POST
//     /threads/{thread_id}/runs/{run_id}/cancel, the LangGraph REST calls
//     the SDK's hydration and our backend's cancellation use.
//
// Commands: run.start (new run; resume when interrupts are pending and
// input is not null; multitask_strategy reject / interrupt / rollback /
// enqueue, default enqueue, when a run is active), input.respond (one or
// many), input.inject (queued into the state; applied after the active run
// if any), state.get, state.listCheckpoints, state.fork, agent.getTree.
// Unknown methods are unknown_command; bad params are invalid_argument
// naming the field; camelCase spellings of the rename table are accepted
// on input, snake_case is sent.
//
// Events: a thread's events are the bridge's, in its one seq space
// (event_id is the seq's decimal string), and every stream reads them
// from the bridge's replay log (canonical.Observer), on any instance:
// replay and live delivery meet with no gap and no duplicate there. A
// stream without since replays what the log holds of the thread. A since
// (or a reconnect) older than what the log holds gets the in-band report
// {"type":"error","id":null,"error":"invalid_argument","since",
// "min_available_seq"}
// first, then the oldest events it holds. Canonical events map to wire
// events per the reference's choices: text-delta, reasoning-delta,
// data-delta (base64 cut at 3-byte boundaries so slices concatenate),
// tool-call-delta after a tool_call_chunk start; content-block-finish
// carries the finalized block, which the Encoder assembles from the deltas;
// message-finish carries usage and reason; a model failure is the messages
// error event (with the run's error message and canonical code name). A
// message's run_id (the model call's LangChain run, which LangGraph writes
// in the data of each of the message's events and the SDK keys messages
// by) is read from its message-start and written on each of its events.
// An updates event is the protocol's UpdatesData, data {node?, values}
// (CDDL UpdatesEvent; @langchain/protocol 0.0.21 UpdatesData), whatever
// the upstream's form: LangGraph 1.5.1 sends the node's values as data
// and the node in params.node, which the backend reads into the same
// canonical state update (node and values). state.get's checkpoint is a
// CheckpointRef {id, ns} with ns "" (the root), as LangGraph writes it.
//
// Every run names the agent runtime (Runtime, a canonical.Runtime), which
// the bridge runs beside the backend on the instance that hosts it. When
// the backend is a plain model, the runtime keeps the thread's state: its
// message list (LangChain message dicts) plus any other keys a client put
// there; each step (input, each message, each tool result, an injected
// message, a fork) saves a checkpoint and adds updates, values and
// checkpoints events to the run; state.fork and run.start with
// config.configurable.checkpoint_id restart from a checkpoint; a backend's
// input request is an interrupt that input.respond (or run.start with
// input) answers with a new run whose canonical Request.resume maps each
// interrupt id to its response, after an input.answered event. Each event
// the runtime returns carries its agent-protocol frames (extension
// agent.wire), made by the run's Encoder, which has the whole run: a
// stream joining mid-message still gets content-block-finish with the
// whole block; a values event whose state is over 256 KiB names its
// checkpoint instead, and a stream reads the state from its record. The
// runs of a thread take turns in the runtime (the bridge's thread lease
// puts them on one instance), which is the enqueue strategy; interrupt and
// rollback cancel the run going on first. Thread state lives in the
// bridge's thread store: a head record "agent" (the values, the whole
// conversation, once; status, counters, pending interrupts, messages
// injected during a run, the last runs' namespace statuses and the
// checkpoint ids in order) and one record "agent.ckpt.<id>" per
// checkpoint, written once. No record has a size cap: the store keeps
// large values in chunks of its own stream. The runtime saves the head as
// a run starts and before its end is sent; input.inject during a run
// writes the head over its revision, and the runtime merges that in.
// Records expire nats.thread_ttl after their last write. The state
// commands read the store, so any instance answers them.
//
// Shutdown (registered with the server's OnShutdown): new streams and
// WebSockets are refused with 503 (new runs, by the bridge); a stream or
// WebSocket of a thread with a run started on this instance stays open
// until no such run goes on or waits and it has written the last one's
// end (the bridge drains the runs: they finish, or fail "the server is
// shutting down"), then ends, SSE with its last chunk and a WebSocket with
// close 1001; one of a thread with no run here ends at once, and its
// client resumes elsewhere from its last event id. Close cancels the runs
// started here, waits up to 2 s for the streams to write their ends, and
// ends the rest. TestShutdownDeliversRunEnds.
//
// A backend that
// reports state itself (the agent backend marks its events; others are
// recognised by a state event before any message) is an agent: its values,
// updates and checkpoints pass through and are only recorded.
//
// # Backend (we call an agent server)
//
// NewBackend(BackendConfig) is a client of an upstream thread server over
// SSE or WebSocket: it subscribes to the thread's events on every channel,
// then sends run.start (input.respond when the canonical request resumes
// interrupts), and decodes the events after the answer's
// applied_through_seq with Decoder into canonical events with namespaces,
// graph nodes, usage, message ids and the passthrough channels kept. An
// upstream error frame fails the run with its code; a gap report (the
// in-band report above, resume_gap) or a jump in seqs fails it with
// data_loss. Closing a run that has not ended cancels it
// upstream with POST /threads/{id}/runs/{run_id}/cancel. Over SSE, a
// thread's event stream stays open after a run that ended as the upstream
// said, for the thread's next run (as the SDK's ThreadStream keeps its
// stream): while kept it is read and what comes (other clients' runs on
// the thread) discarded, so it holds back no upstream run; the next run
// stops that before its command, sends it and reads on; a kept stream that
// ends, fails or reports a gap is dropped, and one found closed is
// replaced from the command's seq. Runs on a thread named for them alone
// (no thread from the client) keep none. A run's event stream that has
// shown two heartbeat comments and then stays silent, heartbeats
// included, for three of their intervals (6 to 30 s, as the SDK's idle
// watchdog reckons) fails the run unavailable and cancels it upstream;
// its events may otherwise be far apart (the bridge's stall_timeout is
// off for this backend unless configured).
//
// # Stated degradations
//
//   - AgentStatus has no "cancelled": a cancelled run ends with a failed
//     lifecycle event whose error starts "cancelled: " (the SDK then ends
//     the run; "interrupted" would claim a pending interrupt). The decoder
//     maps that prefix back to cancelled.
//   - A lifecycle error is a string: a failed run's canonical code is lost
//     on the wire (it survives when the run failed in a model call: the
//     messages error event carries it), and is unknown when decoded.
//   - A model call failing inside a message is the messages channel's error
//     event, which also ends the message: decoded as the message's finish
//     (reason error), then the run's failure if the failed lifecycle comes
//     next with it, else a non-terminal error event. A message that ended
//     in error with no error known is sent as the error "model call failed"
//     with code unknown, which decodes as the finish reason alone.
//   - Canonical non-terminal error events have no agent-protocol event:
//     they are sent as custom events named "interlingua.error" with payload
//     {code, message}, and decoded back.
//   - MessageRole has only ai, human and system: messages of other roles
//     (tool) are sent as ai.
//   - A tool call whose arguments are not a JSON object finishes as an
//     invalid_tool_call block carrying the raw string.
//   - Block types the canonical model lacks (non_standard,
//     server_tool_result, unknown ones) are decoded as application/json data
//     blocks holding the finished block; a block-delta that replaces
//     instead of extending what was streamed is not streamed (the finished
//     block reconciles it when it extends the deltas).
//   - The backend needs meta.applied_through_seq in the run.start answer to
//     skip the replay of earlier runs of the thread (the JS server and this
//     frontend send it); without it, events of earlier runs still held
//     upstream are decoded too: use a fresh thread per run.
//   - input.inject into an active run is applied to the state when the run
//     ends (a plain model cannot take input mid-call). goto is forwarded to
//     agent backends and ignored by plain models.
//   - CheckpointSummary.step is a uint: the input checkpoint (step -1) is
//     listed with step 0 (its metadata keeps the -1).
//   - The state commands read the thread's record as the runtime last
//     saved it (as a run starts, and before its end is sent): during a
//     run, state.get shows the state it started with.
//   - A reconnect's missed_events counts every event the log let go after
//     last_event_id, of any channel.
//
// # Limits (Config; each zero is its default)
//
// SubscriptionKeep (5 min), MaxRequestBytes (4 MiB, also per WebSocket
// message), MaxQueuedRuns (8 runs waiting or going on per thread on an
// instance), MaxStateCache (64 MiB of states read back for large values
// events), StoreTimeout (5 s per read or write of the store),
// MaxSubscriptions (64 per WebSocket), WriteTimeout (30 s per SSE write).
// A WebSocket's send queue holds 256 frames: a replay waits for room
// (backpressure), and a client that stops reading is cut off by
// internal/wsconn (1008). Readers hold no run back: each reads the replay
// log at its own pace, and one that stops reading is cut off. Every stream
// and WebSocket is an observer of the thread, counted in its API key's
// max_observers. The runtime's RuntimeConfig bounds checkpoints
// (MaxCheckpoints, 100 per thread, the newest; older ones are removed
// from the store) and one content block (MaxBlockBytes, 16 MiB; a larger
// block fails the run with ResourceExhausted).
//
// The backend's BackendConfig bounds one upstream event (MaxEventBytes,
// 4 MiB), the WebSocket events held before the command's answer
// (MaxPendingEvents, 10,000), and the event streams kept between runs
// (KeepStreams, 256 threads; KeepStreamIdle, 30 s each).
package agent
