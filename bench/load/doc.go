// Package load is what a protocol contributes to the load harness (package
// bench, `interlingua bench`): a client of its frontend that counts the
// text deltas it reads, a reference upstream that streams a script and
// stamps each delta as it sends it, and how it holds an idle streaming
// connection. Each adapter exports these in its protocol value
// (protocol.Protocol.Load), so the harness iterates over the protocol list
// and names no protocol, as the conformance runner does with
// conformance/profile.
//
// Clients are thin and protocol-honest: they scan the wire for the members
// that mark a text delta, an error and the end, without decoding JSON
// trees, so the client's cost stays small beside the hop measured.
//
// The package imports no adapter and not the bridge, so both the adapters
// and the harness can import it. Every goroutine it starts (a Server's)
// is owned by the value that started it and ends when that is closed.
package load
