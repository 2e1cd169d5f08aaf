// Package bench is Interlingua's load harness: it drives concurrent
// streaming runs through one frontend:backend pair of an in-process
// bridge.Server and, in the same run and alternating round by round, the
// same load straight at the upstream peer, so every figure is a ratio
// measured side by side on the same machine at the same moment.
//
// # What is measured
//
//   - Throughput: text deltas received by the clients per wall-clock second
//     of a round (all streams started together, the round ends with the
//     last stream).
//   - Time to first delta (TTFD): from the client's request to its first
//     text delta.
//   - Latency per delta: from the moment the upstream wrote the delta (a
//     stamp taken by the peer wrapper as the bytes go to the socket:
//     tritonpeer's SSE frames, the Anthropic peer's text_delta events,
//     the OpenAI peer's content chunks, glidepeer's WebSocket frames, or
//     the producer behind the Evergreen, agent and Responses upstreams
//     handing the event to its frontend) to the moment the client parsed it. With the scripted
//     backend there is no upstream and no direct path: the figure is then
//     the interval between consecutive deltas at the client.
//   - CPU seconds per million deltas (getrusage of the whole process:
//     clients, bridge and peers, so the bridged-minus-direct difference is
//     what the hop costs), heap allocations and bytes per delta (runtime
//     MemStats), peak RSS (VmRSS sampled every 10 ms during a mode's
//     rounds) and RSS per concurrent stream above the round's baseline.
//   - Errors: streams that failed or ended short.
//
// The harness names no protocol: each adapter's protocol value carries
// its part (protocol.Protocol.Load, package bench/load, in the adapter's
// load.go): a thin, protocol-honest client of its frontend that scans the
// wire for text deltas without decoding JSON trees, a reference upstream
// (a conformance peer, or the adapter's own frontend in front of a paced
// producer, load.FrontendUpstream) that stamps each delta as it sends it,
// and its idle connections. Frontends are the protocols with a client,
// Backends those with an upstream, the scripted one (Load.Scripted) and
// the route wrappers around it; the report's scenarios are derived from
// the same values (Load.RatioDeltas, Reference, MaxStreams, ...). Pacing
// (Options.Rate) is done by the peers (per-response delays) or the
// producer (an absolute schedule), never by the bridge; with the scripted
// backend it is its delay_ms parameter, so per-stream intervals there are
// whole milliseconds.
//
// Options.Proxy adds a third path where there is a direct one: the peer
// behind a reverse proxy that translates nothing (net/http/httputil), in
// the same alternation, the measure of what any hop costs on this machine.
//
// Options.External runs the server as a child `interlingua serve` (the
// embedded default configuration, scripted backend) so that CPU and RSS
// are the server's alone, optionally on one core (ServerProcs).
// Options.Fabric recreates or deletes the instance's JetStream replay
// stream to show what the replay log costs (an experiment; the bridge's
// configuration is not changed).
//
// Other modes: Idle opens thousands of idle streaming connections (half
// SSE, half WebSocket, from the protocols' Load.Idle) to a child
// `interlingua serve` process, reads its RSS, and runs 1,000 active
// streams alongside; Cluster measures two bridge instances joined by a
// NATS server (runs placed over the fabric versus local ones, and the
// same messages through NATS alone).
//
// # The report
//
// WriteReport runs the standard matrix and writes docs/benchmarks.md. It
// leads with verdicts, each a ratio to a hop that does nothing measured
// in the same run, each figure the median of ReportOptions.Rounds
// interleaved runs (default 3; one run's ratio swings by ±0.15 on a
// shared machine):
//
//   - every same-protocol pair with a reference upstream: bridged
//     throughput ≥ 0.9 of the no-op proxy's, CPU per delta ≤ 1.5× the
//     proxy's, no errors;
//   - every frontend × backend pair: CPU per delta ≤ 2× the cheaper
//     same-protocol hop of its two sides (the full matrix);
//   - paced (10,000 deltas/s over 100 streams): the bridge's added p99
//     per delta ≤ 1.5× the proxy's added p99;
//   - idle: ≤ 16 KiB of server RSS per idle connection, none failing;
//   - two instances: events/s from another instance ≥ 0.9 of what NATS
//     alone carries for the same messages.
//
// Absolute figures (the machine, converter benchmarks, every load's
// table, one stream as fast as possible, the replay-log experiments,
// 1,000 active streams) follow as information, with the machine and its
// load average, and then the CPU profiles of the pairs that missed.
//
// Limits: a frontend whose client holds one connection per stream takes
// at most Load.MaxStreams streams; the scripted backend paces in whole
// milliseconds (delay_ms) and cannot be paced through a frontend whose
// requests carry no parameters (Load.Echo), and frontends whose clients
// refuse parameters cannot drive it at all.
//
// Every goroutine the harness starts is owned by the round or instance
// that started it and ends before it returns or is closed.
package bench
