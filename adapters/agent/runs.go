package agent

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// localRun is a run this instance started: the bridge's stream of it,
// read to its end here (its events reach the thread's readers through the
// replay log), and how to cancel it.
type localRun struct {
	thread string
	cancel context.CancelFunc
}

// startRun starts req, a run of the agent runtime on c's thread, for the
// caller, and reads it to its end on a goroutine of its own. The runtime
// answers at once (the run waits for its turn there); what fails before
// that (unknown target, the caller's max_runs) is the command's error.
func (f *Frontend) startRun(c *cmdCtx, req *canonical.Request, opts runtimeOptions) *protoError {
	req.RunId, req.ThreadId, req.Runtime = newRunID(), c.thread, "agent"
	b, err := json.Marshal(&opts, peerJSON)
	if err != nil {
		return asProtoError(err)
	}
	req.Extensions[runtimeExt] = structpb.NewStringValue(string(b))
	f.mu.Lock()
	if f.queued[c.thread] >= f.cfg.MaxQueuedRuns {
		n := f.queued[c.thread]
		f.mu.Unlock()
		return perr(errInvalidArgument, fmt.Sprintf("thread %q has %d runs waiting or going on here (MaxQueuedRuns).", c.thread, n))
	}
	f.mu.Unlock()
	if !f.track() {
		return perr(errUnknownError, "the server is shutting down")
	}
	ctx, cancel := context.WithCancel(f.runCtx)
	if c.who != nil {
		ctx = canonical.WithPrincipal(ctx, c.who)
	}
	s, err := f.cfg.Runner.Run(ctx, req)
	if err != nil {
		cancel()
		f.wg.Done()
		return asProtoError(err)
	}
	lr := &localRun{thread: c.thread, cancel: cancel}
	f.mu.Lock()
	f.runs[req.RunId] = lr
	f.queued[c.thread]++
	f.mu.Unlock()
	go f.drain(req.RunId, lr, s)
	return nil
}

// drainDelay holds drain after a run's end: tests set it to show that a
// client does not depend on drain's pace. Zero here.
var drainDelay time.Duration

// drain reads a run started here to its end, then forgets it; running
// does not wait for that (a client reading the thread may see the end
// first).
func (f *Frontend) drain(id string, lr *localRun, s canonical.Stream) {
	defer f.wg.Done()
	ended, end := false, uint64(0) // end: the terminal event's seq
	for !ended {
		ev, err := s.Recv()
		if err != nil {
			break
		}
		if _, ended = canonical.TerminalOf(ev); ended {
			end = ev.GetSeq()
		}
	}
	if drainDelay > 0 {
		time.Sleep(drainDelay)
	}
	f.mu.Lock()
	delete(f.runs, id)
	if ended {
		f.ends.note(lr.thread, end, f.cfg.Now())
	}
	if f.queued[lr.thread]--; f.queued[lr.thread] <= 0 {
		delete(f.queued, lr.thread)
	}
	f.mu.Unlock()
	_ = s.Close()
	lr.cancel()
}

// cancelLocal cancels a run of thread started here; false when there is
// none of that id.
func (f *Frontend) cancelLocal(thread, run string) bool {
	f.mu.Lock()
	lr := f.runs[run]
	f.mu.Unlock()
	if lr == nil || lr.thread != thread {
		return false
	}
	lr.cancel()
	return true
}

// cancelActive cancels the thread's run going on and those waiting here:
// interrupt and rollback start theirs after them.
func (f *Frontend) cancelActive(c *cmdCtx) {
	f.mu.Lock()
	for _, lr := range f.runs {
		if lr.thread == c.thread {
			lr.cancel()
		}
	}
	f.mu.Unlock()
	if c.rec != nil && c.rec.Status == "running" && f.cfg.CancelRun != nil {
		f.cfg.CancelRun(c.thread, c.rec.LastRun)
	}
}

