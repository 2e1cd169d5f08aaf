package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// maxInjected bounds the messages waiting in a thread's record for its
// run's end.
const maxInjected = 128

// inputInject adds a message to the thread's state: at the end of the run
// going on (the message waits in the thread's record, which the runtime
// reads as it saves), or at once, as an update run, when none goes on.
func (f *Frontend) inputInject(c *cmdCtx, p params) ([]byte, *protoError) {
	ns, _, ok := p.namespace("namespace")
	if !ok {
		return nil, perr(errInvalidArgument, "input.inject: namespace must be an array of strings.")
	}
	if len(ns) > 0 {
		return nil, perr(errNoSuchNamespace, fmt.Sprintf("input.inject: namespace %q is not in the agent tree (the bridge runtime has only the root).", strings.Join(ns, "/")))
	}
	m, ok := p.object("message")
	if !ok || m == nil {
		return nil, perr(errInvalidArgument, "input.inject requires a message object.")
	}
	var role, content string
	if json.Unmarshal(m["role"], &role, peerJSON) != nil || (role != "user" && role != "system") {
		return nil, perr(errInvalidArgument, `input.inject: message.role must be "user" or "system".`)
	}
	if json.Unmarshal(m["content"], &content, peerJSON) != nil {
		return nil, perr(errInvalidArgument, "input.inject: message.content must be a string.")
	}
	msg, pe := normalizeMessage([]byte(p["message"]), "inject-"+newRunID())
	if pe != nil {
		pe.Message = "input.inject: message: " + pe.Message
		return nil, pe
	}
	for attempt := 0; c.rec.Status == "running" && attempt < 5; attempt++ {
		if len(c.rec.Injected) >= maxInjected {
			return nil, perr(errInvalidArgument, "input.inject: too many messages injected into the active run.")
		}
		err := f.putInjected(c, msg)
		if err == nil {
			return []byte(`{}`), nil
		}
		if canonical.CodeOf(err) != canonical.CodeAborted {
			return nil, asProtoError(err)
		}
		// The runtime saved meanwhile: read again (the run may have ended).
		rec, rev, err := f.readState(c.ctx, c.thread)
		if err != nil {
			return nil, asProtoError(err)
		}
		c.rec, c.rev = rec, rev
	}
	req := newRequest(c.rec.Assistant)
	input := append(append([]byte(`{"messages":[`), msg...), "]}"...)
	if pe := f.startRun(c, req, runtimeOptions{Update: true, Input: input, Assistant: c.rec.Assistant}); pe != nil {
		return nil, pe
	}
	return []byte(`{}`), nil
}

// putInjected writes msg into the thread's record, over the revision it
// was read at.
func (f *Frontend) putInjected(c *cmdCtx, msg json.Value) error {
	rec := *c.rec
	rec.Injected = append(slices.Clip(rec.Injected), msg)
	head, err := encodeHead(&rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, f.cfg.StoreTimeout)
	defer cancel()
	_, err = f.cfg.Store.Put(ctx, c.thread, headKey, head, c.rev)
	return err
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

func stateGet(c *cmdCtx, p params) ([]byte, *protoError) {
	if !p.has("namespace") { // required by the CDDL, unlike state.listCheckpoints'
		return nil, perr(errInvalidArgument, "state.get requires a namespace (an array of strings; [] for the root).")
	}
	if pe := rootOnly("state.get", p); pe != nil {
		return nil, pe
	}
	var keys []string
	if p.has("keys") && !decodeInto(p["keys"], &keys) {
		return nil, perr(errInvalidArgument, "state.get: keys must be an array of strings.")
	}
	if keys == nil && p.has("keys") {
		keys = []string{}
	}
	res := &stateResult{Values: valuesJSON(c.rec.Values, keys)}
	if h := c.rec.Head; h != "" {
		res.Checkpoint = &checkpointRef{ID: h} // state.get reads the root: ns ""
	}
	return appendJSON(nil, res), nil
}

func listCheckpoints(c *cmdCtx, p params) ([]byte, *protoError) {
	if pe := rootOnly("state.listCheckpoints", p); pe != nil {
		return nil, pe
	}
	limit := uint64(1 << 31)
	if p.has("limit") {
		l, ok := uintParam(p["limit"])
		if !ok {
			return nil, perr(errInvalidArgument, "state.listCheckpoints: limit must be a non-negative integer.")
		}
		limit = l
	}
	before, _, ok := p.str("before")
	if !ok {
		return nil, perr(errInvalidArgument, "state.listCheckpoints: before must be a string.")
	}
	cps := c.rec.Checkpoints
	end := len(cps)
	if before != "" {
		i := slices.IndexFunc(cps, func(cp checkpointRec) bool { return cp.ID == before })
		if i < 0 {
			return nil, perr(errNoSuchCheckpoint, fmt.Sprintf("state.listCheckpoints: before %q is not a checkpoint of thread %q.", before, c.thread))
		}
		end = i
	}
	res := &checkpointsResult{Checkpoints: []checkpointSummary{}}
	for i := end - 1; i >= 0 && uint64(len(res.Checkpoints)) < limit; i-- {
		cp := &cps[i]
		res.Checkpoints = append(res.Checkpoints, checkpointSummary{
			ID: cp.ID, Timestamp: cp.Time.Format(time.RFC3339Nano),
			Step: max(cp.Step, 0), // CheckpointSummary.step is a uint
			Node: cp.Node, Metadata: checkpointMeta{Source: cp.Source, Step: cp.Step, ParentID: cp.Parent},
		})
	}
	return appendJSON(nil, res), nil
}

func getTree(c *cmdCtx, p params) ([]byte, *protoError) {
	runID, _, ok := p.str("run_id")
	if !ok {
		return nil, perr(errInvalidArgument, "agent.getTree: run_id must be a string.")
	}
	t := c.rec.tree(runID)
	if t == nil {
		if runID != "" {
			return nil, perr(errNoSuchRun, fmt.Sprintf("agent.getTree: no run %q on thread %q.", runID, c.thread))
		}
		return nil, perr(errNoSuchRun, fmt.Sprintf("agent.getTree: thread %q has no run.", c.thread))
	}
	return appendJSON(nil, &treeResult{Tree: treeOf(t, []string{}, c.rec.Assistant)}), nil
}
