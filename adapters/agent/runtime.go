package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// The bridge is the agent runtime for backends that are plain models: it
// keeps the thread's state (the message list, plus any other keys a client
// put there), saves a checkpoint per step, forks from checkpoints and turns
// a backend's input requests into interrupts. Backends that report state
// themselves (state snapshot, update or checkpoint events before any
// message, or the agent backend, which marks its events) are agents: their
// state events pass through and the bridge only records them.

// stateVersion is the version of the persisted thread record (2: the
// checkpoints are records of their own).
const stateVersion = 2

// threadRecord is a thread's durable state. In the thread store (record.go)
// it is one head record, this as JSON with the ids of its checkpoints in
// order, and one record per checkpoint: no record holds the whole history
// more than once, and none has a size cap (the store puts large values
// in its object store).
type threadRecord struct {
	Version   int                   `json:"v"`
	Thread    string                `json:"thread_id"`
	Assistant string                `json:"assistant_id,omitempty"`
	Seq       uint64                `json:"seq"`
	Agent     bool                  `json:"agent,omitzero"` // state comes from an agent backend (false left out, as encoding/json's omitempty did)
	Values    map[string]json.Value `json:"values"`
	// CheckpointIDs lists Checkpoints in the head record; set by a save
	// and by a read, not kept in step in between.
	CheckpointIDs []string        `json:"checkpoints,omitempty"`
	Checkpoints   []checkpointRec `json:"-"`
	Head          string          `json:"head,omitempty"`
	NextCkpt      uint64          `json:"next_checkpoint"`
	Interrupts    []interruptRec  `json:"interrupts,omitempty"`
	Status        string          `json:"status"`
	Runs          uint64          `json:"runs"`
	LastRun       string          `json:"last_run,omitempty"`
	Updated       time.Time       `json:"updated"`
	// RunHead is the checkpoint the last run started from: a rollback
	// forks from it (Runtime).
	RunHead string `json:"run_head,omitempty"`
	// Injected are messages injected while a run was going (input.inject)
	// that the Runtime has not added yet: a frontend on any instance
	// writes them here, and the run's end adds them as a step.
	Injected []json.Value `json:"injected,omitempty"`
}

// checkpointRec is one saved step: its place in the tree and the full values.
// It never changes once made, so it is written to the store once (saved),
// and its JSON is kept (enc) from its encoding until then.
type checkpointRec struct {
	ID     string                `json:"id"`
	Parent string                `json:"parent_id,omitempty"`
	Step   int64                 `json:"step"`
	Source string                `json:"source"`
	Node   string                `json:"node,omitempty"`
	Time   time.Time             `json:"time"`
	Values map[string]json.Value `json:"values"`
	enc    []byte                // its JSON, once a save encoded it
	saved  bool                  // it is in the store
}

// interruptRec is a pending input request.
type interruptRec struct {
	ID        string     `json:"id"`
	Namespace []string   `json:"namespace"`
	Payload   json.Value `json:"payload"`
	Run       string     `json:"run"`
}

// runtime is a Thread's state and runs; guarded by Thread.mu except
// persistMu, which orders saves.
type runtime struct {
	convo         // the record, the history, the checkpoints let go
	known    bool // the thread has state (a run, or a record in the store)
	active   *activeRun
	queue    []*pendingRun
	injected []json.Value // messages injected while a run was active

	persistMu sync.Mutex
	rev       uint64 // store revision of the head record last read or written; 0: none

	saving    bool // saveLoop runs
	saveAgain bool // saveLoop is to save once more
	// snapshots counts the saves' snapshots, and saved is the number of
	// the one whose head was written last: a save saveLoop was asked for
	// before a snapshot that has been written since has nothing to add.
	snapshots, saved uint64
	// seqAhead is added to the thread's seq in a save: the frames of a
	// run's terminal event, saved before they are appended (endSaved).
	seqAhead uint64
}

// pendingRun is a run to start: the canonical request and what the run
// adds to the state first.
type pendingRun struct {
	id       string
	req      *canonical.Request
	input    []json.Value          // messages the run adds
	update   map[string]json.Value // other state keys the run sets
	answered []string              // interrupt ids the run resumes
	fork     string                // checkpoint the run forks from
	// principal is the caller who started it (nil: auth off).
	principal *canonical.Principal
}

// Run modes: undecided until the first event that is not a lifecycle one.
const (
	modeUndecided = iota
	modeRuntime   // the bridge keeps the state
	modeAgent     // the backend reports its own state
)

// activeRun is the thread's running run.
type activeRun struct {
	pr      *pendingRun
	ctx     context.Context // ends when the run is cancelled
	cancel  context.CancelFunc
	done    chan struct{}
	stream  canonical.Stream
	enc     *Encoder
	head    string // checkpoint before the run (rollback target)
	failure *canonical.Error
	ended   bool
	runAcc
}

// passthroughExt marks the events of the agent backend: their state is the
// upstream agent's.
const passthroughExt = "agent.passthrough"

// historyKeepBytes bounds the history kept decoded between runs: a
// longer one is decoded again at each run's start (a fraction of the time
// a model takes to read it) rather than held in memory twice while no run
// needs it, its JSON in the state and its text in the nodes.
const historyKeepBytes = 1 << 20

// sameBytes reports whether a and b are the same bytes in memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// extendsArray reports whether the JSON array b is the JSON array a with
// elements appended: a without its closing bracket, then a comma. Each of
// a's elements is whole (a is an array), so b's first elements are a's,
// byte for byte.
func extendsArray(b, a []byte) bool {
	return len(a) > 2 && a[len(a)-1] == ']' && len(b) > len(a) &&
		b[len(a)-1] == ',' && bytes.Equal(b[:len(a)-1], a[:len(a)-1])
}