func (f *Frontend) runStart(c *cmdCtx, p params) ([]byte, *protoError) {
	assistant, present, ok := p.str("assistant_id")
	if !ok {
		return nil, perr(errInvalidArgument, "run.start: assistant_id must be a string.")
	}
	if !present || assistant == "" {
		return nil, perr(errInvalidArgument, "run.start requires an assistant_id.")
	}
	if _, ok := canonical.VisibleTarget(f.cfg.Runner, c.who, assistant); !ok {
		return nil, perr(errInvalidArgument, fmt.Sprintf("run.start: unknown assistant_id %q (no route serves it, or the API key may not use it).", assistant))
	}
	strategy, _, ok := p.str("multitask_strategy")
	if !ok {
		return nil, perr(errInvalidArgument, "run.start: multitask_strategy must be a string.")
	}
	switch strategy {
	case "":
		strategy = "enqueue"
	case "reject", "rollback", "interrupt", "enqueue":
	default:
		return nil, perr(errInvalidArgument, fmt.Sprintf("run.start: multitask_strategy %q is not one of reject, rollback, interrupt, enqueue.", strategy))
	}
	req := newRequest(assistant)
	fork, pe := runOptions("run.start", p, req)
	if pe != nil {
		return nil, pe
	}
	rec := c.rec
	if rec == nil {
		rec = &threadRecord{}
	}
	if rec.Assistant != "" && rec.Assistant != assistant {
		return nil, perr(errInvalidArgument, fmt.Sprintf("run.start: thread %q is bound to assistant %q, not %q.", c.thread, rec.Assistant, assistant))
	}
	if fork != "" && !slices.ContainsFunc(rec.Checkpoints, func(cp checkpointRec) bool { return cp.ID == fork }) {
		return nil, perr(errNoSuchCheckpoint, fmt.Sprintf("run.start: config.configurable.checkpoint_id %q is not a checkpoint of thread %q.", fork, c.thread))
	}
	input := p["input"]
	if input != nil {
		req.Extensions["agent.input"] = rawValue(input)
	}
	opts := runtimeOptions{Fork: fork, Assistant: assistant}
	busy := f.running(c)
	hasInput := len(bytes.TrimSpace(input)) > 0 && string(bytes.TrimSpace(input)) != "null"
	if len(rec.Interrupts) > 0 && hasInput && !busy && fork == "" {
		// Resume: the input is the resume value of every pending interrupt.
		v := rawValue(input)
		req.Resume = map[string]*structpb.Value{}
		for _, in := range rec.Interrupts {
			req.Resume[in.ID] = v
		}
	} else {
		if _, _, pe := inputMessages([]byte(input), "run-input-"); pe != nil {
			pe.Message = "run.start: " + pe.Message
			return nil, pe
		}
		opts.Input = input
	}
	if busy {
		switch strategy {
		case "reject":
			return nil, perr(errInvalidArgument, fmt.Sprintf("thread %q already has an active run (multitask_strategy reject).", c.thread))
		case "rollback":
			if opts.Fork == "" && rec.Status == "running" {
				opts.Fork = rec.RunHead
			}
			f.cancelActive(c)
		case "interrupt":
			f.cancelActive(c)
		}
	}
	if pe := f.startRun(c, req, opts); pe != nil {
		return nil, pe
	}
	return appendJSON(nil, &runResult{RunID: req.RunId}), nil
}

// respondEntry is one answered interrupt.
type respondEntry struct {
	id       string
	response json.Value
}

// respondEntries reads input.respond's answers: a responses array, or
// one interrupt_id and response.
func respondEntries(p params) ([]respondEntry, *protoError) {
	if !p.has("responses") {
		id, present, ok := p.str("interrupt_id")
		if !ok {
			return nil, perr(errInvalidArgument, "input.respond: interrupt_id must be a string.")
		}
		if !present || id == "" {
			return nil, perr(errInvalidArgument, "input.respond requires an interrupt_id.")
		}
		if _, _, ok := p.namespace("namespace"); !ok {
			return nil, perr(errInvalidArgument, "input.respond: namespace must be an array of strings.")
		}
		return []respondEntry{{id: id, response: p["response"]}}, nil
	}
	var list []json.Value
	if !decodeInto(p["responses"], &list) || len(list) == 0 {
		return nil, perr(errInvalidArgument, "input.respond: responses must be a non-empty array.")
	}
	var entries []respondEntry
	for i, raw := range list {
		ep, ok := parseParams(raw)
		if !ok {
			return nil, perr(errInvalidArgument, fmt.Sprintf("input.respond: responses[%d] must be an object.", i))
		}
		id, present, ok := ep.str("interrupt_id")
		if !ok || !present || id == "" {
			return nil, perr(errInvalidArgument, fmt.Sprintf("input.respond: responses[%d].interrupt_id must be a non-empty string.", i))
		}
		if _, _, ok := ep.namespace("namespace"); !ok {
			return nil, perr(errInvalidArgument, fmt.Sprintf("input.respond: responses[%d].namespace must be an array of strings.", i))
		}
		entries = append(entries, respondEntry{id: id, response: ep["response"]})
	}
	return entries, nil
}

