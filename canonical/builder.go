package canonical

import (
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"
)

// Builder constructs the events of one namespace of a run and tracks what is
// open, so producers need not: Text opens a message and a text block when
// needed, switching block type closes the previous block, and End closes
// everything still open before the terminal event. Builder leaves thread id,
// run id, seq and time to the bridge. It is not safe for concurrent use.
type Builder struct {
	// Namespace is stamped on every event built.
	Namespace []string
	// Role is the role of implicitly opened messages; "assistant" if empty.
	Role string
	// MessageID names implicitly opened messages; a counter is appended.
	MessageID string

	st    runState
	msgs  int
	ended bool
}

// NewBuilder returns a Builder for the given namespace.
func NewBuilder(namespace ...string) *Builder {
	return &Builder{Namespace: namespace}
}

func (b *Builder) ev(e *Event) *Event {
	e.Namespace = b.Namespace
	b.st.apply(e)
	return e
}

func (b *Builder) cur() *nsState { return b.st.state(b.Namespace) }

// Ended reports whether End has been called.
func (b *Builder) Ended() bool { return b.ended }

// Lifecycle appends a non-terminal lifecycle event (started, running).
func (b *Builder) Lifecycle(out []*Event, status RunStatus) []*Event {
	return append(out, b.ev(&Event{Kind: &KindLifecycle{Lifecycle: &Lifecycle{Status: status}}}))
}

// StartMessage closes any open message and opens one with id and role.
func (b *Builder) StartMessage(out []*Event, id, role string) []*Event {
	out = b.FinishMessage(out, 0, nil)
	if id == "" {
		b.msgs++
		id = b.MessageID + "msg-" + strconv.Itoa(b.msgs)
	}
	if role == "" {
		role = b.Role
		if role == "" {
			role = "assistant"
		}
	}
	return append(out, b.ev(&Event{Kind: &KindMessageStart{MessageStart: &MessageStart{MessageId: id, Role: role}}}))
}

// StartBlock closes any open block and opens a block of type t, opening a
// message first if none is open.
func (b *Builder) StartBlock(out []*Event, t BlockType, id, name, mime, ref string) []*Event {
	out = b.FinishBlock(out)
	if !b.cur().msgOpen {
		out = b.StartMessage(out, "", "")
	}
	s := b.cur()
	return append(out, b.ev(&Event{Kind: &KindBlockStart{BlockStart: &BlockStart{
		Index: s.next, Type: t, Id: id, Name: name, Mime: mime, Ref: ref,
	}}}))
}

func (b *Builder) ensure(out []*Event, t BlockType) []*Event {
	if s := b.cur(); s.blockOpen && s.blockType == t {
		return out
	}
	return b.StartBlock(out, t, "", "", "", "")
}

// textDelta is a text delta event with its oneof wrapper and payload in
// one allocation: deltas are most of a run's events, and three small heap
// objects per delta were two thirds of every decoder's allocations.
type textDelta struct {
	ev   Event
	kind KindBlockDelta
	bd   BlockDelta
}

// NewTextDelta returns a block delta event carrying text s for block index
// (text, reasoning or tool-call arguments), allocated as one object.
func NewTextDelta(index uint32, s string) *Event {
	t := &textDelta{}
	t.bd.Index, t.bd.Text = index, s
	t.kind.BlockDelta = &t.bd
	t.ev.Kind = &t.kind
	return &t.ev
}

// Text appends a text delta, opening a text block if needed. s must be
// whole UTF-8 (see TextAccumulator); an empty s appends nothing.
func (b *Builder) Text(out []*Event, s string) []*Event {
	if s == "" {
		return out
	}
	out = b.ensure(out, BlockText)
	return append(out, b.ev(NewTextDelta(b.cur().index, s)))
}

// Reasoning appends a reasoning delta, opening a reasoning block if needed.
func (b *Builder) Reasoning(out []*Event, s string) []*Event {
	if s == "" {
		return out
	}
	out = b.ensure(out, BlockReasoning)
	return append(out, b.ev(NewTextDelta(b.cur().index, s)))
}

// ToolCall opens a tool-call block for call id and tool name.
func (b *Builder) ToolCall(out []*Event, id, name string) []*Event {
	return b.StartBlock(out, BlockToolCall, id, name, "application/json", "")
}