// decodeMessages is a JSON array's elements, each its JSON; none for JSON
// that is not an array, rather than the part the library decoded before an
// error (encoding/json checked the whole first). The state holds clients'
// and backends' JSON as it came: it is read as encoding/json read it
// (peerJSON: the last of a repeated name, invalid UTF-8 as U+FFFD), not
// refused, which would drop the conversation from a run's input.
func decodeMessages(raw []byte) []json.Value {
	var msgs []json.Value
	if json.Unmarshal(raw, &msgs, peerJSON) != nil {
		return nil
	}
	return msgs
}

// valuesJSON is the state as a JSON object, keys sorted.
func valuesJSON(v map[string]json.Value, keys []string) []byte {
	return appendValuesJSON(make([]byte, 0, stateBytes(v)+2), v, keys)
}

// appendValuesJSON appends valuesJSON's object to b. A state is made
// whole in one array: grown by append, a conversation's values left
// twice their size behind them at each step.
func appendValuesJSON(b []byte, v map[string]json.Value, keys []string) []byte {
	names := make([]string, 0, len(v))
	for k := range v {
		if keys == nil || slices.Contains(keys, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	b = append(b, '{')
	var key []byte // each key is written apart: appendString may grow the array it writes to, whatever its size
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		key = appendString(key[:0], k)
		b = append(append(b, key...), ':')
		b = append(b, v[k]...)
	}
	return append(b, '}')
}

// stateBytes is about the size of a state as JSON (valuesJSON's).
func stateBytes(v map[string]json.Value) int {
	n := 0
	for k, x := range v {
		n += len(k) + len(x) + 4
	}
	return n
}

func cloneValues(v map[string]json.Value) map[string]json.Value {
	out := make(map[string]json.Value, len(v))
	for k, x := range v {
		out[k] = x
	}
	return out
}

// emitLocked appends a wire event the runtime synthesizes.
func (t *Thread) emitLocked(method string, ns []string, data []byte, run string) {
	w := wireEvent{method: method, namespace: ns, timeMs: t.f.cfg.Now().UnixMilli(), data: jsonOrNull(data)}
	if ns == nil {
		w.namespace = []string{}
	}
	t.appendLocked(&w, run)
}

// checkpointValuesLocked returns a checkpoint's values: those kept in
// memory until a save encodes it, then read back from its JSON, and once
// it is saved from the store (t.mu is held for the read, bounded by
// StoreTimeout: a fork is rare).
func (t *Thread) checkpointValuesLocked(cp *checkpointRec) (map[string]json.Value, error) {
	switch {
	case cp.Values == nil && !cp.saved && cp.enc != nil:
		return checkpointValues(cp.enc)
	case cp.Values != nil || !cp.saved || t.f.cfg.Store == nil:
		return cp.Values, nil
	}
	ctx, cancel := context.WithTimeout(t.f.runCtx, t.f.cfg.StoreTimeout)
	defer cancel()
	b, _, err := t.f.cfg.Store.Get(ctx, t.id, checkpointKey(cp.ID))
	if err != nil {
		return nil, err
	}
	return checkpointValues(b)
}

// checkpointValues decodes the values of a checkpoint record.
func checkpointValues(b []byte) (map[string]json.Value, error) {
	var stored checkpointRec
	if err := json.Unmarshal(b, &stored, recordJSON); err != nil { // as readCheckpoints reads the record
		return nil, canonical.Errorf(canonical.CodeDataLoss, "checkpoint record does not decode: %v", err)
	}
	return stored.Values, nil
}

func joinArray(items []json.Value) json.Value {
	b := []byte{'['}
	for i, m := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	return append(b, ']')
}

// inputMessages converts run input to state messages and other keys:
// {"messages": [...], other keys...}, a string (one human message), or null.
func inputMessages(raw json.Value, idPrefix string) (msgs []json.Value, update map[string]json.Value, pe *protoError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	switch raw[0] {
	case '"':
		m, pe := normalizeMessage(raw, idPrefix+"0")
		if pe != nil {
			return nil, nil, pe
		}
		return []json.Value{m}, nil, nil
	case '{':
	default:
		return nil, nil, perr(errInvalidArgument, "input must be an object, a string or null.")
	}
	var obj map[string]json.Value
	// A client's JSON, stored as it came: read as encoding/json read it
	// (peerJSON), a repeated name's last value kept, invalid UTF-8 taken.
	if json.Unmarshal(raw, &obj, peerJSON) != nil {
		return nil, nil, perr(errInvalidArgument, "input must be an object, a string or null.")
	}
	update = map[string]json.Value{}
	for k, v := range obj {
		if k != "messages" {
			update[k] = v
		}
	}
	if mr, ok := obj["messages"]; ok && string(mr) != "null" {
		var list []json.Value
		if json.Unmarshal(mr, &list, peerJSON) != nil {
			return nil, nil, perr(errInvalidArgument, "input.messages must be an array of messages.")
		}
		for i, m := range list {
			nm, pe := normalizeMessage(m, idPrefix+strconv.Itoa(i))
			if pe != nil {
				pe.Message = fmt.Sprintf("input.messages[%d]: %s", i, pe.Message)
				return nil, nil, pe
			}
			msgs = append(msgs, nm)
		}
	}
	return msgs, update, nil
}

// normalizeMessage turns an input message ({role|type, content, ...} or a
// string) into a LangChain message dict with a type and an id.
func normalizeMessage(raw json.Value, id string) (json.Value, *protoError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s, peerJSON) != nil { // invalid UTF-8 as U+FFFD, as encoding/json read it
			return nil, perr(errInvalidArgument, "content is not a string.")
		}
		return json.Value(fmt.Sprintf(`{"type":"human","content":%s,"id":%s}`, appendString(nil, s), appendString(nil, id))), nil
	}
	var m map[string]json.Value
	// peerJSON: as encoding/json read it, the last of a repeated name kept
	// and invalid UTF-8 taken (the message is stored as it came).
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m, peerJSON) != nil {
		return nil, perr(errInvalidArgument, "a message must be an object or a string.")
	}
	typ := ""
	for _, k := range []string{"type", "role"} {
		if v, ok := m[k]; ok {
			_ = json.Unmarshal(v, &typ, peerJSON)
			if typ != "" {
				break
			}
		}
	}
	switch typ {
	case "user", "human":
		typ = "human"
	case "assistant", "ai":
		typ = "ai"
	case "system", "tool":
	case "":
		return nil, perr(errInvalidArgument, "role is required (user, assistant, system or tool).")
	default:
		return nil, perr(errInvalidArgument, fmt.Sprintf("role %q is not one of user, assistant, system, tool.", typ))
	}
	if _, ok := m["content"]; !ok {
		return nil, perr(errInvalidArgument, "content is required.")
	}
	delete(m, "role")
	m["type"] = appendString(nil, typ)
	if v, ok := m["id"]; !ok || string(v) == "null" {
		m["id"] = appendString(nil, id)
	}
	return valuesJSON(m, nil), nil
}

