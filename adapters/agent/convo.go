package agent

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// convo is a thread's state as the agent runtime (Runtime) keeps it: its
// record, its conversation decoded for the next run's input, and the
// checkpoints let go whose records the next save removes. A step
// (addMessages, checkpoint) reports the events it makes through emit,
// which the runtime turns into canonical events of the run. Its methods
// are called by the run that has the thread's turn.
type convo struct {
	rec     threadRecord
	history historyCache // rec.Values["messages"] as canonical input nodes
	// dropped are the ids of saved checkpoints maxCheckpoints let go,
	// whose records the next save removes (at most maxDropped).
	dropped []string
	// made is the checkpoint the runtime last made, and its values
	// (valuesAt). Not an agent backend's: their ids are the upstream's,
	// and a record under a reused id would not be written again.
	made madeState

	maxCheckpoints int // the checkpoints kept
	maxBlockBytes  int // the text of one block a message keeps
	// inlineValues bounds the state a values event carries (0: none);
	// past it the event carries none (its checkpoint's record has it),
	// and the state is not made as JSON for it.
	inlineValues int
	now          func() time.Time
	// emit receives each event a step makes: its method (updates,
	// values, checkpoints), its data as JSON (nil for values past
	// inlineValues), and the run it is of.
	emit func(method string, data []byte, run string)
}

// madeState is a checkpoint's id and its values: the state's own values,
// shared, while the state has not changed since it was made.
type madeState struct {
	id     string
	values map[string]json.Value
}

// runAcc is what the runtime keeps of a run while it goes: how its state
// is kept (mode), the root message being assembled, its tools' names, and
// the steps made since the last save.
type runAcc struct {
	run       string
	mode      int
	msg       *msgAcc
	toolNames map[string]string
	steps     int
}

// historyCache is a thread's conversation as historyNode's leaves, kept
// with the "messages" value they were made from: every run sends the whole
// history, and decoding it again at each start made a run of a long
// conversation start in time proportional to its length. A state value is
// never written in place (each change stores a new array, see
// appendMessages), so the same bytes at the same address are the
// same history.
type historyCache struct {
	raw   json.Value
	nodes []*canonical.Node
}

// msgAcc assembles the root message being streamed, for the state.
type msgAcc struct {
	id, role  string
	node      string
	text      strings.Builder
	reasoning strings.Builder
	calls     []toolCallAcc
	blockType canonical.BlockType
}

type toolCallAcc struct {
	id, name string
	args     strings.Builder
}

// historyNodes returns the "messages" state as canonical input leaves
// (historyNode's). The array is the cache's: a caller appends to a clipped
// copy and changes no element.
//
// A backend's state snapshot replaces the stored array with its own bytes
// at every step, so the cache of the array before no longer holds the
// same bytes; but a conversation grows at its end, and when the new array
// is the cached one with elements added, only those are decoded. Decoding
// the whole history at every run start was 8% of an agent bridge's CPU
// at 20 messages, and grew with the conversation.
func (c *convo) historyNodes() []*canonical.Node {
	raw, h := c.rec.Values["messages"], &c.history
	switch {
	case sameBytes(raw, h.raw) && (h.nodes != nil || len(raw) == 0):
	case h.nodes != nil && extendsArray(raw, h.raw):
		added := decodeMessages(append([]byte{'['}, raw[len(h.raw):]...))
		h.raw, h.nodes = raw, append(h.nodes, historyNode(added).Children...)
	default:
		h.raw, h.nodes = raw, historyNode(c.messages()).Children
	}
	return h.nodes
}

func (c *convo) messages() []json.Value {
	if raw, ok := c.rec.Values["messages"]; ok {
		return decodeMessages(raw)
	}
	return nil
}

// appendMessages appends msgs to the "messages" state key. It
// splices them into the stored array rather than decoding it and joining
// it again: a thread steps many times over a growing history, and decoding
// the whole history at every step made each step of a long conversation
// cost in proportion to its length. The stored value is always valid JSON
// (this package writes it, or decodes it from a record or a snapshot), so
// one that starts with '[' is an array. Any other value (null, or a
// snapshot's non-array) is replaced, as decoding it into a slice did, and
// so is an empty array.
func (c *convo) appendMessages(msgs []json.Value) {
	if c.rec.Values == nil {
		c.rec.Values = map[string]json.Value{}
	}
	stored := c.rec.Values["messages"]
	// The history the cache holds, if it is this one's, gains msgs' leaves
	// (in place: a run is sent a copy of the array, see historyNodes).
	if h := &c.history; sameBytes(stored, h.raw) && (h.nodes != nil || len(stored) == 0) {
		defer func() { h.raw, h.nodes = c.rec.Values["messages"], append(h.nodes, historyNode(msgs).Children...) }()
	}
	old := bytes.TrimSpace(stored)
	if len(old) < 2 || old[0] != '[' || len(bytes.TrimSpace(old[1:len(old)-1])) == 0 {
		c.rec.Values["messages"] = joinArray(msgs) // not an array, or empty
		return
	}
	n := len(old) + len(msgs)
	for _, m := range msgs {
		n += len(m)
	}
	b := append(make([]byte, 0, n), old[:len(old)-1]...) // a copy: checkpoints share old
	for _, m := range msgs {
		b = append(append(b, ','), m...)
	}
	c.rec.Values["messages"] = append(b, ']')
}