func (f *Frontend) inputRespond(c *cmdCtx, p params) ([]byte, *protoError) {
	entries, pe := respondEntries(p)
	if pe != nil {
		return nil, pe
	}
	update, ok := p.object("update")
	if !ok {
		return nil, perr(errInvalidArgument, "input.respond: update must be an object.")
	}
	rec := c.rec
	req := newRequest(rec.Assistant)
	if _, pe := runOptions("input.respond", p, req); pe != nil {
		return nil, pe
	}
	if g, ok := p["goto"]; ok {
		req.Extensions["agent.goto"] = rawValue(g)
	}
	if rec.Runs == 0 {
		return nil, perr(errNoSuchRun, fmt.Sprintf("input.respond: thread %q has no run.", c.thread))
	}
	if f.running(c) || len(rec.Interrupts) == 0 {
		return nil, perr(errInvalidArgument, fmt.Sprintf("input.respond: thread %q is not interrupted.", c.thread))
	}
	req.Resume = map[string]*structpb.Value{}
	for _, e := range entries {
		if !slices.ContainsFunc(rec.Interrupts, func(i interruptRec) bool { return i.ID == e.id }) {
			return nil, perr(errNoSuchInterrupt, fmt.Sprintf("input.respond: no pending interrupt %q on thread %q.", e.id, c.thread))
		}
		v := rawValue(e.response)
		if v == nil {
			v = structpb.NewNullValue()
		}
		req.Resume[e.id] = v
	}
	opts := runtimeOptions{Assistant: rec.Assistant}
	if update != nil {
		if _, _, pe := inputMessages([]byte(p["update"]), "run-update-"); pe != nil {
			pe.Message = "input.respond: update: " + pe.Message
			return nil, pe
		}
		opts.Input = p["update"]
	}
	if pe := f.startRun(c, req, opts); pe != nil {
		return nil, pe
	}
	return []byte(`{}`), nil
}

func (f *Frontend) stateFork(c *cmdCtx, p params) ([]byte, *protoError) {
	id, present, ok := p.str("checkpoint_id")
	if !ok || !present || id == "" {
		return nil, perr(errInvalidArgument, "state.fork requires a checkpoint_id string.")
	}
	rec := c.rec
	req := newRequest(rec.Assistant)
	if _, pe := runOptions("state.fork", p, req); pe != nil {
		return nil, pe
	}
	if !slices.ContainsFunc(rec.Checkpoints, func(cp checkpointRec) bool { return cp.ID == id }) {
		return nil, perr(errNoSuchCheckpoint, fmt.Sprintf("state.fork: checkpoint %q is not a checkpoint of thread %q.", id, c.thread))
	}
	if rec.Agent {
		return nil, perr(errNotSupported, "state.fork: the thread's state belongs to an agent backend, which forks itself.")
	}
	if f.running(c) {
		return nil, perr(errInvalidArgument, fmt.Sprintf("thread %q already has an active run (multitask_strategy reject).", c.thread))
	}
	opts := runtimeOptions{Fork: id, Assistant: rec.Assistant}
	if input, ok := p["input"]; ok {
		req.Extensions["agent.input"] = rawValue(input)
		if _, _, pe := inputMessages([]byte(input), "run-input-"); pe != nil {
			pe.Message = "state.fork: " + pe.Message
			return nil, pe
		}
		opts.Input = input
	}
	if pe := f.startRun(c, req, opts); pe != nil {
		return nil, pe
	}
	return appendJSON(nil, &runResult{RunID: req.RunId, ThreadID: c.thread}), nil
}
