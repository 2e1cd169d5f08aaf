package agent

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// command is a decoded Command envelope (section 3.1).
type command struct {
	id     uint64
	method string
	params params
	raw    []byte // the command as received, to forward it
	// who sent it (nil when auth is off): runs it starts are the caller's,
	// held to its API key's targets and max_runs by the bridge.
	principal *canonical.Principal
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
	return &command{id: id, method: method, params: p, raw: data}, int64(id), nil
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

// execute runs a command that is not a subscription command on thread th
// (nil when the thread is unknown) and returns the result object and the
// applied-through seq.
func (f *Frontend) execute(th *Thread, cmd *command) ([]byte, uint64, *protoError) {
	if !knownMethods[cmd.method] {
		return nil, 0, perr(errUnknownCommand, "Unknown protocol command: "+cmd.method)
	}
	if th == nil {
		return nil, 0, perr(errNoSuchRun, "thread not found: no run has started on it")
	}
	switch cmd.method {
	case "subscription.subscribe", "subscription.unsubscribe", "subscription.reconnect":
		return nil, 0, perr(errNotSupported, cmd.method+" is a WebSocket command; over HTTP each POST /threads/{thread_id}/stream/events request is one subscription.")
	}
	// The instance running the thread's runs executes it, so runs queue
	// in one place and state is read where it is kept. If none does, it
	// runs here on the latest record, read meanwhile (two NATS round
	// trips, 140 and 200 µs here unloaded, then take the time of one; the
	// read is wasted when another instance answers). Alone, or running the
	// thread, this instance has neither to do.
	if f.cfg.Cluster == nil || th.owned() {
		return f.executeLocal(th, cmd)
	}
	fetched := make(chan *storedHead, 1)
	go func() { fetched <- f.fetchRecord(th) }()
	result, applied, pe, ok := f.forward(th, cmd.raw, cmd.principal)
	e := <-fetched
	if ok {
		// Executed by the owner: its events reach this copy by mirror. The
		// record read meanwhile is not merged: saved by a run the command
		// started, it is ahead of events still on their way here, and would
		// restart the buffer past them.
		return result, applied, pe
	}
	f.applyRecord(th, e)
	return f.executeLocal(th, cmd)
}

// executeLocal executes a command on this instance's copy of the thread.
func (f *Frontend) executeLocal(th *Thread, cmd *command) ([]byte, uint64, *protoError) {
	defer th.settleSub()
	switch cmd.method {
	case "run.start":
		return f.runStart(th, cmd.params, cmd.principal)
	case "subscription.subscribe", "subscription.unsubscribe", "subscription.reconnect", cancelMethod:
		return nil, 0, perr(errNotSupported, cmd.method+" cannot be forwarded")
	}
	th.mu.Lock()
	known := th.rt.known
	th.mu.Unlock()
	if !known {
		return nil, 0, perr(errNoSuchRun, "thread "+strconv.Quote(th.id)+" has no run")
	}
	switch cmd.method {
	case "input.respond":
		return f.inputRespond(th, cmd.params, cmd.principal)
	case "input.inject":
		return f.inputInject(th, cmd.params)
	case "state.get":
		return f.stateGet(th, cmd.params)
	case "state.listCheckpoints":
		return f.listCheckpoints(th, cmd.params)
	case "state.fork":
		return f.stateFork(th, cmd.params, cmd.principal)
	case "agent.getTree":
		return f.getTree(th, cmd.params)
	}
	return nil, 0, perr(errNotSupported, cmd.method+" is not supported")
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

func (f *Frontend) runStart(th *Thread, p params, who *canonical.Principal) ([]byte, uint64, *protoError) {
	assistant, present, ok := p.str("assistant_id")
	if !ok {
		return nil, 0, perr(errInvalidArgument, "run.start: assistant_id must be a string.")
	}
	if !present || assistant == "" {
		return nil, 0, perr(errInvalidArgument, "run.start requires an assistant_id.")
	}
	if _, ok := canonical.VisibleTarget(f.cfg.Runner, who, assistant); !ok {
		return nil, 0, perr(errInvalidArgument, fmt.Sprintf("run.start: unknown assistant_id %q (no route serves it, or the API key may not use it).", assistant))
	}
	strategy, _, ok := p.str("multitask_strategy")
	if !ok {
		return nil, 0, perr(errInvalidArgument, "run.start: multitask_strategy must be a string.")
	}
	switch strategy {
	case "":
		strategy = "enqueue"
	case "reject", "rollback", "interrupt", "enqueue":
	default:
		return nil, 0, perr(errInvalidArgument, fmt.Sprintf("run.start: multitask_strategy %q is not one of reject, rollback, interrupt, enqueue.", strategy))
	}
	input := p["input"]
	pr := &pendingRun{id: newRunID(), req: newRequest(assistant), principal: who}
	fork, pe := runOptions("run.start", p, pr.req)
	if pe != nil {
		return nil, 0, pe
	}
	if input != nil {
		pr.req.Extensions["agent.input"] = rawValue(input)
	}

	th.mu.Lock()
	applied := th.seq
	rt := &th.rt
	if rt.rec.Assistant != "" && rt.rec.Assistant != assistant {
		th.mu.Unlock()
		return nil, 0, perr(errInvalidArgument, fmt.Sprintf("run.start: thread %q is bound to assistant %q, not %q.", th.id, rt.rec.Assistant, assistant))
	}
	if fork != "" && th.rt.findCheckpoint(fork) == nil {
		th.mu.Unlock()
		return nil, 0, perr(errNoSuchCheckpoint, fmt.Sprintf("run.start: config.configurable.checkpoint_id %q is not a checkpoint of thread %q.", fork, th.id))
	}
	pr.fork = fork
	hasInput := len(bytes.TrimSpace(input)) > 0 && string(bytes.TrimSpace(input)) != "null"
	if len(rt.rec.Interrupts) > 0 && hasInput && rt.active == nil && fork == "" {
		// Resume: the input is the resume value of every pending interrupt.
		v := rawValue(input)
		pr.req.Resume = map[string]*structpb.Value{}
		for _, in := range rt.rec.Interrupts {
			pr.req.Resume[in.ID] = v
			pr.answered = append(pr.answered, in.ID)
		}
	} else {
		msgs, update, pe := inputMessages([]byte(input), pr.id+"-input-")
		if pe != nil {
			th.mu.Unlock()
			pe.Message = "run.start: " + pe.Message
			return nil, 0, pe
		}
		pr.input, pr.update = msgs, update
	}
	rt.rec.Assistant = assistant
	pe = th.submitLocked(pr, strategy)
	th.mu.Unlock()
	if pe != nil {
		return nil, 0, pe
	}
	th.saveSoon()
	return appendJSON(nil, &runResult{RunID: pr.id}), applied, nil
}

// submitLocked starts pr, or queues it behind the active run according to
// the multitask strategy.
func (t *Thread) submitLocked(pr *pendingRun, strategy string) *protoError {
	rt := &t.rt
	if rt.active == nil && len(rt.queue) == 0 {
		return t.startRunLocked(pr)
	}
	switch strategy {
	case "reject":
		return perr(errInvalidArgument, fmt.Sprintf("thread %q already has an active run (multitask_strategy reject).", t.id))
	case "interrupt", "rollback":
		if strategy == "rollback" && rt.active != nil {
			pr.fork = rt.active.head
		}
		if rt.active != nil {
			rt.active.cancel()
		}
		rt.queue = append([]*pendingRun{pr}, rt.queue...)
	default:
		if len(rt.queue) >= t.f.cfg.MaxQueuedRuns {
			return perr(errInvalidArgument, fmt.Sprintf("thread %q has %d queued runs (MaxQueuedRuns).", t.id, len(rt.queue)))
		}
		rt.queue = append(rt.queue, pr)
	}
	return nil
}

// respondEntry is one answered interrupt.
type respondEntry struct {
	id       string
	response json.Value
}

func (f *Frontend) inputRespond(th *Thread, p params, who *canonical.Principal) ([]byte, uint64, *protoError) {
	var entries []respondEntry
	if p.has("responses") {
		var list []json.Value
		if !decodeInto(p["responses"], &list) || len(list) == 0 {
			return nil, 0, perr(errInvalidArgument, "input.respond: responses must be a non-empty array.")
		}
		for i, raw := range list {
			ep, ok := parseParams(raw)
			if !ok {
				return nil, 0, perr(errInvalidArgument, fmt.Sprintf("input.respond: responses[%d] must be an object.", i))
			}
			id, present, ok := ep.str("interrupt_id")
			if !ok || !present || id == "" {
				return nil, 0, perr(errInvalidArgument, fmt.Sprintf("input.respond: responses[%d].interrupt_id must be a non-empty string.", i))
			}
			if _, _, ok := ep.namespace("namespace"); !ok {
				return nil, 0, perr(errInvalidArgument, fmt.Sprintf("input.respond: responses[%d].namespace must be an array of strings.", i))
			}
			entries = append(entries, respondEntry{id: id, response: ep["response"]})
		}
	} else {
		id, present, ok := p.str("interrupt_id")
		if !ok {
			return nil, 0, perr(errInvalidArgument, "input.respond: interrupt_id must be a string.")
		}
		if !present || id == "" {
			return nil, 0, perr(errInvalidArgument, "input.respond requires an interrupt_id.")
		}
		if _, _, ok := p.namespace("namespace"); !ok {
			return nil, 0, perr(errInvalidArgument, "input.respond: namespace must be an array of strings.")
		}
		entries = append(entries, respondEntry{id: id, response: p["response"]})
	}
	update, ok := p.object("update")
	if !ok {
		return nil, 0, perr(errInvalidArgument, "input.respond: update must be an object.")
	}

	th.mu.Lock()
	applied := th.seq
	rt := &th.rt
	pr := &pendingRun{id: newRunID(), req: newRequest(rt.rec.Assistant), principal: who}
	if _, pe := runOptions("input.respond", p, pr.req); pe != nil {
		th.mu.Unlock()
		return nil, 0, pe
	}
	if g, ok := p["goto"]; ok {
		pr.req.Extensions["agent.goto"] = rawValue(g)
	}
	if rt.rec.Runs == 0 {
		th.mu.Unlock()
		return nil, 0, perr(errNoSuchRun, fmt.Sprintf("input.respond: thread %q has no run.", th.id))
	}
	if rt.active != nil || len(rt.rec.Interrupts) == 0 {
		th.mu.Unlock()
		return nil, 0, perr(errInvalidArgument, fmt.Sprintf("input.respond: thread %q is not interrupted.", th.id))
	}
	pr.req.Resume = map[string]*structpb.Value{}
	for _, e := range entries {
		if !slices.ContainsFunc(rt.rec.Interrupts, func(i interruptRec) bool { return i.ID == e.id }) {
			th.mu.Unlock()
			return nil, 0, perr(errNoSuchInterrupt, fmt.Sprintf("input.respond: no pending interrupt %q on thread %q.", e.id, th.id))
		}
		v := rawValue(e.response)
		if v == nil {
			v = structpb.NewNullValue()
		}
		pr.req.Resume[e.id] = v
		pr.answered = append(pr.answered, e.id)
	}
	if update != nil {
		msgs, upd, pe := inputMessages([]byte(p["update"]), pr.id+"-update-")
		if pe != nil {
			th.mu.Unlock()
			pe.Message = "input.respond: update: " + pe.Message
			return nil, 0, pe
		}
		pr.input, pr.update = msgs, upd
	}
	pe := th.submitLocked(pr, "reject")
	th.mu.Unlock()
	if pe != nil {
		return nil, 0, pe
	}
	th.persist()
	return []byte(`{}`), applied, nil
}

func (f *Frontend) inputInject(th *Thread, p params) ([]byte, uint64, *protoError) {
	ns, _, ok := p.namespace("namespace")
	if !ok {
		return nil, 0, perr(errInvalidArgument, "input.inject: namespace must be an array of strings.")
	}
	if len(ns) > 0 {
		return nil, 0, perr(errNoSuchNamespace, fmt.Sprintf("input.inject: namespace %q is not in the agent tree (the bridge runtime has only the root).", strings.Join(ns, "/")))
	}
	m, ok := p.object("message")
	if !ok || m == nil {
		return nil, 0, perr(errInvalidArgument, "input.inject requires a message object.")
	}
	var role, content string
	if json.Unmarshal(m["role"], &role, peerJSON) != nil || (role != "user" && role != "system") {
		return nil, 0, perr(errInvalidArgument, `input.inject: message.role must be "user" or "system".`)
	}
	if json.Unmarshal(m["content"], &content, peerJSON) != nil {
		return nil, 0, perr(errInvalidArgument, "input.inject: message.content must be a string.")
	}
	th.mu.Lock()
	applied := th.seq
	msg, pe := normalizeMessage([]byte(p["message"]), "inject-"+newRunID())
	if pe != nil {
		th.mu.Unlock()
		pe.Message = "input.inject: message: " + pe.Message
		return nil, 0, pe
	}
	if th.rt.active != nil {
		if len(th.rt.injected) >= th.f.cfg.MaxQueuedRuns*16 {
			th.mu.Unlock()
			return nil, 0, perr(errInvalidArgument, "input.inject: too many messages injected into the active run.")
		}
		th.rt.injected = append(th.rt.injected, msg)
		th.mu.Unlock()
		return []byte(`{}`), applied, nil
	}
	// append to an empty copy: a list of runtime's message type, which
	// this file does not name.
	th.rt.addMessages(append(th.rt.injected[:0:0], msg), nil, "__input__", "update", th.rt.rec.LastRun)
	th.mu.Unlock()
	th.persist()
	return []byte(`{}`), applied, nil
}

// rootOnly checks a state command's namespace.
func rootOnly(cmd string, p params) *protoError {
	ns, _, ok := p.namespace("namespace")
	if !ok {
		return perr(errInvalidArgument, cmd+": namespace must be an array of strings.")
	}
	if len(ns) > 0 {
		return perr(errNoSuchNamespace, fmt.Sprintf("%s: namespace %q has no state of its own.", cmd, strings.Join(ns, "/")))
	}
	return nil
}

func (f *Frontend) stateGet(th *Thread, p params) ([]byte, uint64, *protoError) {
	if !p.has("namespace") { // required by the CDDL, unlike state.listCheckpoints'
		return nil, 0, perr(errInvalidArgument, "state.get requires a namespace (an array of strings; [] for the root).")
	}
	if pe := rootOnly("state.get", p); pe != nil {
		return nil, 0, pe
	}
	var keys []string
	if p.has("keys") && !decodeInto(p["keys"], &keys) {
		return nil, 0, perr(errInvalidArgument, "state.get: keys must be an array of strings.")
	}
	if keys == nil && p.has("keys") {
		keys = []string{}
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	res := &stateResult{Values: valuesJSON(th.rt.rec.Values, keys)}
	if h := th.rt.rec.Head; h != "" {
		res.Checkpoint = &checkpointRef{ID: h} // state.get reads the root: ns ""
	}
	return appendJSON(nil, res), th.seq, nil
}

func (f *Frontend) listCheckpoints(th *Thread, p params) ([]byte, uint64, *protoError) {
	if pe := rootOnly("state.listCheckpoints", p); pe != nil {
		return nil, 0, pe
	}
	limit := uint64(1 << 31)
	if p.has("limit") {
		l, ok := uintParam(p["limit"])
		if !ok {
			return nil, 0, perr(errInvalidArgument, "state.listCheckpoints: limit must be a non-negative integer.")
		}
		limit = l
	}
	before, _, ok := p.str("before")
	if !ok {
		return nil, 0, perr(errInvalidArgument, "state.listCheckpoints: before must be a string.")
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	cps := th.rt.rec.Checkpoints
	end := len(cps)
	if before != "" {
		i := slices.IndexFunc(cps, func(c checkpointRec) bool { return c.ID == before })
		if i < 0 {
			return nil, 0, perr(errNoSuchCheckpoint, fmt.Sprintf("state.listCheckpoints: before %q is not a checkpoint of thread %q.", before, th.id))
		}
		end = i
	}
	res := &checkpointsResult{Checkpoints: []checkpointSummary{}}
	for i := end - 1; i >= 0 && uint64(len(res.Checkpoints)) < limit; i-- {
		c := &cps[i]
		res.Checkpoints = append(res.Checkpoints, checkpointSummary{
			ID: c.ID, Timestamp: c.Time.Format(time.RFC3339Nano),
			Step: max(c.Step, 0), // CheckpointSummary.step is a uint
			Node: c.Node, Metadata: checkpointMeta{Source: c.Source, Step: c.Step, ParentID: c.Parent},
		})
	}
	return appendJSON(nil, res), th.seq, nil
}

func (f *Frontend) stateFork(th *Thread, p params, who *canonical.Principal) ([]byte, uint64, *protoError) {
	id, present, ok := p.str("checkpoint_id")
	if !ok || !present || id == "" {
		return nil, 0, perr(errInvalidArgument, "state.fork requires a checkpoint_id string.")
	}
	th.mu.Lock()
	applied := th.seq
	assistant := th.rt.rec.Assistant
	pr := &pendingRun{id: newRunID(), req: newRequest(assistant), fork: id, principal: who}
	if _, pe := runOptions("state.fork", p, pr.req); pe != nil {
		th.mu.Unlock()
		return nil, 0, pe
	}
	pr.fork = id
	if th.rt.findCheckpoint(id) == nil {
		th.mu.Unlock()
		return nil, 0, perr(errNoSuchCheckpoint, fmt.Sprintf("state.fork: checkpoint %q is not a checkpoint of thread %q.", id, th.id))
	}
	if th.rt.rec.Agent {
		th.mu.Unlock()
		return nil, 0, perr(errNotSupported, "state.fork: the thread's state belongs to an agent backend, which forks itself.")
	}
	if input, ok := p["input"]; ok {
		pr.req.Extensions["agent.input"] = rawValue(input)
		msgs, update, pe := inputMessages([]byte(input), pr.id+"-input-")
		if pe != nil {
			th.mu.Unlock()
			pe.Message = "state.fork: " + pe.Message
			return nil, 0, pe
		}
		pr.input, pr.update = msgs, update
	}
	pe := th.submitLocked(pr, "reject")
	th.mu.Unlock()
	if pe != nil {
		return nil, 0, pe
	}
	th.persist()
	return appendJSON(nil, &runResult{RunID: pr.id, ThreadID: th.id}), applied, nil
}

func (f *Frontend) getTree(th *Thread, p params) ([]byte, uint64, *protoError) {
	runID, _, ok := p.str("run_id")
	if !ok {
		return nil, 0, perr(errInvalidArgument, "agent.getTree: run_id must be a string.")
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	ri := th.runInfo(runID)
	if ri == nil {
		if runID != "" {
			return nil, 0, perr(errNoSuchRun, fmt.Sprintf("agent.getTree: no run %q on thread %q.", runID, th.id))
		}
		return nil, 0, perr(errNoSuchRun, fmt.Sprintf("agent.getTree: thread %q has no run.", th.id))
	}
	return appendJSON(nil, &treeResult{Tree: treeOf(ri, []string{}, th.rt.rec.Assistant)}), th.seq, nil
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
func treeOf(ri *runInfo, ns []string, graph string) *treeNode {
	n := &treeNode{Namespace: ns, Status: "running", GraphName: graph}
	if s := ri.status[nsKey(ns)]; s != nil {
		n.Status = s.status
	}
	if len(ns) > 0 {
		n.GraphName, _, _ = strings.Cut(ns[len(ns)-1], ":")
	}
	for _, k := range ri.order {
		c := ri.status[k]
		if len(c.ns) == len(ns)+1 && slices.Equal(c.ns[:len(ns)], ns) {
			n.Children = append(n.Children, treeOf(ri, c.ns, ""))
		}
	}
	return n
}