// messageText is the text of a message dict's content (a string, or the
// text blocks of a content array).
func messageText(content json.Value) string {
	// Stored JSON, read as encoding/json read it (decodeMessages).
	var s string
	if json.Unmarshal(content, &s, peerJSON) == nil {
		return s
	}
	var blocks []map[string]any
	if json.Unmarshal(content, &blocks, peerJSON) != nil {
		return ""
	}
	var sb strings.Builder
	for _, b := range blocks {
		if b["type"] == "text" {
			if t, ok := b["text"].(string); ok {
				sb.WriteString(t)
			}
		}
	}
	return sb.String()
}

// canonicalRole maps a message dict type to a canonical role.
func canonicalRole(typ string) string {
	switch typ {
	case "human":
		return "user"
	case "ai":
		return "assistant"
	}
	return typ
}

// historyNode is the conversation as a canonical input node: one text leaf
// per message, with its role.
func historyNode(msgs []json.Value) *canonical.Node {
	n := &canonical.Node{}
	for _, m := range msgs {
		var d struct {
			Type    string     `json:"type"`
			Content json.Value `json:"content"`
		}
		if json.Unmarshal(m, &d, peerJSON) != nil { // as decodeMessages reads the array
			continue
		}
		n.Children = append(n.Children, canonical.TextNode(canonicalRole(d.Type), messageText(d.Content)))
	}
	return n
}

// stateKeys is a reported state as the thread keeps it: each key's JSON
// (none for null); ok is false unless the state is an object or null. It
// is what decoding the state's JSON (appendValue) into a map of raw values
// gives, without writing the whole state out and reading it back.
func stateKeys(state *structpb.Value) (map[string]json.Value, bool) {
	s := state.GetStructValue()
	if s == nil {
		_, null := state.GetKind().(*structpb.Value_NullValue)
		return nil, null || state.GetKind() == nil
	}
	v := make(map[string]json.Value, len(s.GetFields()))
	for k, f := range s.GetFields() {
		if !utf8.ValidString(k) {
			// Written with U+FFFD for its bad bytes, it may meet another key:
			// the JSON decides which value is kept.
			// (peerJSON takes the repeated name, keeping the last, as
			// encoding/json did; refused, the state would not be kept.)
			var all map[string]json.Value
			err := json.Unmarshal(appendValue(nil, state), &all, peerJSON)
			return all, err == nil
		}
		v[k] = appendValue(nil, f)
	}
	return v, true
}

// startRunLocked makes pr the active run and starts it: the runner is
// called without t.mu held (it may cross the network), then the pump
// goroutine takes the stream. On error the run never started and the
// thread is as before.
func (t *Thread) startRunLocked(pr *pendingRun) *protoError {
	rt := &t.rt
	var fork *checkpointRec
	var forkValues map[string]json.Value
	if pr.fork != "" {
		if fork = t.rt.findCheckpoint(pr.fork); fork != nil {
			var err error
			if forkValues, err = t.checkpointValuesLocked(fork); err != nil {
				return asProtoError(fmt.Errorf("checkpoint %q could not be read: %w", fork.ID, err))
			}
		}
	}
	ctx, cancel := context.WithCancel(t.f.runCtx)
	if pr.principal != nil {
		ctx = canonical.WithPrincipal(ctx, pr.principal)
	}
	ar := &activeRun{pr: pr, ctx: ctx, cancel: cancel, done: make(chan struct{}), head: rt.rec.Head, runAcc: runAcc{run: pr.id, toolNames: map[string]string{}}}
	ar.enc = NewEncoder(EncoderConfig{GraphName: rt.rec.Assistant, MaxBlockBytes: t.f.cfg.MaxBlockBytes, Now: t.f.cfg.Now})
	rt.active = ar
	t.ownLocked()
	if fork != nil {
		rt.rec.Values = cloneValues(forkValues)
		rt.rec.Head = fork.ID
		t.rt.checkpoint("fork", "", pr.id)
	}
	if len(pr.answered) > 0 {
		b := append([]byte(`{"interrupt_ids":`), appendNamespace(nil, pr.answered)...)
		t.emitLocked(methodInputAnswered, nil, append(b, '}'), pr.id)
		rt.rec.Interrupts = slices.DeleteFunc(rt.rec.Interrupts, func(i interruptRec) bool { return slices.Contains(pr.answered, i.ID) })
	}
	req := pr.req
	req.RunId, req.ThreadId = pr.id, t.id
	hist := append(slices.Clip(t.rt.historyNodes()), historyNode(pr.input).Children...)
	req.Inputs = []*canonical.NamedNode{{Name: "messages", Node: &canonical.Node{Children: hist}}}
	rt.known = true
	rt.rec.Runs++
	rt.rec.LastRun = pr.id
	rt.rec.Status = "running"

	t.mu.Unlock()
	stream, err := t.f.cfg.Runner.Run(ctx, req)
	t.mu.Lock()
	// The request is the runner's now; a long history is not kept decoded
	// beside it (historyKeepBytes).
	pr.req = nil
	if len(rt.rec.Values["messages"]) > historyKeepBytes {
		rt.history = historyCache{}
	}
	if err != nil {
		cancel()
		rt.active = nil
		rt.rec.Runs--
		rt.rec.Status = "idle"
		if len(pr.answered) > 0 { // the answers were not used: the interrupts stay pending
			rt.rec.Status = "interrupted"
		}
		t.ownLocked()
		return asProtoError(err)
	}
	if !t.f.track() {
		_ = stream.Close()
		cancel()
		rt.active = nil
		t.ownLocked()
		return perr(errUnknownError, "the server is shutting down")
	}
	ar.stream = stream
	go t.pump(ar)
	return nil
}

