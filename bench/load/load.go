package load

import (
	"context"
	"io"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Load is a protocol's part in the load harness. Fields a protocol has no
// use for stay zero.
type Load struct {
	// Title names the frontend and its client in the report ("Triton
	// SSE").
	Title string
	// NewClient returns a client of the protocol's frontend; nil: the
	// harness has no client for it.
	NewClient func(ClientSpec) (Client, error)
	// NewUpstream starts the protocol's reference upstream playing sc:
	// what the bridge's backend of this protocol calls and what the
	// protocol's client calls directly; nil: none.
	NewUpstream func(sc Script) (*Upstream, error)
	// Scripted: the protocol's backend streams what a request's
	// parameters ask for (model "stream": deltas, delta_text, delay_ms)
	// or its prompt back a word per delta (model "echo"), with no
	// upstream: the harness's backend without a peer.
	Scripted bool
	// Echo: the client's requests carry no parameters, so against a
	// Scripted backend the harness asks the echo model for the deltas
	// wanted (and cannot pace it).
	Echo bool
	// MaxStreams bounds the streams of one load through the frontend (its
	// client holds a connection per stream, and the frontend takes so
	// many); 0: no bound.
	MaxStreams int
	// RatioDeltas is the deltas per stream of the report's unpaced
	// same-protocol and cross-protocol loads of this protocol, long
	// enough that a stream's start is a small part of its round; 0: 5,000.
	RatioDeltas int
	// MaxUnpacedDeltas is the longest unpaced run the frontend's client
	// keeps up with: the frontend buffers a bounded number of events per
	// run ahead of its reader and cuts a slower reader off, as the
	// slow-consumer rule says; the report runs such a frontend from the
	// scripted backend once more at this length. 0: no such bound.
	MaxUnpacedDeltas int
	// Reference: the report's single-protocol scenarios (one stream as
	// fast as possible, the replay-log experiments, 1,000 active streams,
	// the active streams beside the idle connections) and its cross pairs
	// use this frontend. One protocol sets it.
	Reference bool
	// Idle opens the protocol's idle streaming connections; nil: none.
	Idle *Idle
}

// ClientSpec is where a client sends and what it asks for.
type ClientSpec struct {
	// Base is the server's URL (http://host:port, or the upstream's Base).
	Base string
	// Target is the model, router or target id.
	Target string
	// Params are the request parameters of a Scripted backend; nil with
	// an upstream. A client whose requests cannot carry them refuses
	// (ErrNoParameters).
	Params map[string]any
	// Streams is the number of slots (0..Streams-1; a slot runs one
	// stream at a time).
	Streams int
	// Mode names the path ("direct", "proxy", "bridged", "active"): where
	// a protocol names server-side state (agent threads), the paths use
	// different names, since the bridge passes its ids on to the same
	// upstream.
	Mode string
}

// Client is a frontend protocol's client.
type Client interface {
	// Stream sends one streaming request for slot i with prompt, records
	// its start and each text delta in rec, and returns when the response
	// ends; an error is a failed or broken stream.
	Stream(ctx context.Context, i int, prompt string, rec *Recorder) error
	// Close releases the client's connections.
	Close()
}

// Script is what every upstream streams per request.
type Script struct {
	// Target is the model, router or target id the upstream serves.
	Target string
	// Deltas is the number of text deltas per stream, each Text.
	Deltas int
	Text   string
	// Interval paces the deltas (before each); 0 as fast as possible.
	Interval time.Duration
	// Streams is the number of concurrent streams.
	Streams int
	// Bridge, when set, puts a bridge of the harness's around the
	// upstream's producer: a frontend that runs its runs through the
	// bridge (a protocol with a runtime, which reads the replay log) gets
	// it. Nil: the frontend calls the producer itself.
	Bridge func(r canonical.Runner) (*Bridged, error)
}

// Bridged is a bridge around a producer (Script.Bridge): the ports a
// frontend on it uses, and how to stop it.
type Bridged struct {
	Runner      canonical.Runner
	Observer    canonical.Observer
	Store       canonical.ThreadStore
	CheckThread func(ctx context.Context, thread string) error
	CancelRun   func(thread, run string)
	Close       func()
}

// Upstream is a running reference upstream. Its stamp book is keyed by
// the request's prompt text (the stream key).
type Upstream struct {
	// Base is the URL a client of the protocol uses directly (http:// or
	// ws://).
	Base string
	// Backend is the options of the bridge's backend (of the protocol's
	// type) that reaches the upstream.
	Backend map[string]any
	// Book holds the send stamps of the upstream's deltas.
	Book *StampBook
	// H2C: the upstream speaks HTTP/2 without TLS (gRPC), so must a hop
	// in front of it.
	H2C bool
	// Notes say how the bridge's backend is configured for this load
	// where that differs from its defaults.
	Notes []string
	// Close stops the upstream.
	Close func()
}

// Transports of idle connections.
const (
	SSE       = "sse"
	WebSocket = "websocket"
)

// Idle is how a protocol holds idle streaming connections to a server
// (the embedded default configuration), for the idle measurement: half the
// connections are SSE, half WebSocket, each transport's share filled in
// list order, the protocols with a Max first.
type Idle struct {
	// Transport is SSE or WebSocket.
	Transport string
	// Max caps the protocol's connections (its frontend's limit); 0: none.
	Max int
	// Fallback: used only when no other protocol of its transport can
	// open one (their frontends are not mounted).
	Fallback bool
	// Open opens the protocol's connection number i to the server at addr
	// (host:port) and returns it once it is established and idle.
	Open func(ctx context.Context, addr string, i int) (io.Closer, error)
	// Text says what the connections are, for the report ("Glide
	// chatStream WebSockets").
	Text string
}
