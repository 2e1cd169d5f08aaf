// Package agentpeer is a reference LangChain agent-protocol thread server
// for testing clients of the protocol (Interlingua's agent backend): it
// plays scripted runs over the protocol's transports, written from the
// protocol (https://github.com/langchain-ai/agent-protocol, and what the
// real client @langchain/langgraph-sdk sends and reads) independently of
// the adapter it tests (it does not import adapters/agent).
//
// Scripts are named by assistant_id: the embedded testdata/<name>.jsonl
// (one line per event) and those Config.Scripts gives (NewWithConfig),
// which the conformance driver derives from each case's response
// definition. A resumed run plays "<assistant>.resume" after an
// input.answered event.
//
// It serves, with snake_case keys:
//
//   - POST /threads/{thread_id}/commands: run.start (a new run, or a resume
//     when the thread is interrupted and input is not null), input.respond,
//     state.get; other methods are unknown_command. Responses carry
//     meta.applied_through_seq, the thread's seq before the command. A
//     script's Refusal answers run.start with its error response; a
//     script's Input is checked against the run.start input's last
//     message (invalid_argument naming what came).
//   - POST /threads/{thread_id}/stream/events (and /stream): SSE, filtered by
//     channels, replaying buffered events with seq > since, then live; a
//     script's WriteBytes cuts each frame into flushed writes of that size.
//   - GET on the same paths: a WebSocket taking the same commands plus
//     subscription.subscribe, whose replay follows its response.
//   - POST /threads/{thread_id}/runs/{run_id}/cancel: cancels the run
//     (LangGraph's REST endpoint); Cancels lists the runs cancelled and
//     Cancelled reports their assistants.
//
// A script line is {"method": ..., "params": {"namespace", "node"?, "data"}}
// (the peer adds type, seq, event_id and timestamp), optionally with
// "delay_ms" slept before it, or {"pause":"cancel"}, which waits for the
// run's cancellation. A cancelled run (at a pause, during a delay, or
// between lines) ends with a failed root lifecycle event whose error
// starts "cancelled: ".
//
// Limits: a command body is at most 1 MiB; a thread's events are kept for
// the peer's life (scripts are short); the WebSocket send queue holds 4,096
// frames.
package agentpeer