// pump is the goroutine that owns a run's stream: it turns each canonical
// event into wire events in the thread's buffer and keeps the state. It
// exits when the run has ended (after its terminal event) and starts the
// next queued run.
func (t *Thread) pump(ar *activeRun) {
	defer t.f.wg.Done()
	defer close(ar.done)
	defer ar.stream.Close()
	var out []wireEvent
	// Steps are saved beside the run (saveSoon). The state as of the last
	// one is saved before the run's end is appended, as when each step was
	// saved in turn: a client that sees the end and reads the thread on
	// another instance finds the run's turn there. The run's last state is
	// saved before the thread can be let go. With a store, both are one
	// save (endSaved).
	asked := false // saveSoon was asked since the last saveNow
	final := false // the terminal event made a step
	for {
		ev, err := ar.stream.Recv()
		if _, end := canonical.TerminalOf(ev); end && err == nil && t.f.cfg.Store != nil {
			res, again := t.endSaved(ar, ev, out[:0])
			if res == endFailed {
				continue // as handleLocked: the run is being cancelled
			}
			if res == endHandled {
				final, asked = again, false
				break
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) || !ar.ended {
				if asked {
					t.saveNow()
					asked = false
				}
				t.mu.Lock()
				if !ar.ended {
					ce := canonical.AsError(err)
					if errors.Is(err, io.EOF) {
						ce = canonical.Errorf(canonical.CodeUnavailable, "run ended without a terminal event")
					}
					t.handleLocked(ar, canonical.Terminal(canonical.StatusFailed, ce), out[:0])
				}
				t.mu.Unlock()
			}
			break
		}
		if _, end := canonical.TerminalOf(ev); end && asked {
			t.saveNow()
			asked = false
		}
		t.mu.Lock()
		out = t.handleLocked(ar, ev, out[:0])
		save := ar.steps > 0
		ar.steps = 0
		t.mu.Unlock()
		if ar.ended {
			final = save
			break
		}
		if save {
			t.saveSoon()
			asked = true
		}
	}
	if final || asked || !ar.ended || ar.steps > 0 {
		t.saveNow()
	}
	t.mu.Lock()
	if t.rt.active == ar { // the stream failed before a terminal event could be handled
		t.rt.active = nil
	}
	var next *pendingRun
	for next == nil && t.rt.active == nil && len(t.rt.queue) > 0 && !t.f.isClosed() {
		next, t.rt.queue = t.rt.queue[0], t.rt.queue[1:]
		if pe := t.startRunLocked(next); pe != nil {
			t.f.cfg.Logger.Warn("queued run did not start", "thread", t.id, "run", next.id, "code", pe.Code, "err", pe.Message)
			next = nil
		}
	}
	t.maybeIdleLocked()
	t.mu.Unlock()
	if next != nil {
		t.persist()
	}
}

// maxStepEvents bounds the events the runtime appends beside one
// canonical event's frames: three steps (addMessages: updates,
// values and checkpoints each) at most, the run's input when its mode is
// decided, a finished message or tool result, and the messages injected
// during the run when it ends. The pump waits for room for them too.
const maxStepEvents = 3 * 3

// frameOverhead is about the bytes of a frame beside its data: the
// envelope, the seq, the namespace.
const frameOverhead = 256

// awaitRoomForLocked waits (awaitRoomLocked) for room for out's frames
// and the steps handling ev makes. A step's values event is the whole
// state, and its updates event the messages it adds: in a long
// conversation the steps are most of the bytes one canonical event
// appends, and BufferBytes counts them.
func (t *Thread) awaitRoomForLocked(ar *activeRun, ev *canonical.Event, out []wireEvent) {
	size := 0
	for i := range out {
		size += len(out[i].data) + frameOverhead
	}
	if steps, added := t.stepsOfLocked(ar, ev); steps > 0 {
		size += steps*(stateBytes(t.rt.rec.Values)+added+3*frameOverhead) + added
	}
	t.awaitRoomLocked(ar.ctx, len(out)+maxStepEvents, size)
}