// checkpoint saves a step: a checkpoint of the current values, and its
// values and checkpoints events (same superstep, adjacent seqs).
func (c *convo) checkpoint(source, node, run string) {
	rec := &c.rec
	parent := rec.Head
	step := int64(-1)
	if p := c.findCheckpoint(parent); p != nil {
		step = p.Step + 1
	}
	rec.NextCkpt++
	id := "ckpt-" + strconv.FormatUint(rec.NextCkpt, 10)
	made := madeState{id: id, values: cloneValues(rec.Values)}
	rec.Checkpoints = append(rec.Checkpoints, checkpointRec{ID: id, Parent: parent, Step: step, Source: source, Node: node, Time: c.now().UTC(), Values: made.values})
	c.made = made
	c.trimCheckpoints()
	rec.Head = id
	var values []byte
	// stateBytes is at most the JSON's length: a state past the bound by
	// it is past it as JSON, and a long conversation is not copied whole
	// at each step for nothing.
	if c.inlineValues == 0 || stateBytes(rec.Values) <= c.inlineValues {
		values = valuesJSON(rec.Values, nil)
	}
	c.emit(methodValues, values, run)
	c.emit(methodCheckpoints, appendJSON(nil, &checkpointData{ID: id, ParentID: parent, Step: step, Source: source}), run)
}

// maxDropped bounds the checkpoint ids kept for removal while saves fail;
// past it the oldest are left in the store, where they expire.
const maxDropped = 1024

// trimCheckpoints keeps the newest MaxCheckpoints checkpoints (the
// documented bound) and notes the saved ones let go, for the next save to
// remove from the store.
func (c *convo) trimCheckpoints() {
	rec := &c.rec
	n := len(rec.Checkpoints) - c.maxCheckpoints
	if n <= 0 {
		return
	}
	for _, cp := range rec.Checkpoints[:n] {
		if cp.saved {
			c.dropped = append(c.dropped, cp.ID)
		}
	}
	if over := len(c.dropped) - maxDropped; over > 0 {
		c.dropped = slices.Delete(c.dropped, 0, over)
	}
	rec.Checkpoints = slices.Delete(rec.Checkpoints, 0, n)
}

func (c *convo) findCheckpoint(id string) *checkpointRec {
	if id == "" {
		return nil
	}
	for i := range c.rec.Checkpoints {
		if c.rec.Checkpoints[i].ID == id {
			return &c.rec.Checkpoints[i]
		}
	}
	return nil
}

// addMessages appends messages and other state keys as one step.
func (c *convo) addMessages(msgs []json.Value, update map[string]json.Value, node, source, run string) {
	if len(msgs) == 0 && len(update) == 0 {
		return
	}
	if c.rec.Values == nil {
		c.rec.Values = map[string]json.Value{}
	}
	for k, v := range update {
		if k != "messages" {
			c.rec.Values[k] = v
		}
	}
	if len(msgs) > 0 {
		c.appendMessages(msgs)
	}
	if node != "" {
		u := map[string]json.Value{}
		for k, v := range update {
			if k != "messages" {
				u[k] = v
			}
		}
		if len(msgs) > 0 {
			u["messages"] = joinArray(msgs)
		}
		c.emit(methodUpdates, appendJSON(nil, &stateUpdate{Node: node, Values: u}), run)
	}
	c.checkpoint(source, node, run)
}

// observe keeps the state: messages and tool results (runtime mode),
// reported state (agent mode), interrupts and the run's outcome.
func (c *convo) observe(a *runAcc, ev *canonical.Event) {
	rec := &c.rec
	root := len(ev.GetNamespace()) == 0
	switch k := ev.GetKind().(type) {
	case *canonical.KindInputRequested:
		payload := []byte("null")
		if p := k.InputRequested.GetPayload(); p != nil {
			payload = appendValue(nil, p)
		}
		rec.Interrupts = append(rec.Interrupts, interruptRec{ID: k.InputRequested.GetInterruptId(), Namespace: ev.GetNamespace(), Payload: payload, Run: a.run})
	case *canonical.KindLifecycle:
		if st, ok := canonical.TerminalOf(ev); ok {
			switch st {
			case canonical.StatusCompleted:
				rec.Status = "completed"
			case canonical.StatusInterrupted:
				rec.Status = "interrupted"
			default:
				rec.Status = "failed"
			}
			if st != canonical.StatusInterrupted {
				rec.Interrupts = slices.DeleteFunc(rec.Interrupts, func(i interruptRec) bool { return i.Run == a.run })
			}
			a.steps++
		}
	}
	if !root {
		return
	}
	if a.mode == modeAgent {
		c.observeAgent(a, ev)
		return
	}
	c.observeModel(a, ev)
}