// ToolArgs appends a slice of the open tool call's JSON arguments.
func (b *Builder) ToolArgs(out []*Event, s string) []*Event {
	if s == "" || !b.cur().blockOpen || b.cur().blockType != BlockToolCall {
		return out
	}
	return append(out, b.ev(NewTextDelta(b.cur().index, s)))
}

// Data appends a data block of mime type with one delta holding data.
func (b *Builder) Data(out []*Event, mime string, data []byte) []*Event {
	out = b.StartBlock(out, BlockData, "", "", mime, "")
	if len(data) > 0 {
		out = append(out, b.ev(&Event{Kind: &KindBlockDelta{BlockDelta: &BlockDelta{Index: b.cur().index, Data: data}}}))
	}
	return b.FinishBlock(out)
}

// Ref appends a ref block pointing at uri.
func (b *Builder) Ref(out []*Event, mime, uri string) []*Event {
	out = b.StartBlock(out, BlockRef, "", "", mime, uri)
	return b.FinishBlock(out)
}

// FinishBlock closes the open block, if any.
func (b *Builder) FinishBlock(out []*Event) []*Event {
	s := b.cur()
	if !s.blockOpen {
		return out
	}
	return append(out, b.ev(&Event{Kind: &KindBlockFinish{BlockFinish: &BlockFinish{Index: s.index}}}))
}

// FinishMessage closes the open block and message, if any.
func (b *Builder) FinishMessage(out []*Event, reason FinishReason, usage *Usage) []*Event {
	out = b.FinishBlock(out)
	if !b.cur().msgOpen {
		return out
	}
	return append(out, b.ev(&Event{Kind: &KindMessageFinish{MessageFinish: &MessageFinish{FinishReason: reason, Usage: usage}}}))
}

// Emit appends an event of any other kind (tools, input, state, custom),
// stamped with the namespace.
func (b *Builder) Emit(out []*Event, e *Event) []*Event {
	return append(out, b.ev(e))
}

// End closes everything open and appends the terminal lifecycle event with
// status; err is required for failed and cancelled (a code is derived when
// nil). Calls after the first append nothing.
func (b *Builder) End(out []*Event, status RunStatus, err *Error) []*Event {
	if b.ended {
		return out
	}
	b.ended = true
	if b.cur().msgOpen {
		reason := FinishStop
		if status != StatusCompleted {
			reason = FinishError
		}
		out = b.FinishMessage(out, reason, nil)
	}
	out = b.st.closeOpen(out)
	return append(out, b.ev(Terminal(status, err)))
}

// Terminal returns a root lifecycle event with status, carrying err (or a
// default error for failed and cancelled).
func Terminal(status RunStatus, err *Error) *Event {
	lc := &Lifecycle{Status: status}
	switch {
	case err != nil:
		lc.Error = err.Proto()
	case status == StatusFailed:
		lc.Error = &ErrorProto{Code: uint32(CodeUnknown), Message: "run failed"}
	case status == StatusCancelled:
		lc.Error = &ErrorProto{Code: uint32(CodeCanceled), Message: "run cancelled"}
	}
	return &Event{Kind: &KindLifecycle{Lifecycle: lc}}
}

// Guard watches events from a producer that may stop early (an upstream
// that drops, a cancelled context) and supplies what the run still owes:
// finishes for open blocks and messages, then one terminal event.
type Guard struct {
	st runState
}

// Observe records ev. It returns a *Error (CodeInternal) naming the rule if
// ev breaks an invariant of the model; the caller should then End the run.
func (g *Guard) Observe(ev *Event) *Error {
	if rule := g.st.apply(ev); rule != "" {
		return Errorf(CodeInternal, "backend broke the event model: %s", rule)
	}
	return nil
}

// Ended reports whether the run's terminal event has been observed.
func (g *Guard) Ended() bool { return g.st.terminal }

// End appends the finishes still owed and the terminal event, unless the run
// has ended already.
func (g *Guard) End(out []*Event, status RunStatus, err *Error) []*Event {
	if g.st.terminal {
		return out
	}
	out = g.st.closeOpen(out)
	t := Terminal(status, err)
	g.st.apply(t)
	return append(out, t)
}

// JSON helpers for the structpb values carried by events.

// Value converts a Go value (as from encoding/json) to a structpb Value; it
// returns nil for values structpb cannot represent.
func Value(v any) *structpb.Value {
	pv, err := structpb.NewValue(v)
	if err != nil {
		return nil
	}
	return pv
}
