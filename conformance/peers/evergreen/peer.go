// Package evergreenpeer is a reference Evergreen server (evergreen.v2
// StartSession, google-deepmind/evergreen-spec at 56d7b38) for tests and
// the conformance runner, driven by a script per target: the parts of each
// output, fragment by fragment, then an abort or the end of the session.
// It is written from the spec (https://github.com/google-deepmind/evergreen-spec)
// and the reference client @google/actionengine independently of
// adapters/evergreen, so the two do not agree by
// construction.
//
// A session: the peer reads the client's messages until the half-close
// (the client's input is then complete), takes the first GENERATE action,
// looks its target_spec.id up among the scripts (NOT_FOUND otherwise) and
// answers with nodes whose root ids are the action's output ids:
//
//   - response (or text): a single text part is one leaf, the spec's
//     shape: metadata {mimetype, role "model"} on seq 0, a fragment per
//     delta with continued set, closed by an empty final fragment. Any
//     other response is a non-leaf root that grows a child per part (seq
//     0, 1, ... each listing one child id, continued), closed by an empty
//     final fragment once the script ends.
//   - reasoning and tool_calls: non-leaf roots the same way; tool_calls
//     children are the Interlingua tool-event JSON objects
//     ({"type":"tool_call"|"tool_started"|...}), which only an Interlingua
//     client reads.
//
// Each part's leaf is finished before the next part starts; a requested
// output the script leaves empty is closed with one empty final fragment.
// Then the script's abort (a gRPC status; the outputs stay incomplete, as
// a failing model leaves them) or OK. A hanging script waits for
// the client to go away and reports it on Cancelled.
//
// Serve it over h2c or TLS (gRPC needs HTTP/2); a session runs in its
// handler goroutine only.
package evergreenpeer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
)

// Output names.
const (
	Response  = "response"
	Reasoning = "reasoning"
	ToolCalls = "tool_calls"
)

// Part is one leaf of an output.
type Part struct {
	// Output is Response, Reasoning or ToolCalls.
	Output string
	// Mime is the leaf's mime type. Default text/plain.
	Mime string
	// Fragments are the leaf's payload, a fragment each.
	Fragments [][]byte
	// Ref makes the leaf a ref chunk instead.
	Ref string
}

// Script is what one target answers.
type Script struct {
	Parts []Part
	// Abort ends the session with this status after the parts.
	Abort *connect.Error
	// Hang keeps the session open after the parts until the client leaves.
	Hang bool
	// Delay is slept before each fragment.
	Delay time.Duration
}

// MaxInputMessages bounds the messages one session may send.
const MaxInputMessages = 100_000

// Peer is the reference server.
type Peer struct {
	scripts   map[string]Script
	cancelled chan string
}

// New returns a peer serving scripts by target id.
func New(scripts map[string]Script) *Peer {
	return &Peer{scripts: scripts, cancelled: make(chan string, 64)}
}

// Handler returns the path to mount and the gRPC/Connect handler.
func (p *Peer) Handler() (string, http.Handler) {
	return evergreenv2connect.NewEvergreenServiceHandler(p)
}

// Cancelled receives the target of each session whose client went away
// before its script ended (up to 64 unread).
func (p *Peer) Cancelled() <-chan string { return p.cancelled }