// stepsOfLocked is how many steps (addMessages) handling ev can
// make, and about the bytes, as JSON, of what they add to the state: the
// run's input while its mode is undecided, a plain model's finished
// message or tool result, the messages injected during the run when it
// ends. Text is counted twice, for the escapes JSON may add.
func (t *Thread) stepsOfLocked(ar *activeRun, ev *canonical.Event) (steps, added int) {
	const dictBytes = 512 // a message dict's keys, ids and metadata
	if ar.mode == modeUndecided {
		steps++
		added += rawBytes(ar.pr.input) + stateBytes(ar.pr.update)
	}
	if len(ev.GetNamespace()) == 0 && ar.mode != modeAgent {
		switch k := ev.GetKind().(type) {
		case *canonical.KindMessageFinish:
			if m := ar.msg; m != nil {
				steps++
				added += 2*m.textBytes() + dictBytes
			}
		case *canonical.KindToolFinished:
			steps++
			added += 2*proto.Size(k.ToolFinished.GetOutput()) + dictBytes
		case *canonical.KindToolFailed:
			steps++
			added += 2*len(k.ToolFailed.GetError().GetMessage()) + dictBytes
		}
	}
	if _, end := canonical.TerminalOf(ev); end && len(t.rt.injected) > 0 {
		steps++
		added += rawBytes(t.rt.injected)
	}
	return steps, added
}

// textBytes is the text the message has assembled.
func (m *msgAcc) textBytes() int {
	n := m.text.Len() + m.reasoning.Len()
	for i := range m.calls {
		n += m.calls[i].args.Len()
	}
	return n
}

func rawBytes(msgs []json.Value) int {
	n := 0
	for _, m := range msgs {
		n += len(m) + 1
	}
	return n
}

// endSaved's outcomes.
const (
	endDeclined = iota // the general path handles the event
	endHandled         // the run has ended
	endFailed          // the event could not be encoded: the run is cancelled
)

// endSaved handles a run's terminal event in one save where two were
// made: the event's effect on the state (the run's status, its pending
// interrupts) is applied and saved, with the seq its frames are about to
// take, before the frames are appended. A client that sees the run end
// and reads the thread on another instance finds it ended there, as
// before; the save after the end is gone, a third of a run's saves. again
// reports a change since the save (messages injected during the run,
// events appended meanwhile), which the caller saves. Runs whose terminal
// event does more (an undecided mode adds the input first; a run being
// cancelled after an encoding failure ends failed) are declined, with
// nothing changed, for handleLocked.
func (t *Thread) endSaved(ar *activeRun, ev *canonical.Event, out []wireEvent) (res int, again bool) {
	t.mu.Lock()
	if ar.ended || ar.failure != nil || ar.mode == modeUndecided {
		t.mu.Unlock()
		return endDeclined, false
	}
	out, err := ar.enc.Encode(ev, out)
	if err != nil {
		t.cancelUnencodableLocked(ar, err)
		t.mu.Unlock()
		return endFailed, false
	}
	// The readers are waited for before the state says the run ended, and
	// again (at once, unless a command appended meanwhile) after the save.
	t.awaitRoomForLocked(ar, ev, out)
	t.rt.observe(&ar.runAcc, ev)
	ar.steps = 0
	before := t.seq
	t.rt.seqAhead = uint64(len(out))
	t.mu.Unlock()
	t.saveNow()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rt.seqAhead = 0
	t.awaitRoomForLocked(ar, ev, out)
	again = t.seq != before || len(t.rt.injected) > 0
	for i := range out {
		t.appendLocked(&out[i], ar.pr.id)
	}
	t.endLocked(ar)
	return endHandled, again
}

// cancelUnencodableLocked cancels a run whose event could not be encoded:
// its stream then ends, and its terminal event is a failure with err.
func (t *Thread) cancelUnencodableLocked(ar *activeRun, err error) {
	ar.failure = canonical.AsError(err)
	t.f.cfg.Logger.Warn("run cancelled: event not encodable", "thread", t.id, "run", ar.pr.id, "err", err)
	ar.cancel()
}

// endLocked takes the ended run off the thread, under the lock its
// terminal event was appended with: a client that has seen the event
// finds the thread idle (or interrupted) at once.
func (t *Thread) endLocked(ar *activeRun) {
	ar.ended = true
	if t.rt.active == ar {
		t.rt.active = nil
	}
	t.applyInjectedLocked()
}

// handleLocked encodes one canonical event into the buffer and keeps the
// state.
func (t *Thread) handleLocked(ar *activeRun, ev *canonical.Event, out []wireEvent) []wireEvent {
	if ar.ended {
		return out
	}
	_, terminal := canonical.TerminalOf(ev)
	if ar.failure != nil && !terminal {
		return out // the run is being cancelled after an encoding failure
	}
	if terminal && ar.failure != nil {
		ev = canonical.Terminal(canonical.StatusFailed, ar.failure)
	}
	// The event is encoded first, for the number of its frames: the pump
	// waits for room for them and the steps it makes (the only wait),
	// then stores them and their effect on the state under one hold of
	// t.mu. The encoder is the pump's alone; the mode, decided below,
	// does not change the encoding.
	out, err := ar.enc.Encode(ev, out)
	t.awaitRoomForLocked(ar, ev, out)
	if ar.mode == modeUndecided {
		if _, ok := ev.GetExtensions()[passthroughExt]; ok {
			ar.mode = modeAgent
		} else {
			switch ev.GetKind().(type) {
			case *canonical.KindLifecycle:
				if terminal {
					ar.mode = modeRuntime
				}
			case *canonical.KindStateSnapshot, *canonical.KindStateUpdate, *canonical.KindCheckpoint:
				ar.mode = modeAgent
			default:
				ar.mode = modeRuntime
			}
		}
		switch ar.mode {
		case modeRuntime:
			t.rt.rec.Agent = false
			t.rt.addMessages(ar.pr.input, ar.pr.update, "", "input", ar.pr.id)
			ar.steps++
		case modeAgent:
			t.rt.rec.Agent = true
		}
	}
	if err != nil {
		t.cancelUnencodableLocked(ar, err)
		return out
	}
	for i := range out {
		t.appendLocked(&out[i], ar.pr.id)
	}
	t.rt.observe(&ar.runAcc, ev)
	if terminal {
		t.endLocked(ar)
	}
	return out
}

