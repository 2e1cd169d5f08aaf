// Package profile states what a protocol's wire keeps of a run, for the
// conformance runner. The expected transcript of a pair is derived from
// the case's response definition: the ideal transcript, projected through
// the backend's Back (what the bridge receives from that upstream) and then
// the frontend's Front (what that protocol's client decodes from our
// frontend). The projections are the stated degradations, written once in
// each adapter's profile (Protocol.Conformance); every case checks them, so
// an adapter that loses more (or less) than it states fails.
package profile

import (
	"net/http"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// Degradation is a stated loss: what happens to a feature (or features)
// on a protocol's wire, as the frontend renders it (and that protocol's
// client reads it back) or as the backend reads it from its upstream. It
// is a pair, {feature, text}, so that the profiles' tables stay one line a
// row.
type Degradation [2]string

// Feature is the feature (or comma-separated features) the loss is of.
func (d Degradation) Feature() string { return d[0] }

// Text says what happens to it.
func (d Degradation) Text() string { return d[1] }

// Projection maps a transcript onto what one side of a wire keeps of it.
type Projection func(t *cv1.Transcript, c *cases.Case) *cv1.Transcript

// Profile is what a protocol's wire keeps of a run.
type Profile struct {
	// Front projects the bridge's transcript onto what this protocol's
	// client sees; nil: no frontend.
	Front Projection
	// Back projects the ideal transcript onto what the bridge receives
	// from this protocol's upstream; nil: no backend.
	Back Projection
	// FrontNotes and BackNotes state the degradations, for the table.
	FrontNotes, BackNotes []Degradation
	// Replay: the frontend can read a thread's events again.
	Replay bool
	// UpstreamCancel: a cancelled run's cancel reaches the upstream.
	UpstreamCancel bool
	// Upstream says what the backend column's upstream is.
	Upstream string
	// NoParameters: the protocol's requests carry no parameters.
	NoParameters bool
	// Multiplex: concurrent runs share one connection by the protocol's
	// own design (WebSocket ids, HTTP/2 streams); the others are HTTP/1.1
	// protocols, whose runs share one only over h2c.
	Multiplex bool
	// NewPeer starts the protocol's reference upstream playing the cases'
	// response definitions (conformance/peers); nil: no backend column.
	NewPeer func(cs []*cases.Case) (*Peer, error)
}

// Peer is a protocol's reference upstream.
type Peer struct {
	// Handler serves the peer (over HTTP/1.1 and h2c).
	Handler http.Handler
	// PerCase: a backend per case, whose options name it. Otherwise one
	// backend serves every case, and a case's route names the case as
	// its model.
	PerCase bool
	// Backend returns the options of a backend reaching the peer at addr
	// (host:port), for case name ("" when not PerCase).
	Backend func(addr, name string) map[string]any
	// Cancelled reports the names of the cases whose run the peer saw
	// cancelled; nil when the protocol cannot tell its upstream.
	Cancelled <-chan string
	// Close ends what the peer holds open (hanging requests, event
	// streams) before its server closes; nil: nothing.
	Close func()
}

// Clone returns a deep copy of t.
func Clone(t *cv1.Transcript) *cv1.Transcript { return proto.Clone(t).(*cv1.Transcript) }

// Identity is the projection of a lossless wire.
func Identity(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript { return Clone(t) }

// HasText reports whether anything of t reaches a text-only wire before
// its end (a Triton response was sent).
func HasText(t *cv1.Transcript) bool {
	for _, b := range t.GetBlocks() {
		if b.GetType() == transcript.Text && b.GetText() != "" {
			return true
		}
	}
	return false
}

// JoinedText returns t's root text, joined.
func JoinedText(t *cv1.Transcript) string {
	var sb strings.Builder
	for _, b := range t.GetBlocks() {
		if b.GetType() == transcript.Text {
			sb.WriteString(b.GetText())
		}
	}
	return sb.String()
}

// TextOnly keeps t's outcome and its text as one text block.
func TextOnly(t *cv1.Transcript, text string) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode()}
	if text != "" {
		out.Blocks = []*cv1.Block{{Type: transcript.Text, Text: text}}
	}
	return out
}

// BoolParam returns the case's request parameter name as a bool.
func BoolParam(c *cases.Case, name string) bool {
	v := c.GetRequest().GetParameters().GetFields()[name]
	return v.GetBoolValue()
}

// CancelledByCode: a wire that ends runs with a status code cannot tell a
// run failed with "canceled" from a cancelled one; its client reads the
// latter.
func CancelledByCode(t *cv1.Transcript) *cv1.Transcript {
	if t.GetStatus() == transcript.Failed && t.GetCode() == canonical.CodeCanceled.String() {
		t.Status = transcript.Cancelled
	}
	return t
}

// HTTPConcurrency is the "concurrent" degradation of an HTTP/1.1 protocol.
var HTTPConcurrency = Degradation{"concurrent", "HTTP/1.1 carries one run per connection: concurrent runs share one connection only over h2c (our server speaks it; bridge and cluster modes use it, server mode does not)"}

// NoReplay is the "replay" degradation of a protocol without replay.
var NoReplay = Degradation{"replay", "none: the protocol has no replay"}

// AgentAnswer is how a frontend of a protocol without namespaces reads an
// agent's run (a LangGraph graph's nodes stream in ["model:<task id>"]
// and ["tools:<task id>"]): canonical.AnswerStream's view.
var AgentAnswer = Degradation{"namespaces", "an agent's run is read as its answer (canonical.AnswerStream): the messages, tool events and errors of the root and of the graph's own nodes (one-element namespaces), on the root, one message after another, with interrupts from any namespace; a subgraph's own nodes (two or more deep) are not the answer, and no namespace's state is carried"}

// Undeclared reports whether b is a call of a tool the client of case c
// does not declare (driver.ClientTools: one the bridge runs itself): a
// frontend whose wire has no server-run call (Chat Completions,
// Responses) does not hand it to the client.
func Undeclared(c *cases.Case, b *cv1.Block) bool {
	return c != nil && b.GetType() == transcript.ToolCall && !slices.Contains(driver.ClientTools(c.GetResponse()), b.GetName())
}
