package canonical

import (
	"strings"

	"google.golang.org/protobuf/proto"
)

// DefaultAnswerHeldBytes is AnswerStream's bound on the events it holds
// back when its maxHeldBytes is zero or less.
const DefaultAnswerHeldBytes = 4 << 20

// AnswerStream is the view of a run that a frontend of a protocol without
// namespaces (Triton, Glide, the XML action stream) renders: the run's
// answer, on the root namespace, one message at a time.
//
// The answer is what the run's own graph says, as LangGraph's messages
// stream mode without subgraphs streams it (the chat model calls of the
// graph's own nodes, not those inside subgraphs):
//
//   - the root namespace's messages, content blocks, tool events and
//     errors, and its lifecycle;
//   - the same events of each one-element namespace, a node of the graph
//     (LangGraph runs each node as a task in a namespace such as
//     ["model:<task id>"] or ["tools:<task id>"]), unless its started
//     lifecycle names a tool call as its cause: a nested run that a tool
//     call started (an XML action's) is the tool's work, and reaches the
//     client as the tool's result;
//   - interrupts (input requested and answered) from any namespace, since
//     an interrupt anywhere pauses the whole run and needs the client's
//     answer.
//
// Left out: namespaces two or more deep (a subgraph's own nodes), the
// lifecycle of every namespace but the root (a subgraph's "failed" is not
// the run's: the root's terminal event says how the run ended), and state
// snapshots, state updates, checkpoints, tasks and custom events, which
// no flat protocol renders.
//
// The events kept are returned on the root namespace (a copy of the event
// sharing its kind; the stream's events are not changed), so a frontend
// renders them as it renders the root's. Messages never interleave: while
// one namespace's message is open, the events of the other namespaces
// wait, in order, until it finishes (graph nodes running in parallel each
// stream a message at once). What waits is bounded by maxHeldBytes
// (DefaultAnswerHeldBytes when zero or less); past it Recv fails with
// CodeResourceExhausted. The root's terminal event releases what waits
// before it.
//
// The returned stream is a Buffered stream whether or not s is one; its
// Close closes s.
func AnswerStream(s Stream, maxHeldBytes int) Stream {
	if maxHeldBytes <= 0 {
		maxHeldBytes = DefaultAnswerHeldBytes
	}
	a := &answerStream{in: s, max: maxHeldBytes}
	a.buffered, _ = s.(Buffered)
	return a
}

// answerStream is AnswerStream's stream; see there.
type answerStream struct {
	in       Stream
	buffered Buffered // in, when it is one
	max      int
	err      error // in's error, returned once ready is drained

	byTool map[string]bool // one-element namespaces a tool call started

	msgOpen bool   // a message is open in the output ...
	open    string // ... from the namespace with this key

	held      []*Event // events of other namespaces while that message streams
	heldBytes int

	ready []*Event // events to return, from next on
	next  int
}

// Recv returns the next event of the answer.
func (a *answerStream) Recv() (*Event, error) {
	for a.next >= len(a.ready) {
		if a.err != nil {
			return nil, a.err
		}
		if err := a.pull(); err != nil {
			return nil, err
		}
	}
	ev := a.ready[a.next]
	a.ready[a.next] = nil
	a.next++
	if a.next == len(a.ready) {
		a.ready, a.next = a.ready[:0], 0
	}
	return ev, nil
}

// pull reads one event of the run and places it.
func (a *answerStream) pull() error {
	ev, err := a.in.Recv()
	if err == nil {
		err = a.add(ev)
	}
	a.err = err
	return err
}

// Buffered is the number of answer events Recv returns without waiting:
// it reads the events the run has at hand (which a Recv returns at once)
// until one is part of the answer.
func (a *answerStream) Buffered() int {
	for a.next >= len(a.ready) && a.err == nil && a.buffered != nil && a.buffered.Buffered() > 0 {
		_ = a.pull()
	}
	if n := len(a.ready) - a.next; n > 0 || a.err == nil {
		return n
	}
	return 1 // the error, at once
}

// Close closes the run's stream.
func (a *answerStream) Close() error { return a.in.Close() }

// add places one event of the run.
func (a *answerStream) add(ev *Event) error {
	if _, ok := TerminalOf(ev); ok {
		held := a.held
		a.held, a.heldBytes, a.msgOpen = nil, 0, false
		a.ready = append(a.ready, held...)
		for i := len(a.ready) - len(held); i < len(a.ready); i++ {
			a.ready[i] = rooted(a.ready[i])
		}
		a.ready = append(a.ready, ev)
		return nil
	}
	if !a.answers(ev) {
		return nil
	}
	if lc := ev.GetLifecycle(); lc != nil { // the root's, not terminal
		a.ready = append(a.ready, ev)
		return nil
	}
	return a.place(ev)
}

// answers reports whether ev is part of the answer (see AnswerStream),
// noting the namespaces that tool calls start.
func (a *answerStream) answers(ev *Event) bool {
	ns := ev.GetNamespace()
	switch k := ev.GetKind().(type) {
	case *KindLifecycle:
		if len(ns) == 1 {
			switch lc := k.Lifecycle; {
			case lc.GetStatus() == StatusStarted && lc.GetCause().GetType() == "toolCall":
				if a.byTool == nil {
					a.byTool = map[string]bool{}
				}
				a.byTool[ns[0]] = true
			case IsTerminal(lc.GetStatus()):
				delete(a.byTool, ns[0])
			}
		}
		return len(ns) == 0
	case *KindInputRequested, *KindInputAnswered:
		return true
	case *KindMessageStart, *KindMessageFinish, *KindBlockStart, *KindBlockDelta, *KindBlockFinish,
		*KindToolStarted, *KindToolOutput, *KindToolFinished, *KindToolFailed, *KindError:
		return len(ns) == 0 || len(ns) == 1 && !a.byTool[ns[0]]
	}
	return false // state, checkpoints, tasks, custom
}

// place returns ev (on the root namespace) unless a message of another
// namespace is open, in which case it waits.
func (a *answerStream) place(ev *Event) error {
	key := strings.Join(ev.GetNamespace(), "\x00")
	if a.msgOpen && key != a.open {
		a.heldBytes += proto.Size(ev)
		if a.heldBytes > a.max {
			return Errorf(CodeResourceExhausted,
				"the answer holds more than %d bytes of other namespaces' events while the message of namespace %q streams (a flat protocol shows one message at a time)",
				a.max, strings.ReplaceAll(a.open, "\x00", "/"))
		}
		a.held = append(a.held, ev)
		return nil
	}
	a.ready = append(a.ready, rooted(ev))
	switch ev.GetKind().(type) {
	case *KindMessageStart:
		a.msgOpen, a.open = true, key
	case *KindMessageFinish:
		a.msgOpen = false
		held := a.held
		a.held, a.heldBytes = nil, 0
		for _, h := range held {
			if err := a.place(h); err != nil {
				return err
			}
		}
	}
	return nil
}

// rooted is ev on the root namespace: ev itself, or a copy sharing its
// kind and extensions.
func rooted(ev *Event) *Event {
	if len(ev.GetNamespace()) == 0 {
		return ev
	}
	return &Event{ThreadId: ev.GetThreadId(), RunId: ev.GetRunId(), Seq: ev.GetSeq(), TimeUnixNano: ev.GetTimeUnixNano(),
		GraphNode: ev.GetGraphNode(), Kind: ev.Kind, Extensions: ev.GetExtensions()}
}
