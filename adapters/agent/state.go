package agent

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
// checkpoints are records of their own; 3: the head lists them whole, but
// for their values, and a large state is written once, in its checkpoint's
// record). A version 2 record reads as it did.
const stateVersion = 3

// threadRecord is a thread's durable state. In the thread store (record.go)
// it is one head record, this as JSON with its checkpoints in order but for
// their values, and one record per checkpoint with its values: no record
// holds the whole history more than once, a save writes a large state once
// (ValuesAt), and none has a size cap (the store puts large values in
// chunks of its own stream).
type threadRecord struct {
	Version   int                   `json:"v"`
	Thread    string                `json:"thread_id"`
	Assistant string                `json:"assistant_id,omitempty"`
	Seq       uint64                `json:"seq"`
	Agent     bool                  `json:"agent,omitzero"` // state comes from an agent backend (false left out, as encoding/json's omitempty did)
	Values    map[string]json.Value `json:"values"`
	// ValuesAt names the checkpoint whose record holds Values when the
	// head does not (a large state the save wrote there: convo.valuesAt).
	// Records expire a while after their last write, so a head read after
	// that checkpoint expired reads as a thread expired (readState).
	ValuesAt string `json:"values_at,omitempty"`
	// CheckpointIDs are the checkpoints a version 2 head lists, by id:
	// their records are read for the rest (readCheckpoints).
	CheckpointIDs []string `json:"checkpoints,omitempty"`
	// Checkpoints are the thread's checkpoints, oldest first; the head
	// lists them without their values (encodeHead).
	Checkpoints []checkpointRec `json:"checkpoint_index,omitempty"`
	Head        string          `json:"head,omitempty"`
	NextCkpt    uint64          `json:"next_checkpoint"`
	Interrupts  []interruptRec  `json:"interrupts,omitempty"`
	Status      string          `json:"status"`
	Runs        uint64          `json:"runs"`
	LastRun     string          `json:"last_run,omitempty"`
	Updated     time.Time       `json:"updated"`
	// RunHead is the checkpoint the last run started from: a rollback
	// forks from it (Runtime).
	RunHead string `json:"run_head,omitempty"`
	// Injected are messages injected while a run was going (input.inject)
	// that the Runtime has not added yet: a frontend on any instance
	// writes them here, and the run's end adds them as a step.
	Injected []json.Value `json:"injected,omitempty"`
	// Trees are the last runs' namespaces with their latest lifecycle
	// statuses (agent.getTree, subscription.reconnect), oldest first, at
	// most maxRunTrees.
	Trees []runTree `json:"trees,omitempty"`
}

// runTree is a run's namespaces and the latest lifecycle status of each,
// in the order they first came.
type runTree struct {
	Run    string     `json:"run"`
	NS     [][]string `json:"ns"`
	Status []string   `json:"status"`
}

const (
	maxRunTrees       = 32
	maxNamespacesKept = 1024
)

// noteStatus records a lifecycle status of a run's namespace.
func (rec *threadRecord) noteStatus(run string, ns []string, status string) {
	i := slices.IndexFunc(rec.Trees, func(t runTree) bool { return t.Run == run })
	if i < 0 {
		if len(rec.Trees) == maxRunTrees {
			rec.Trees = slices.Delete(rec.Trees, 0, 1)
		}
		rec.Trees = append(rec.Trees, runTree{Run: run})
		i = len(rec.Trees) - 1
	}
	t := &rec.Trees[i]
	if j := slices.IndexFunc(t.NS, func(n []string) bool { return slices.Equal(n, ns) }); j >= 0 {
		t.Status[j] = status
		return
	}
	if len(t.NS) < maxNamespacesKept {
		t.NS = append(t.NS, slices.Clone(ns))
		t.Status = append(t.Status, status)
	}
}

// ended reports whether the record shows run ended: its root's status is
// terminal.
func (rec *threadRecord) ended(run string) bool {
	t := rec.tree(run)
	if t == nil {
		return false
	}
	for i, ns := range t.NS {
		if len(ns) == 0 {
			switch t.Status[i] {
			case "completed", "failed", "interrupted":
				return true
			}
		}
	}
	return false
}

// tree returns the run's tree, the last run's for "", or nil.
func (rec *threadRecord) tree(run string) *runTree {
	for i := len(rec.Trees) - 1; i >= 0; i-- {
		if run == "" || rec.Trees[i].Run == run {
			return &rec.Trees[i]
		}
	}
	return nil
}

// checkpointRec is one saved step: its place in the tree and the full values.
// It never changes once made, so it is written to the store once (saved);
// its values are let go then (a fork reads them back).
type checkpointRec struct {
	ID     string                `json:"id"`
	Parent string                `json:"parent_id,omitempty"`
	Step   int64                 `json:"step"`
	Source string                `json:"source"`
	Node   string                `json:"node,omitempty"`
	Time   time.Time             `json:"time"`
	Values map[string]json.Value `json:"values,omitzero"` // none in the head's list
	saved  bool                  // it is in the store
}

// interruptRec is a pending input request.
type interruptRec struct {
	ID        string     `json:"id"`
	Namespace []string   `json:"namespace"`
	Payload   json.Value `json:"payload"`
	Run       string     `json:"run"`
}

// Run modes: undecided until the first event that is not a lifecycle one.
const (
	modeUndecided = iota
	modeRuntime   // the bridge keeps the state
	modeAgent     // the backend reports its own state
)

// passthroughExt marks the events of the agent backend: their state is the
// upstream agent's.
const passthroughExt = "agent.passthrough"

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

// valuesJSON is the state as a JSON object, keys sorted (of keys, when
// not nil). A state is made whole in one array: grown by append, a
// conversation's values left twice their size behind them at each step.
func valuesJSON(v map[string]json.Value, keys []string) []byte {
	b := make([]byte, 0, stateBytes(v)+2)
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

// inputMessage is a message dict made of an input string.
type inputMessage struct {
	Type    string `json:"type"`
	Content string `json:"content"`
	ID      string `json:"id"`
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
		return appendJSON(nil, &inputMessage{Type: "human", Content: s, ID: id}), nil
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

// unionMessagesList unions two lists of messages by id (a message without
// an id by its bytes), theirs first.
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
