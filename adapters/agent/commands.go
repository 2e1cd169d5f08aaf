package agent

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// command is a decoded Command envelope (section 3.1).
type command struct {
	id     uint64
	method string
	params params
}

// Messages the JS reference server sends for malformed commands.
const (
	msgInvalidJSON   = "Protocol commands must be valid JSON."
	msgMissingFields = "Protocol commands must include an integer id and string method."
)

// parseCommand decodes a command. A failure to read the envelope (invalid
// JSON, no integer id or string method) has id -1: it is transport-level on
// HTTP and an error frame with "id": null on a WebSocket, as the JS server
// answers. Params that are not an object are answered with the id.
func parseCommand(data []byte) (*command, int64, *protoError) {
	var env struct {
		ID     json.Value `json:"id"`
		Method json.Value `json:"method"`
		Params json.Value `json:"params"`
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &env, peerJSON) != nil {
		return nil, -1, perr(errInvalidArgument, msgInvalidJSON)
	}
	id, ok := uintParam(env.ID)
	var method string
	if !ok || json.Unmarshal(env.Method, &method, peerJSON) != nil || method == "" {
		return nil, -1, perr(errInvalidArgument, msgMissingFields)
	}
	p, ok := parseParams(env.Params)
	if !ok {
		return nil, int64(id), perr(errInvalidArgument, method+": params must be an object.")
	}
	return &command{id: id, method: method, params: p}, int64(id), nil
}

// successResponse is a CommandResponse (section 3.2).
type successResponse struct {
	Type   string       `json:"type"`
	ID     uint64       `json:"id"`
	Result json.Value   `json:"result"`
	Meta   responseMeta `json:"meta"`
}

// responseMeta is a CommandResponse's meta: the CDDL's ResponseMeta
// (applied_through_seq; Extensible) with the thread's id, as LangGraph
// (@langchain/langgraph-api 1.5.1, protocol/service.mjs) sends it.
type responseMeta struct {
	ThreadID          string `json:"thread_id,omitempty"`
	AppliedThroughSeq uint64 `json:"applied_through_seq"`
}

// successFrame is a CommandResponse on thread with result, a JSON object,
// and meta {thread_id, applied_through_seq}.
func successFrame(id uint64, result []byte, thread string, applied uint64) []byte {
	return appendJSON(nil, &successResponse{Type: "success", ID: id, Result: result, Meta: responseMeta{thread, applied}})
}

// errorResponse is an ErrorResponse (section 3.3); id is null for a
// command whose id could not be read, extra holds the members a gap
// report adds.
type errorResponse struct {
	Type    string           `json:"type"`
	ID      *int64           `json:"id"`
	Error   string           `json:"error"`
	Message string           `json:"message"`
	Extra   map[string]int64 `json:",embed"`
}

// errorFrame is an ErrorResponse; id < 0 is null.
func errorFrame(id int64, e *protoError) []byte {
	r := &errorResponse{Type: "error", Error: e.Code, Message: e.Message}
	if id >= 0 {
		r.ID = &id
	}
	if len(e.Extra) > 0 {
		r.Extra = make(map[string]int64, len(e.Extra))
		for _, x := range e.Extra {
			r.Extra[x.Key] = x.Value
		}
	}
	return appendJSON(nil, r)
}

// gapError is the in-band report of events no longer buffered (section 6.2).
func gapError(g *gap) *protoError {
	return &protoError{
		Code:    errInvalidArgument,
		Message: fmt.Sprintf("events after seq %d are no longer buffered", g.since),
		Extra:   []extraField{{"since", int64(g.since)}, {"min_available_seq", int64(g.minAvail)}},
	}
}

// knownMethods are the commands of the protocol (CDDL CommandData).
var knownMethods = map[string]bool{
	"run.start": true, "subscription.subscribe": true, "subscription.unsubscribe": true,
	"subscription.reconnect": true, "agent.getTree": true, "input.respond": true,
	"input.inject": true, "state.get": true, "state.listCheckpoints": true, "state.fork": true,
}

// execute runs a command that is not a subscription command on thread
// and returns the result object and the thread's last seq as the command
// found it (applied_through_seq).
func (f *Frontend) execute(ctx context.Context, thread string, cmd *command) ([]byte, uint64, *protoError) {
	if !knownMethods[cmd.method] {
		return nil, 0, perr(errUnknownCommand, "Unknown protocol command: "+cmd.method)
	}
	switch cmd.method {
	case "subscription.subscribe", "subscription.unsubscribe", "subscription.reconnect":
		return nil, 0, perr(errNotSupported, cmd.method+" is a WebSocket command; over HTTP each POST /threads/{thread_id}/stream/events request is one subscription.")
	}
	if cmd.method == "run.start" {
		if err := f.checkThread(ctx, thread); err != nil { // claims a new thread
			return nil, 0, asProtoError(err)
		}
	}
	rec, rev, err := f.readState(ctx, thread)
	if err != nil {
		return nil, 0, asProtoError(err)
	}
	if rec == nil && cmd.method != "run.start" {
		// Another key's thread reads as one nobody used.
		return nil, 0, perr(errNoSuchRun, "thread not found: no run has started on it")
	}
	applied, err := f.cfg.Observer.LastSeq(ctx, thread)
	if err != nil {
		return nil, 0, asProtoError(err)
	}
	c := &cmdCtx{ctx: ctx, thread: thread, rec: rec, rev: rev, who: canonical.PrincipalFrom(ctx)}
	var result []byte
	var pe *protoError
	switch cmd.method {
	case "run.start":
		result, pe = f.runStart(c, cmd.params)
	case "input.respond":
		result, pe = f.inputRespond(c, cmd.params)
	case "input.inject":
		result, pe = f.inputInject(c, cmd.params)
	case "state.get":
		result, pe = stateGet(c, cmd.params)
	case "state.listCheckpoints":
		result, pe = listCheckpoints(c, cmd.params)
	case "state.fork":
		result, pe = f.stateFork(c, cmd.params)
	case "agent.getTree":
		result, pe = getTree(c, cmd.params)
	default:
		pe = perr(errNotSupported, cmd.method+" is not supported")
	}
	return result, applied, pe
}

