// Package scripted is the built-in deterministic backend. It makes the
// embedded default useful out of the box and every test reproducible.
//
// Targets:
//
//   - echo: streams the prompt text back, a word per text delta.
//   - demo-agent: a reasoning block, a calculator tool call with streamed
//     JSON arguments, the built-in tool's result, then a final text answer.
//   - demo-approval: as demo-agent, but asks for approval (input requested,
//     run interrupted) before its tool call; resuming with {"approved": true}
//     runs the tool, anything else declines.
//   - stream: parameter "deltas" (default 16) text deltas of "delta_text"
//     (default "tok "), for load tests.
//   - cortex-example: the complete example of the Cortex Streaming
//     Execution Protocol as XML action-stream text, a few bytes per delta
//     (route it with xml: true to decode and execute it).
//
// Fault injection, on every target, by request parameters:
//
//   - delay_ms: sleep before each delta.
//   - fail_after, fail_code, fail_message: after N text deltas, fail the run
//     with the code (a name such as "unavailable", or a number).
//   - hang: after the first content delta (a run without content: before
//     it would end), wait until the run is cancelled.
//   - split_rune: append a 4-byte rune whose bytes arrive in two chunks; the
//     UTF-8 accumulator holds the first half back, so no delta is broken.
//
// Streams generate events on Recv: no goroutine runs behind a stream.
package scripted