// StartSession implements evergreenv2connect.EvergreenServiceHandler.
func (p *Peer) StartSession(ctx context.Context, stream *connect.BidiStream[ev.SessionMessage, ev.SessionMessage]) error {
	var action *ev.Action
	for n := 0; ; n++ {
		m, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if n >= MaxInputMessages {
			return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("more than %d messages", MaxInputMessages))
		}
		for _, a := range m.GetActions() {
			if action == nil && a.GetName() == "GENERATE" {
				action = a
			}
		}
	}
	if action == nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("no GENERATE action"))
	}
	target := action.GetTargetSpec().GetId()
	sc, ok := p.scripts[target]
	if !ok {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown target %q", target))
	}
	outs := map[string]string{}
	for _, o := range action.GetOutputs() {
		name := o.GetName()
		if name == "text" {
			name = Response
		}
		outs[name] = o.GetId()
	}
	s := &session{ctx: ctx, stream: stream, delay: sc.Delay, outs: outs, next: map[string]int32{}}
	// A script that aborts or hangs never completes its outputs.
	if err := s.play(sc, sc.Abort == nil && !sc.Hang); err != nil {
		if ctx.Err() != nil {
			p.gone(target)
		}
		return err
	}
	if sc.Abort != nil {
		return sc.Abort
	}
	if sc.Hang {
		<-ctx.Done()
		p.gone(target)
		return ctx.Err()
	}
	return nil
}

func (p *Peer) gone(target string) {
	select {
	case p.cancelled <- target:
	default:
	}
}

type session struct {
	ctx    context.Context
	stream *connect.BidiStream[ev.SessionMessage, ev.SessionMessage]
	delay  time.Duration
	outs   map[string]string // output name -> root id
	next   map[string]int32  // root id -> next root seq
	leaves int
}

// play sends every part, then (if complete) closes the requested roots.
func (s *session) play(sc Script, complete bool) error {
	single := 0
	for _, pt := range sc.Parts {
		if pt.Output == Response {
			single++
		}
	}
	leafResponse := single == 1
	for _, pt := range sc.Parts {
		root, ok := s.outs[pt.Output]
		if !ok {
			continue // not requested
		}
		if pt.Output == Response && leafResponse && pt.Ref == "" && (pt.Mime == "" || pt.Mime == "text/plain") {
			if err := s.leaf(root, pt); err != nil {
				return err
			}
			s.next[root] = -1 // closed
			continue
		}
		s.leaves++
		id := root + "-" + strconv.Itoa(s.leaves)
		seq := s.next[root]
		s.next[root] = seq + 1
		if err := s.send(&ev.NodeFragment{Id: root, Seq: seq, Continued: true, ChildIds: []string{id}}); err != nil {
			return err
		}
		if err := s.leaf(id, pt); err != nil {
			return err
		}
	}
	for _, name := range []string{Response, Reasoning, ToolCalls} {
		root, ok := s.outs[name]
		if !complete || !ok || s.next[root] < 0 {
			continue
		}
		if err := s.send(&ev.NodeFragment{Id: root, Seq: s.next[root]}); err != nil {
			return err
		}
	}
	return nil
}

// leaf sends one leaf: metadata on seq 0, a fragment per payload piece,
// an empty final fragment.
func (s *session) leaf(id string, pt Part) error {
	mime := pt.Mime
	if mime == "" {
		mime = "text/plain"
	}
	md := &ev.ChunkMetadata{Mimetype: mime, Role: "model"}
	if pt.Ref != "" {
		return s.send(&ev.NodeFragment{Id: id, ChunkFragment: &ev.Chunk{Metadata: md, Payload: &ev.Chunk_Ref{Ref: pt.Ref}}})
	}
	seq := int32(0)
	for _, f := range pt.Fragments {
		c := &ev.Chunk{Payload: &ev.Chunk_Data{Data: f}}
		if seq == 0 {
			c.Metadata = md
		}
		if err := s.send(&ev.NodeFragment{Id: id, Seq: seq, Continued: true, ChunkFragment: c}); err != nil {
			return err
		}
		seq++
	}
	final := &ev.NodeFragment{Id: id, Seq: seq}
	if seq == 0 {
		final.ChunkFragment = &ev.Chunk{Metadata: md}
	}
	return s.send(final)
}

func (s *session) send(f *ev.NodeFragment) error {
	if s.delay > 0 {
		t := time.NewTimer(s.delay)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return s.ctx.Err()
		}
	}
	if err := s.ctx.Err(); err != nil {
		return err
	}
	return s.stream.Send(&ev.SessionMessage{NodeFragments: []*ev.NodeFragment{f}})
}
