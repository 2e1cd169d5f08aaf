// Package driver plays a conformance response definition
// (interlingua.conformance.v1.Response): one definition drives the
// in-process canonical upstream (Backend) and the script of every
// reference peer (TritonModel, GlideRouter, EvergreenScript, AgentScript),
// and Ideal
// derives the transcript a lossless path would deliver, from which the
// runner projects each pair's expected transcript.
//
// A definition's text is cut into deltas at byte offsets that may fall
// inside a rune (Deltas); the canonical upstream passes each delta through
// canonical.TextAccumulator, as a well-behaved backend does, while peers
// whose wire carries raw bytes (Triton's SSE) send the halves as they are.
// Peers whose wire cannot (JSON text: Glide's WebSocket frames, the agent
// protocol's events) re-cut at rune boundaries (WholeRunes) or take the
// canonical upstream's whole-rune deltas (AgentScript).
//
// Streams generate their events on Recv: no goroutine runs behind them.
package driver
