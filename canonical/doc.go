// Package canonical is Interlingua's canonical event model and the ports that
// adapters implement or call.
//
// Every adapter converts between one wire format and the types here, never to
// another wire format. The model itself is defined in protobuf
// (proto/interlingua/v1) because it is also the payload carried between
// instances over NATS; this package aliases the generated types and adds:
//
//   - Code and Error: one canonical error code set (the gRPC codes) with a
//     wire flag telling a peer-sent error from one of ours.
//   - Builder: constructs a run's events and tracks open messages and blocks,
//     so a producer that stops early (failure, cancel) still closes every
//     start with its finish and ends the run with exactly one terminal event.
//   - Validator: checks the invariants of the model on a stream of events and
//     reports the first violation with its seq.
//   - TextAccumulator: holds back a UTF-8 rune split across upstream chunks,
//     so no text delta is ever emitted broken.
//   - AnswerStream: a run as a protocol without namespaces renders it (the
//     Triton, Glide and XML frontends): the agent's answer on the root
//     namespace, one message at a time. Which namespaces are the answer:
//     the root and the graph's own nodes (one-element namespaces, such as
//     LangGraph's ["model:<task id>"], unless a tool call started them);
//     not a subgraph's own nodes (two or more deep), as LangGraph's
//     messages stream mode without subgraphs; interrupts from anywhere.
//   - Backend, Stream, Runner, Tools, Observer and ThreadStore: the ports
//     (ThreadStore: durable per-thread records, provided by the bridge).
//
// JSON payloads (state values and updates, tool inputs and outputs,
// interrupt payloads, custom and task events, typed parameters) travel as
// google.protobuf.Value, whose numbers are doubles: an integer beyond
// ±2^53 arrives rounded (12345678901234567890 as 12345678901234567000), as
// JavaScript's JSON.parse reads it, and an object's members arrive sorted
// by name (JSON objects are unordered). A client that keeps big integers
// exact sees the rounding; carrying such payloads as raw JSON would end it
// and is a change to the model.
package canonical