// observeAgent records what a root event of an agent backend says of
// the state: its values and checkpoints pass through.
func (c *convo) observeAgent(a *runAcc, ev *canonical.Event) {
	rec := &c.rec
	switch k := ev.GetKind().(type) {
	case *canonical.KindStateSnapshot:
		if v, ok := stateKeys(k.StateSnapshot.GetValues()); ok {
			rec.Values = v
		}
	case *canonical.KindCheckpoint:
		cp := k.Checkpoint
		rec.Checkpoints = append(rec.Checkpoints, checkpointRec{ID: cp.GetId(), Parent: cp.GetParentId(), Step: cp.GetStep(), Source: checkpointSource(cp.GetSource()), Time: c.now().UTC(), Values: cloneValues(rec.Values)})
		c.trimCheckpoints()
		rec.Head = cp.GetId()
		a.steps++
	}
}

// observeModel keeps the state of a plain model's root events: it
// assembles each message and tool result and adds it to the thread's
// messages (a step each).
func (c *convo) observeModel(a *runAcc, ev *canonical.Event) {
	switch k := ev.GetKind().(type) {
	case *canonical.KindMessageStart:
		a.msg = &msgAcc{id: k.MessageStart.GetMessageId(), role: k.MessageStart.GetRole(), node: ev.GetGraphNode()}
	case *canonical.KindBlockStart:
		if m := a.msg; m != nil {
			m.blockType = k.BlockStart.GetType()
			if m.blockType == canonical.BlockToolCall {
				m.calls = append(m.calls, toolCallAcc{id: k.BlockStart.GetId(), name: k.BlockStart.GetName()})
			}
		}
	case *canonical.KindBlockDelta:
		m := a.msg
		if m == nil {
			return
		}
		switch m.blockType {
		case canonical.BlockText:
			if m.text.Len() < c.maxBlockBytes {
				m.text.WriteString(k.BlockDelta.GetText())
			}
		case canonical.BlockReasoning:
			if m.reasoning.Len() < c.maxBlockBytes {
				m.reasoning.WriteString(k.BlockDelta.GetText())
			}
		case canonical.BlockToolCall:
			if call := &m.calls[len(m.calls)-1]; call.args.Len() < c.maxBlockBytes {
				call.args.WriteString(k.BlockDelta.GetText())
			}
		}
	case *canonical.KindMessageFinish:
		m := a.msg
		a.msg = nil
		if m == nil {
			return
		}
		node := m.node
		if node == "" {
			node = "model"
		}
		c.addMessages([]json.Value{m.dict(k.MessageFinish)}, nil, node, "loop", a.run)
		a.steps++
	case *canonical.KindToolStarted:
		if len(a.toolNames) < 1024 {
			a.toolNames[k.ToolStarted.GetToolCallId()] = k.ToolStarted.GetName()
		}
	case *canonical.KindToolFinished:
		id := k.ToolFinished.GetToolCallId()
		content := appendValue(nil, k.ToolFinished.GetOutput())
		if s, ok := k.ToolFinished.GetOutput().GetKind().(*structpb.Value_StringValue); ok {
			content = []byte(s.StringValue)
		}
		c.addMessages([]json.Value{toolMessage(a.run, id, a.toolNames[id], string(content), "")}, nil, "tools", "loop", a.run)
		a.steps++
	case *canonical.KindToolFailed:
		id := k.ToolFailed.GetToolCallId()
		c.addMessages([]json.Value{toolMessage(a.run, id, a.toolNames[id], k.ToolFailed.GetError().GetMessage(), "error")}, nil, "tools", "loop", a.run)
		a.steps++
	}
}

// headValuesBound is the size of a state from which a save writes it
// once, in its checkpoint's record, and the head names that checkpoint
// (threadRecord.ValuesAt); a smaller one the head holds too, so that a
// command reads one record.
const headValuesBound = 64 << 10

// valuesAt returns the checkpoint a save's head names for its values: the
// last one made, when the state is at least headValuesBound, is still
// that checkpoint's (each change of a value stores new bytes, see
// appendMessages, so the same bytes at the same address are the same
// value), and the checkpoint is kept and saved. "" otherwise.
func (c *convo) valuesAt() string {
	m, values := c.made, c.rec.Values
	if cp := c.findCheckpoint(m.id); cp == nil || !cp.saved || len(m.values) != len(values) || stateBytes(values) < headValuesBound {
		return ""
	}
	for k, v := range values {
		if w, ok := m.values[k]; !ok || !sameBytes(v, w) {
			return ""
		}
	}
	return m.id
}