// dict is the finished message as a LangChain message dict.
func (m *msgAcc) dict(mf *canonical.MessageFinish) json.Value {
	typ := "ai"
	switch m.role {
	case "user", "human":
		typ = "human"
	case "system", "tool":
		typ = m.role
	}
	d := map[string]any{"type": typ, "id": m.id, "content": m.text.String()}
	if m.reasoning.Len() > 0 {
		d["additional_kwargs"] = map[string]any{"reasoning_content": m.reasoning.String()}
	}
	if len(m.calls) > 0 {
		calls := make([]any, 0, len(m.calls))
		for _, c := range m.calls {
			var args map[string]any
			if s := strings.TrimSpace(c.args.String()); s != "" {
				if json.Unmarshal([]byte(s), &args, peerJSON) != nil { // a model's JSON, read as encoding/json read it
					args = map[string]any{}
				}
			}
			if args == nil {
				args = map[string]any{}
			}
			calls = append(calls, map[string]any{"type": "tool_call", "id": c.id, "name": c.name, "args": args})
		}
		d["tool_calls"] = calls
	}
	if u := mf.GetUsage(); u != nil && (u.GetInputTokens() != 0 || u.GetOutputTokens() != 0) {
		total := u.GetTotalTokens()
		if total == 0 {
			total = u.GetInputTokens() + u.GetOutputTokens()
		}
		d["usage_metadata"] = map[string]any{"input_tokens": u.GetInputTokens(), "output_tokens": u.GetOutputTokens(), "total_tokens": total}
	}
	if r := wireReason(mf.GetFinishReason()); r != "" {
		d["response_metadata"] = map[string]any{"finish_reason": r}
	}
	return messageDict(d)
}

func toolMessage(run, callID, name, content, status string) json.Value {
	d := map[string]any{"type": "tool", "id": run + "-tool-" + callID, "tool_call_id": callID, "content": content}
	if name != "" {
		d["name"] = name
	}
	if status != "" {
		d["status"] = status
	}
	return messageDict(d)
}

// messageDict is a message dict's JSON as the state stores it: its keys
// sorted, as encoding/json sorted them (the bytes of a step's message do
// not vary), and invalid UTF-8 in its text as U+FFFD (wireJSON). <, > and
// & are no longer escaped (\u003c): the bytes are the same JSON, and the
// events, the state command and the stored record, which rewrite the state
// through the facade, already carried them unescaped.
func messageDict(d map[string]any) json.Value {
	b, _ := json.Marshal(d, wireJSON)
	return b
}

// applyInjectedLocked adds the messages injected during the run that ended.
func (t *Thread) applyInjectedLocked() {
	if len(t.rt.injected) == 0 {
		return
	}
	msgs := t.rt.injected
	t.rt.injected = nil
	t.rt.addMessages(msgs, nil, "__input__", "update", t.rt.rec.LastRun)
}

// saveSoon saves the thread on a goroutine of its own, so that a run's
// events, or a command's answer, do not wait for the store write (300-450 µs
// here unloaded): a step's save was on the path of the message that
// followed it, and run.start's on the path of every client that opens its
// stream once the command is answered, as the SDK does. One save runs at
// a time; asked for meanwhile, one more follows, of the state as it is
// then, so steps that come faster than store writes share a save. The first
// save, which creates the record, is made at once unless the frontend is
// Alone: until it exists, another instance asked for the thread (a client
// resuming there) does not know it; so are saves once the frontend is
// closing.
func (t *Thread) saveSoon() {
	if t.f.cfg.Store == nil {
		return
	}
	t.mu.Lock()
	if t.rt.rev == 0 && !t.rt.saving && !t.f.cfg.Alone {
		t.mu.Unlock()
		t.persist()
		return
	}
	t.rt.saveAgain = true
	if t.rt.saving {
		t.mu.Unlock()
		return
	}
	if !t.f.track() {
		t.mu.Unlock()
		t.saveNow()
		return
	}
	t.rt.saving = true
	t.mu.Unlock()
	go t.saveLoop()
}

// saveNow saves the thread and returns once it is saved; a save asked of
// saveSoon and not yet begun is this one.
func (t *Thread) saveNow() {
	t.mu.Lock()
	t.rt.saveAgain = false
	t.mu.Unlock()
	t.persist()
}

func (t *Thread) saveLoop() {
	defer t.f.wg.Done()
	for {
		t.mu.Lock()
		if !t.rt.saveAgain {
			t.rt.saving = false
			t.mu.Unlock()
			return
		}
		t.rt.saveAgain = false
		asked := t.rt.snapshots
		t.mu.Unlock()
		t.persistUnlessSaved(asked)
	}
}

// persist saves the thread to the store (if configured): the checkpoints
// not saved yet, each a record written once, then the head record, which
// lists them, then it removes the checkpoints MaxCheckpoints let go. Saves
// are ordered: each takes its snapshot after the previous one was written.
// A save that fails leaves what it did not write for the next one.
func (t *Thread) persist() { t.persistUnlessSaved(math.MaxUint64) }