// cmdCtx is what a command works on: the thread's record as the store
// has it (nil: none yet) and its revision, and the caller.
type cmdCtx struct {
	ctx    context.Context
	thread string
	rec    *threadRecord
	rev    uint64
	who    *canonical.Principal
}

// running reports whether the thread has a run going on, here or on
// another instance (the store says so), or waiting for its turn here.
// A run started here counts until the thread's record shows its end, not
// until drain reads that end: the runtime saves the end before the end
// takes its seq, and a client that saw it in the thread may ask again
// before drain's goroutine runs.
func (f *Frontend) running(c *cmdCtx) bool {
	if c.rec != nil && c.rec.Status == "running" {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queued[c.thread] == 0 {
		return false
	}
	for id, lr := range f.runs {
		if lr.thread == c.thread && (c.rec == nil || !c.rec.ended(id)) {
			return true
		}
	}
	return false
}

// runOptions reads config, metadata and the fork target shared by run.start,
// input.respond and state.fork into req.
func runOptions(cmd string, p params, req *canonical.Request) (fork string, pe *protoError) {
	cfg, ok := p.object("config")
	if !ok {
		return "", perr(errInvalidArgument, cmd+": config must be an object.")
	}
	if cfg != nil {
		req.Extensions["agent.config"] = rawValue(p["config"])
		if raw, ok := cfg["configurable"]; ok && string(raw) != "null" {
			var c map[string]json.Value
			if json.Unmarshal(raw, &c, peerJSON) != nil {
				return "", perr(errInvalidArgument, cmd+": config.configurable must be an object.")
			}
			for k, v := range c {
				switch {
				case k == "checkpoint_id":
					if json.Unmarshal(v, &fork, peerJSON) != nil {
						return "", perr(errInvalidArgument, cmd+": config.configurable.checkpoint_id must be a string.")
					}
				case k == "thread_id" || k == "checkpoint_ns" || k == "checkpoint_map" || strings.HasPrefix(k, "__"):
				default:
					if pv := rawValue(v); pv != nil {
						req.Parameters[k] = pv
					}
				}
			}
		}
	}
	md, ok := p.object("metadata")
	if !ok {
		return "", perr(errInvalidArgument, cmd+": metadata must be an object.")
	}
	if md != nil {
		req.Extensions["agent.metadata"] = rawValue(p["metadata"])
		for k, v := range md {
			var s string
			if json.Unmarshal(v, &s, peerJSON) == nil {
				req.Metadata[k] = s
			}
		}
	}
	return fork, nil
}

func newRequest(target string) *canonical.Request {
	return &canonical.Request{Target: target, Parameters: map[string]*structpb.Value{}, Metadata: map[string]string{}, Extensions: map[string]*structpb.Value{}}
}

// The results of the commands above.
type (
	runResult struct {
		RunID    string `json:"run_id"`
		ThreadID string `json:"thread_id,omitempty"`
	}
	stateResult struct {
		Values     json.Value     `json:"values"`
		Checkpoint *checkpointRef `json:"checkpoint,omitzero"`
	}
	// checkpointRef is the CDDL's CheckpointRef {id, ns?} with ns always
	// written, as LangGraph's state.get writes it ("" for the root).
	checkpointRef struct {
		ID string `json:"id"`
		NS string `json:"ns"`
	}
	checkpointsResult struct {
		Checkpoints []checkpointSummary `json:"checkpoints"`
	}
	checkpointSummary struct {
		ID        string         `json:"id"`
		Timestamp string         `json:"timestamp"`
		Step      int64          `json:"step"`
		Node      string         `json:"node_name,omitempty"`
		Metadata  checkpointMeta `json:"metadata"`
	}
	checkpointMeta struct {
		Source   string `json:"source"`
		Step     int64  `json:"step"`
		ParentID string `json:"parent_id,omitempty"`
	}
	treeResult struct {
		Tree *treeNode `json:"tree"`
	}
	// treeNode is an AgentTreeNode.
	treeNode struct {
		Namespace []string    `json:"namespace"`
		Status    string      `json:"status"`
		GraphName string      `json:"graph_name"`
		Children  []*treeNode `json:"children,omitempty"`
	}
)

// treeOf is the AgentTreeNode of a run's namespace ns and those under it;
// a namespace's graph is its last segment up to a ':', the root's graph.
func treeOf(t *runTree, ns []string, graph string) *treeNode {
	n := &treeNode{Namespace: ns, Status: "running", GraphName: graph}
	if i := slices.IndexFunc(t.NS, func(x []string) bool { return slices.Equal(x, ns) }); i >= 0 {
		n.Status = t.Status[i]
	}
	if len(ns) > 0 {
		n.GraphName, _, _ = strings.Cut(ns[len(ns)-1], ":")
	}
	for _, c := range t.NS {
		if len(c) == len(ns)+1 && slices.Equal(c[:len(ns)], ns) {
			n.Children = append(n.Children, treeOf(t, c, ""))
		}
	}
	return n
}
