package canonical

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// nsState tracks the open message and block of one namespace of a run.
type nsState struct {
	msgOpen   bool
	blockOpen bool
	blockType BlockType
	index     uint32 // index of the open block
	next      uint32 // index the next block must take
}

// runState tracks one run's namespaces and whether it has ended.
type runState struct {
	root     *nsState // ns[""], the run's own namespace, looked up per event
	ns       map[string]*nsState
	order    []string // namespace keys in first-seen order
	paths    map[string][]string
	blocks   int // started in the run, every namespace's
	terminal bool
}

// MaxRunBlocks bounds a run's content blocks, and its namespaces, each:
// the byte limits count content, not parts, so a backend sending millions
// of empty tool calls passed them while every frontend's per-block state
// (and a non-streamed answer) grew with it.
const MaxRunBlocks = 65536

func nsKey(ns []string) string { return strings.Join(ns, "\x00") }

func (r *runState) state(ns []string) *nsState {
	if len(ns) == 0 && r.root != nil {
		return r.root
	}
	k := nsKey(ns)
	s := r.ns[k]
	if s == nil {
		if r.ns == nil {
			r.ns = map[string]*nsState{}
			r.paths = map[string][]string{}
		}
		s = &nsState{}
		r.ns[k] = s
		r.order = append(r.order, k)
		r.paths[k] = append([]string(nil), ns...)
		if k == "" {
			r.root = s
		}
	}
	return s
}

// apply checks ev against the run's state and advances it. It returns a
// description of the rule broken, or "".
func (r *runState) apply(ev *Event) string {
	if r.terminal {
		return "event after the run's terminal lifecycle event"
	}
	if len(r.order) >= MaxRunBlocks && r.ns[nsKey(ev.GetNamespace())] == nil {
		return fmt.Sprintf("more than %d namespaces in one run", MaxRunBlocks)
	}
	s := r.state(ev.GetNamespace())
	switch k := ev.GetKind().(type) {
	case nil:
		return "event has no kind"
	case *KindMessageStart:
		if s.msgOpen {
			return "message-start while a message is open in the namespace"
		}
		s.msgOpen, s.next = true, 0
	case *KindMessageFinish:
		if !s.msgOpen {
			return "message-finish without an open message"
		}
		if s.blockOpen {
			return fmt.Sprintf("message-finish while block %d is open", s.index)
		}
		s.msgOpen = false
	case *KindBlockStart:
		b := k.BlockStart
		switch {
		case !s.msgOpen:
			return "block-start outside a message"
		case s.blockOpen:
			return fmt.Sprintf("block %d starts while block %d is open (blocks must not interleave)", b.GetIndex(), s.index)
		case b.GetIndex() != s.next:
			return fmt.Sprintf("block-start index %d, want %d", b.GetIndex(), s.next)
		case b.GetType() == 0:
			return "block-start without a type"
		case r.blocks == MaxRunBlocks:
			return fmt.Sprintf("more than %d content blocks in one run", MaxRunBlocks)
		}
		r.blocks++
		s.blockOpen, s.blockType, s.index, s.next = true, b.GetType(), b.GetIndex(), b.GetIndex()+1
	case *KindBlockDelta:
		d := k.BlockDelta
		switch {
		case !s.blockOpen:
			return fmt.Sprintf("block-delta for index %d outside a block", d.GetIndex())
		case d.GetIndex() != s.index:
			return fmt.Sprintf("block-delta index %d while block %d is open", d.GetIndex(), s.index)
		case s.blockType == BlockRef:
			return "block-delta on a ref block"
		case s.blockType == BlockData && d.GetText() != "":
			return "text delta on a data block"
		case s.blockType != BlockData && len(d.GetData()) != 0:
			return "data delta on a non-data block"
		case !utf8.ValidString(d.GetText()):
			return "text delta is not whole UTF-8"
		}
	case *KindBlockFinish:
		switch {
		case !s.blockOpen:
			return fmt.Sprintf("block-finish for index %d without an open block", k.BlockFinish.GetIndex())
		case k.BlockFinish.GetIndex() != s.index:
			return fmt.Sprintf("block-finish index %d while block %d is open", k.BlockFinish.GetIndex(), s.index)
		}
		s.blockOpen = false
	case *KindLifecycle:
		st := k.Lifecycle.GetStatus()
		if st == StatusFailed && k.Lifecycle.GetError().GetCode() == uint32(CodeOK) {
			return "failed lifecycle without an error code"
		}
		if !IsTerminal(st) {
			return ""
		}
		if len(ev.GetNamespace()) != 0 {
			if s.msgOpen || s.blockOpen {
				return "namespace ends with an open message or block"
			}
			return ""
		}
		for _, key := range r.order {
			if o := r.ns[key]; o.msgOpen || o.blockOpen {
				return fmt.Sprintf("run ends with an open message or block in namespace %q", strings.Join(r.paths[key], "/"))
			}
		}
		r.terminal = true
	case *KindError:
		if k.Error.GetCode() == uint32(CodeOK) {
			return "error event without a code"
		}
	}
	return ""
}

// closeOpen appends the finish events owed by every open block and message,
// innermost namespaces first.
func (r *runState) closeOpen(out []*Event) []*Event {
	for i := len(r.order) - 1; i >= 0; i-- {
		key := r.order[i]
		s := r.ns[key]
		ns := r.paths[key]
		if s.blockOpen {
			out = append(out, &Event{Namespace: ns, Kind: &KindBlockFinish{BlockFinish: &BlockFinish{Index: s.index}}})
			s.blockOpen = false
		}
		if s.msgOpen {
			out = append(out, &Event{Namespace: ns, Kind: &KindMessageFinish{MessageFinish: &MessageFinish{FinishReason: FinishError}}})
			s.msgOpen = false
		}
	}
	return out
}