// persistUnlessSaved is persist, but for a save asked for when asked
// snapshots had been taken, and made redundant by one taken after and
// written since: a run's end, saved at once (endSaved), could otherwise be
// written a second time, the whole state again, after its client saw it.
func (t *Thread) persistUnlessSaved(asked uint64) {
	store := t.f.cfg.Store
	if store == nil {
		return
	}
	t.rt.persistMu.Lock()
	defer t.rt.persistMu.Unlock()
	t.mu.Lock()
	redundant := t.rt.saved > asked
	t.mu.Unlock()
	if redundant {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.f.cfg.StoreTimeout)
	defer cancel()
	// Optimistic concurrency: the head is written only over the revision
	// this instance last saw. If another instance saved the thread since,
	// its record is merged into ours and the save tried again, so neither
	// update is lost.
	for attempt := 0; ; attempt++ {
		snap, err := t.snapshot()
		if err != nil || snap == nil {
			if err != nil {
				t.f.cfg.Logger.Error("thread state not saved", "thread", t.id, "err", err)
			}
			return
		}
		if err := t.saveCheckpoints(ctx, snap.checkpoints); err != nil {
			t.f.cfg.Logger.Error("thread state not saved", "thread", t.id, "err", err)
			return
		}
		newRev, err := store.Put(ctx, t.id, headKey, snap.head, snap.rev)
		if err == nil {
			t.mu.Lock()
			t.rt.rev, t.rt.saved = newRev, snap.number
			// Only appended to meanwhile (or cut at maxDropped: those expire).
			t.rt.dropped = t.rt.dropped[min(len(snap.dropped), len(t.rt.dropped)):]
			t.mu.Unlock()
			t.removeCheckpoints(ctx, snap.dropped)
			return
		}
		if canonical.CodeOf(err) != canonical.CodeAborted || attempt == 4 {
			t.f.cfg.Logger.Error("thread state not saved", "thread", t.id, "err", err, "attempts", attempt+1)
			return
		}
		if err := t.mergeStored(ctx); err != nil {
			t.f.cfg.Logger.Error("thread state not saved", "thread", t.id, "err", err)
			return
		}
	}
}

// saveSnapshot is what one save writes, taken under t.mu.
type saveSnapshot struct {
	number      uint64 // of the thread's snapshots, from 1
	head        []byte
	rev         uint64   // the head's revision it replaces
	checkpoints []string // the ids of those not saved yet
	dropped     []string
}

// snapshot encodes the head record and lists the checkpoints not saved
// yet, which saveCheckpoints encodes in turn; nil when the thread has no
// state to save.
func (t *Thread) snapshot() (*saveSnapshot, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.rt.known {
		return nil, nil
	}
	rec := t.savedRecordLocked()
	t.rt.snapshots++
	snap := &saveSnapshot{number: t.rt.snapshots, rev: t.rt.rev, dropped: slices.Clone(t.rt.dropped)}
	cps := t.rt.rec.Checkpoints
	rec.CheckpointIDs = make([]string, len(cps))
	for i := range cps {
		rec.CheckpointIDs[i] = cps[i].ID
		if !cps[i].saved {
			snap.checkpoints = append(snap.checkpoints, cps[i].ID)
		}
	}
	head, err := encodeHead(&rec)
	snap.head = head
	return snap, err
}

// saveCheckpoints writes the checkpoints ids names, each once
// (create-only), and marks them saved. Each is encoded as its turn comes
// and its JSON let go once written, so that a save holds one
// checkpoint's copy of the whole state at a time, not one per step since
// the last save. One that exists already was written by this thread's
// save that failed later, or by another instance that made a checkpoint
// of the same id meanwhile; the stored one stands. One that left memory
// meanwhile (MaxCheckpoints) is not written: a read of the head leaves a
// listed checkpoint the store lacks out.
func (t *Thread) saveCheckpoints(ctx context.Context, ids []string) error {
	for _, id := range ids {
		t.mu.Lock()
		enc, err := t.checkpointJSONLocked(id)
		t.mu.Unlock()
		if err != nil {
			return err
		}
		if enc == nil {
			continue
		}
		_, err = t.f.cfg.Store.Put(ctx, t.id, checkpointKey(id), enc, 0)
		if err != nil && canonical.CodeOf(err) != canonical.CodeAborted {
			return err
		}
		t.mu.Lock()
		if cp := t.rt.findCheckpoint(id); cp != nil {
			// Saved, its values live in the store: a fork reads them back
			// (checkpointValuesLocked). Kept here, each checkpoint's copy
			// of the whole state made memory grow with the square of a
			// conversation's turns (12 turns of 1 MB: over 900 MB).
			cp.saved, cp.enc, cp.Values = true, nil, nil
		}
		t.mu.Unlock()
	}
	return nil
}

// checkpointJSONLocked is the record of a checkpoint not saved yet,
// encoded once and kept until it is saved (a save that fails leaves it
// for the next); nil when the checkpoint is saved or gone. Its values then
// live on in its JSON (checkpointValuesLocked): kept beside it, a step's
// checkpoint held the conversation before the step, the whole of it,
// twice while the save ran.
func (t *Thread) checkpointJSONLocked(id string) ([]byte, error) {
	cp := t.rt.findCheckpoint(id)
	if cp == nil || cp.saved {
		return nil, nil
	}
	if cp.enc == nil {
		b, err := encodeCheckpoint(cp)
		if err != nil {
			return nil, err
		}
		cp.enc, cp.Values = b, nil
	}
	return cp.enc, nil
}

// removeCheckpoints removes the records of checkpoints the head no longer
// lists; one left behind (its removal failed) expires with the store's TTL.
func (t *Thread) removeCheckpoints(ctx context.Context, ids []string) {
	for _, id := range ids {
		if err := t.f.cfg.Store.Delete(ctx, t.id, checkpointKey(id)); err != nil {
			t.f.cfg.Logger.Warn("dropped checkpoint left in the store", "thread", t.id, "checkpoint", id, "err", err)
		}
	}
}

// mergeStored merges the head record another instance saved, and the
// checkpoints it lists that this instance lacks, into the thread, after
// its save met that newer revision.
func (t *Thread) mergeStored(ctx context.Context) error {
	t.mu.Lock()
	have := t.rt.checkpointIDs()
	t.mu.Unlock()
	theirs, rev, err := readRecord(ctx, t.f.cfg.Store, t.id, have, t.f.cfg.Logger)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if theirs == nil { // gone (expired), or unreadable: ours replaces it
		t.rt.rev = rev
		return nil
	}
	t.mergeRecordLocked(*theirs, rev)
	if theirs.Seq > t.seq {
		t.seq = theirs.Seq // new events must not reuse the other instance's numbers
	}
	return nil
}

// mergeRecordLocked merges a record read at revision rev into the thread.
func (t *Thread) mergeRecordLocked(theirs threadRecord, rev uint64) {
	t.rt.rec = mergeRecords(t.rt.rec, theirs)
	t.rt.trimCheckpoints()
	t.rt.known, t.rt.rev = true, rev
}

// savedRecordLocked is the thread's record as a save writes it: with its
// version, id, time and seq (the frames of a terminal event saved before
// they are appended included, see endSaved).
func (t *Thread) savedRecordLocked() threadRecord {
	rec := t.rt.rec
	rec.Version, rec.Thread, rec.Seq, rec.Updated = stateVersion, t.id, t.seq+t.rt.seqAhead, t.f.cfg.Now().UTC()
	return rec
}

// mergeRecords joins a thread record another instance saved (theirs) with
// ours: messages, checkpoints and interrupts are unioned by id (theirs
// first, in their order, then ours that they lack); counters take the
// larger; for the other values and the head, the later save wins.
func mergeRecords(ours, theirs threadRecord) threadRecord {
	if theirs.Thread == "" {
		return ours
	}
	out := ours
	newer := theirs.Updated.After(ours.Updated)
	out.Seq, out.Runs, out.NextCkpt = max(ours.Seq, theirs.Seq), max(ours.Runs, theirs.Runs), max(ours.NextCkpt, theirs.NextCkpt)
	if newer {
		out.Head, out.Status, out.LastRun, out.Assistant = theirs.Head, theirs.Status, theirs.LastRun, theirs.Assistant
	}
	out.Values = map[string]json.Value{}
	for k, v := range theirs.Values {
		out.Values[k] = v
	}
	for k, v := range ours.Values {
		if _, theirsHas := theirs.Values[k]; k != "messages" && (!theirsHas || !newer) {
			out.Values[k] = v
		}
	}
	if msgs := unionMessages(theirs.Values["messages"], ours.Values["messages"]); msgs != nil {
		out.Values["messages"] = msgs
	}
	out.Checkpoints = unionBy(theirs.Checkpoints, ours.Checkpoints, func(c checkpointRec) string { return c.ID })
	slices.SortStableFunc(out.Checkpoints, func(a, b checkpointRec) int { return a.Time.Compare(b.Time) })
	out.Interrupts = unionBy(theirs.Interrupts, ours.Interrupts, func(i interruptRec) string { return i.ID })
	out.Injected = pendingInjected(unionMessagesList(theirs.Injected, ours.Injected), out.Values["messages"])
	return out
}

// unionMessagesList is unionMessages over lists of messages.
func unionMessagesList(theirs, ours []json.Value) []json.Value {
	if len(theirs) == 0 && len(ours) == 0 {
		return nil
	}
	return unionBy(theirs, ours, messageKey)
}

// pendingInjected is the injected messages the messages (a JSON array)
// do not hold yet: a save merged with a record written before its
// injected messages were added must not add them twice.
func pendingInjected(injected []json.Value, messages json.Value) []json.Value {
	if len(injected) == 0 {
		return nil
	}
	have := map[string]bool{}
	for _, m := range decodeMessages(messages) {
		have[messageKey(m)] = true
	}
	return slices.DeleteFunc(injected, func(m json.Value) bool { return have[messageKey(m)] })
}

// unionBy returns a then the items of b whose key a lacks.
func unionBy[T any](a, b []T, key func(T) string) []T {
	seen := make(map[string]bool, len(a))
	out := slices.Clone(a)
	for _, x := range a {
		seen[key(x)] = true
	}
	for _, x := range b {
		if !seen[key(x)] {
			out = append(out, x)
		}
	}
	return out
}

// unionMessages unions two JSON message arrays by message id (a message
// without an id by its bytes); nil when both are absent.
func unionMessages(theirs, ours json.Value) json.Value {
	a, b := decodeMessages(theirs), decodeMessages(ours)
	if a == nil && b == nil {
		return nil
	}
	return joinArray(unionBy(a, b, messageKey))
}

// messageKey is what tells a message from another: its id, or its bytes
// when it has none.
func messageKey(m json.Value) string {
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(m, &v, peerJSON) == nil && v.ID != "" { // as decodeMessages reads the array
		return "id:" + v.ID
	}
	return "raw:" + string(m)
}

// newRunID returns a fresh run id.
func newRunID() string { return canonical.NewID("run-") }

// maybeIdleLocked arms the idle timer when nothing holds the thread: no
// connection, no run. When it fires the thread leaves memory (its state
// stays in the store; a thread that has state and no store stays).
func (t *Thread) maybeIdleLocked() {
	t.ownLocked()
	if t.conns > 0 || t.rt.active != nil || len(t.rt.queue) > 0 {
		if t.idle != nil {
			t.idle.Stop()
			t.idle = nil
		}
		return
	}
	t.countLocked(true) // exact for trimBuffersLocked, which weighs the idle
	if t.idle != nil || (t.rt.known && t.f.cfg.Store == nil) {
		return
	}
	t.idle = time.AfterFunc(t.f.cfg.BufferKeep, func() { t.f.evict(t) })
	t.idleSince = t.f.cfg.Now()
}
