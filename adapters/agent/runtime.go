package agent

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Runtime is the agent runtime as the bridge runs it (canonical.Runtime):
// around the backend of a request that names it, on the instance that
// hosts the backend, it keeps the thread's state in the thread store and
// adds the events of its steps (updates, values,
// checkpoints, input.answered) to the run as canonical events, so they
// take the thread's seqs and enter the replay log with the backend's.
// The runs of a thread take turns here: the bridge's thread lease places
// them all on one instance.
//
// A request from the agent frontend carries the run's input as the
// client sent it, a fork and the assistant in its runtimeExt extension;
// any other request's input nodes are the messages it adds.
type Runtime struct {
	store canonical.ThreadStore
	log   *slog.Logger
	cfg   RuntimeConfig

	mu      sync.Mutex
	threads map[string]*runtimeThread
	idle    []string // threads with no run here, oldest first, kept for the next run
}

// RuntimeConfig configures a Runtime. Zero fields take the documented
// defaults.
type RuntimeConfig struct {
	// MaxCheckpoints bounds the checkpoints a thread keeps. Default 100.
	MaxCheckpoints int
	// MaxBlockBytes bounds the text of one block a message keeps. Default
	// 16 MiB.
	MaxBlockBytes int
	// StoreTimeout bounds one read or write of the thread store. Default
	// 5s.
	StoreTimeout time.Duration
	// InlineValues bounds the state, as JSON, a values event carries: a
	// larger one names its checkpoint instead (runtimeCheckpointExt),
	// whose record is saved before the event is sent, so no event
	// outgrows what NATS carries. Default 256 KiB.
	InlineValues int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// The extensions the runtime reads and writes.
const (
	// runtimeExt is a request's runtime options (runtimeOptions as JSON,
	// a string).
	runtimeExt = "agent.runtime"
	// runtimeCheckpointExt names the checkpoint whose values a state
	// snapshot holds: every values event the runtime makes has it, and
	// one without values (past InlineValues) is read from its record.
	runtimeCheckpointExt = "agent.checkpoint"
	// wireExt is an event's agent-protocol wire events (wireList), as the
	// run's encoder made them: a reader on any instance frames them with
	// the event's seq, and needs no encoder of its own, which would lack
	// what came before it (a content-block-finish carries the whole
	// block, assembled from the run's deltas).
	wireExt = "agent.wire"
	// updateExt marks the events of an update run (runtimeOptions.Update),
	// which is not a run of the agent protocol: a frontend shows its steps
	// and not its lifecycle.
	updateExt = "agent.update"
)

// runtimeOptions is what a run asks of the runtime beyond its request.
type runtimeOptions struct {
	// Input is the run's input as the client sent it: {"messages": [...],
	// other state keys} or a string (inputMessages).
	Input json.Value `json:"input,omitzero"`
	// Fork is the checkpoint the run starts from.
	Fork string `json:"fork,omitzero"`
	// Assistant is the assistant the thread is bound to.
	Assistant string `json:"assistant,omitzero"`
	// Update makes the run an update of the state, without the backend:
	// its input and the messages injected since the last run ended
	// (threadRecord.Injected) are added as one step ("__input__",
	// source "update"), and its events are marked updateExt.
	Update bool `json:"update,omitzero"`
}

// maxIdleRuntimeThreads bounds the idle threads whose state is kept
// decoded for their next run (it is read back from the store otherwise).
const maxIdleRuntimeThreads = 64

// NewRuntime returns a Runtime keeping state in store.
func NewRuntime(store canonical.ThreadStore, log *slog.Logger, cfg RuntimeConfig) *Runtime {
	cfg.MaxCheckpoints = cmp.Or(cfg.MaxCheckpoints, 100)
	cfg.MaxBlockBytes = cmp.Or(cfg.MaxBlockBytes, 16<<20)
	cfg.StoreTimeout = cmp.Or(cfg.StoreTimeout, 5*time.Second)
	cfg.InlineValues = cmp.Or(cfg.InlineValues, 256<<10)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{store: store, log: log, cfg: cfg, threads: map[string]*runtimeThread{}}
}

// runtimeThread is a thread's state here: held by one run at a time.
type runtimeThread struct {
	id   string
	turn chan struct{} // holds a token while a run has the thread
	refs int           // runs holding or awaiting the turn; under Runtime.mu
	c    convo
	rev  uint64 // the head record's revision c.rec was read at or saved as; 0: none
}

// ref returns the thread's state with a reference taken.
func (r *Runtime) ref(id string) *runtimeThread {
	r.mu.Lock()
	defer r.mu.Unlock()
	th := r.threads[id]
	if th == nil {
		th = &runtimeThread{id: id, turn: make(chan struct{}, 1)}
		th.c = convo{maxCheckpoints: r.cfg.MaxCheckpoints, maxBlockBytes: r.cfg.MaxBlockBytes, inlineValues: r.cfg.InlineValues, now: r.cfg.Now}
		r.threads[id] = th
	}
	if th.refs == 0 {
		r.idle = slices.DeleteFunc(r.idle, func(s string) bool { return s == id })
	}
	th.refs++
	return th
}

// acquire returns the thread's state with a reference taken, once its
// turn has come (the run before it on this instance has ended).
func (r *Runtime) acquire(ctx context.Context, id string) (*runtimeThread, error) {
	th := r.ref(id)
	select {
	case th.turn <- struct{}{}:
		return th, nil
	case <-ctx.Done():
		r.release(th, false)
		return nil, canonical.AsError(ctx.Err())
	}
}

// tryAcquire is acquire when the thread's turn is free; nil, holding
// nothing, when a run has it.
func (r *Runtime) tryAcquire(id string) *runtimeThread {
	th := r.ref(id)
	select {
	case th.turn <- struct{}{}:
		return th
	default:
		r.release(th, false)
		return nil
	}
}

// release gives the thread's turn up (when held) and its reference; an
// idle thread's state is kept for its next run, up to
// maxIdleRuntimeThreads.
func (r *Runtime) release(th *runtimeThread, held bool) {
	if held {
		<-th.turn
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if th.refs--; th.refs > 0 {
		return
	}
	r.idle = append(r.idle, th.id)
	for len(r.idle) > maxIdleRuntimeThreads {
		delete(r.threads, r.idle[0])
		r.idle = r.idle[1:]
	}
}

// Start implements canonical.Runtime. On a thread no run has, the run
// starts here: a backend that refuses it refuses the request. Behind
// another run it returns at once, and the run takes the thread's turn and
// starts the backend at its first Recv, whose error ends it failed.
func (r *Runtime) Start(ctx context.Context, req *canonical.Request, be canonical.Backend) (canonical.Stream, error) {
	var opts runtimeOptions
	if s := req.GetExtensions()[runtimeExt].GetStringValue(); s != "" {
		if err := json.Unmarshal([]byte(s), &opts, peerJSON); err != nil {
			return nil, canonical.Errorf(canonical.CodeInvalidArgument, "extensions.%s: %v", runtimeExt, err)
		}
	}
	run := &runtimeRun{r: r, req: req, be: be, opts: opts, runAcc: runAcc{run: req.GetRunId(), toolNames: map[string]string{}}}
	var pe *protoError
	if opts.Input != nil {
		run.input, run.update, pe = inputMessages(opts.Input, run.run+"-input-")
	} else {
		run.input, pe = nodeMessages(req.GetInputs(), run.run+"-input-")
	}
	if pe != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "%s", pe.Message)
	}
	run.ctx, run.cancel = context.WithCancel(ctx)
	if th := r.tryAcquire(req.GetThreadId()); th != nil {
		// The thread is free: the run starts now, and a backend that
		// refuses it refuses the request.
		run.opened = true
		if err := run.openWith(th); err != nil {
			run.cancel()
			return nil, err
		}
	}
	return run, nil
}

// open takes the thread's turn and starts the run.
func (s *runtimeRun) open() error {
	th, err := s.r.acquire(s.ctx, s.req.GetThreadId())
	if err != nil {
		return err
	}
	return s.openWith(th)
}

// openWith starts the run, th's turn taken.
func (s *runtimeRun) openWith(th *runtimeThread) error {
	s.mu.Lock()
	closed := s.ended
	if !closed {
		s.th = th
	}
	s.mu.Unlock()
	if closed {
		s.r.release(th, true)
		return canonical.Errorf(canonical.CodeCanceled, "run cancelled")
	}
	s.enc = NewEncoder(EncoderConfig{GraphName: cmp.Or(s.opts.Assistant, th.c.rec.Assistant), MaxBlockBytes: s.r.cfg.MaxBlockBytes, Now: s.r.cfg.Now})
	if s.opts.Update {
		return s.updateOnly(s.ctx)
	}
	if err := s.begin(s.ctx, s.req, s.opts); err != nil {
		s.abandon()
		return err
	}
	up, err := s.be.Start(s.ctx, s.req)
	if err != nil {
		// The run never started: the thread is as it was, but for the
		// steps begin made (a fork, answers), which stand.
		rec := &s.c().rec
		rec.Runs--
		rec.Status = "idle"
		if err := s.save(context.WithoutCancel(s.ctx)); err != nil {
			s.r.log.Error("thread state not saved", "thread", th.id, "run", s.run, "err", err)
		}
		s.abandon()
		return err
	}
	s.mu.Lock()
	s.up = up
	s.mu.Unlock()
	return nil
}

// abandon ends a run that did not start: its turn is given up.
func (s *runtimeRun) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	s.releaseLocked()
}

// nodeMessages is the messages of a request's input nodes: one per text
// leaf that is not empty, with its role (user when it has none).
func nodeMessages(inputs []*canonical.NamedNode, idPrefix string) ([]json.Value, *protoError) {
	var out []json.Value
	for _, in := range inputs {
		for _, leaf := range canonical.Leaves(nil, in.GetNode()) {
			if len(leaf.GetData()) == 0 {
				continue
			}
			if mime := leaf.GetMime(); mime != "" && !strings.HasPrefix(mime, "text/") {
				return nil, perr(errInvalidArgument, "input "+in.GetName()+": the agent runtime keeps text messages; a "+mime+" part is not one")
			}
			role := cmp.Or(leaf.GetRole(), "user")
			raw, _ := json.Marshal(map[string]string{"role": role, "content": string(leaf.GetData())}, wireJSON)
			m, pe := normalizeMessage(raw, idPrefix+strconv.Itoa(len(out)))
			if pe != nil {
				return nil, pe
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// runtimeRun is one run's stream: the backend's events with the steps
// they make, and the events its start made first.
type runtimeRun struct {
	r      *Runtime
	th     *runtimeThread // nil until the run has the thread's turn
	up     canonical.Stream
	ctx    context.Context // the run's; cancelled by Close
	cancel context.CancelFunc
	req    *canonical.Request
	be     canonical.Backend
	opts   runtimeOptions
	opened bool // the first Recv has opened the run
	// held is a failed message's finish, waiting for the frame the
	// encoder makes with the next event (add).
	held *canonical.Event
	// skipped counts the events just queued that make no frame (attach).
	skipped int
	runAcc
	input  []json.Value
	update map[string]json.Value
	queue  []*canonical.Event // events to return before the next of the backend
	enc    *Encoder           // the run's agent-protocol encoder (wireExt)
	wire   []wireEvent        // enc's output, reused
	// stepped is set when the run's input step was made: the thread's
	// record is saved before its events go out, so that a run whose owner
	// dies keeps its input, and its checkpoint ids are not handed out
	// again by the thread's next run (the record's NextCkpt).
	stepped bool
	// large is set when a queued values event names its checkpoint
	// instead of holding the state: the checkpoints are saved first.
	large bool
	// mu guards ended and the thread's state against Close, which may
	// come from another goroutine while Recv waits for the backend.
	mu    sync.Mutex
	ended bool
	// released: the thread's turn is given up. A run that ends keeps it
	// until Close, which the bridge calls once the run's end has its seq
	// in the thread: given up before, the next run's first event could
	// take a seq before this run's end (TestMultitask, one run in 25).
	released bool
}

// releaseLocked gives the thread's turn up, once.
func (s *runtimeRun) releaseLocked() {
	if !s.released {
		s.released = true
		s.r.release(s.th, true)
	}
}

func (s *runtimeRun) c() *convo { return &s.th.c }

// begin reads the thread's state and makes the run's first steps: the
// fork, the interrupts it answers. The request gets the conversation as
// its input.
func (s *runtimeRun) begin(ctx context.Context, req *canonical.Request, opts runtimeOptions) error {
	if err := s.load(ctx); err != nil {
		return err
	}
	c := s.c()
	c.emit = s.emit
	rec := &c.rec
	s.applyInjected()
	if opts.Assistant != "" {
		rec.Assistant = opts.Assistant
	}
	rec.RunHead = rec.Head
	if opts.Fork != "" {
		if err := s.fork(ctx, opts.Fork); err != nil {
			return err
		}
	}
	if len(req.GetResume()) > 0 {
		answered := make([]string, 0, len(req.GetResume()))
		for id := range req.GetResume() {
			answered = append(answered, id)
		}
		slices.Sort(answered)
		s.addEnd(&canonical.Event{Kind: &canonical.KindInputAnswered{InputAnswered: &canonical.InputAnswered{InterruptIds: answered}}})
		rec.Interrupts = slices.DeleteFunc(rec.Interrupts, func(i interruptRec) bool { return slices.Contains(answered, i.ID) })
	}
	hist := append(slices.Clip(c.historyNodes()), historyNode(s.input).Children...)
	req.Inputs = []*canonical.NamedNode{{Name: "messages", Node: &canonical.Node{Children: hist}}}
	rec.Runs++
	rec.LastRun = s.run
	rec.Status = "running"
	return s.save(ctx)
}

// updateOnly makes the run's input and the messages injected since the
// last run one step of the thread's state, without the backend, and ends
// the run.
func (s *runtimeRun) updateOnly(ctx context.Context) error {
	if err := s.load(ctx); err != nil {
		s.abandon()
		return err
	}
	s.update = nil // an update's other keys are set by the step too
	c := s.c()
	c.emit = s.emit
	rec := &c.rec
	msgs := append(rec.Injected, s.input...)
	rec.Injected = nil
	c.addMessages(msgs, nil, "__input__", "update", s.run)
	s.mu.Lock()
	s.finishLocked(canonical.Terminal(canonical.StatusCompleted, nil))
	s.mu.Unlock()
	for _, ev := range s.queue {
		if ev.Extensions == nil {
			ev.Extensions = map[string]*structpb.Value{}
		}
		ev.Extensions[updateExt] = structpb.NewBoolValue(true)
	}
	return nil
}

// applyInjected adds the messages injected while a run went on as a step.
func (s *runtimeRun) applyInjected() {
	rec := &s.c().rec
	if len(rec.Injected) == 0 {
		return
	}
	msgs := rec.Injected
	rec.Injected = nil
	s.c().addMessages(msgs, nil, "__input__", "update", s.run)
}

// load reads the thread's record, unless the one kept here is the
// stored one.
func (s *runtimeRun) load(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.r.cfg.StoreTimeout)
	defer cancel()
	th := s.th
	rec, rev, err := readState(ctx, s.r.store, th.id, th.rev, s.r.log)
	switch {
	case err != nil:
		return err
	case rev != 0 && rev == th.rev:
		return nil // the kept state is the stored one
	}
	th.rev = rev
	th.c.history, th.c.dropped, th.c.made = historyCache{}, nil, madeState{}
	th.c.rec = threadRecord{Thread: th.id, Values: map[string]json.Value{}}
	if rec == nil {
		return nil // none yet, or unreadable: a save replaces it
	}
	th.c.rec = *rec
	if rec.ValuesAt != "" {
		th.c.made = madeState{id: rec.ValuesAt, values: cloneValues(rec.Values)}
	}
	return nil
}

// fork makes the checkpoint id the thread's state, as a step.
func (s *runtimeRun) fork(ctx context.Context, id string) error {
	c := s.c()
	cp := c.findCheckpoint(id)
	if cp == nil {
		return canonical.Errorf(canonical.CodeNotFound, "checkpoint %q is not a checkpoint of thread %q", id, s.th.id)
	}
	values := cp.Values
	if values == nil {
		ctx, cancel := context.WithTimeout(ctx, s.r.cfg.StoreTimeout)
		defer cancel()
		var err error
		if values, err = readCheckpointValues(ctx, s.r.store, s.th.id, id); err != nil {
			return err
		}
	}
	c.rec.Values = cloneValues(values)
	c.rec.Head = id
	c.checkpoint("fork", "", s.run)
	return nil
}

// emit turns a step's event (convo.emit) into the run's canonical event.
func (s *runtimeRun) emit(method string, data []byte, _ string) {
	c := s.c()
	ev := &canonical.Event{Namespace: []string{}}
	switch method {
	case methodValues:
		snap := &canonical.StateSnapshot{}
		ev.Extensions = map[string]*structpb.Value{runtimeCheckpointExt: structpb.NewStringValue(c.rec.Head)}
		if data != nil && len(data) <= s.r.cfg.InlineValues {
			snap.Values = rawValue(data)
		} else {
			s.large = true
			data = nil // the checkpoint's record has it
		}
		ev.Kind = &canonical.KindStateSnapshot{StateSnapshot: snap}
	case methodUpdates:
		var u struct {
			Node   string     `json:"node"`
			Values json.Value `json:"values"`
		}
		_ = json.Unmarshal(data, &u, peerJSON) // addMessages wrote it
		ev.Kind = &canonical.KindStateUpdate{StateUpdate: &canonical.StateUpdate{Node: u.Node, Values: rawValue(u.Values)}}
	case methodCheckpoints:
		cp := c.rec.Checkpoints[len(c.rec.Checkpoints)-1]
		ev.Kind = &canonical.KindCheckpoint{Checkpoint: &canonical.Checkpoint{Id: cp.ID, ParentId: cp.Parent, Step: cp.Step, Source: cp.Source}}
	default:
		return
	}
	w := wireEvent{method: method, namespace: []string{}, timeMs: s.r.cfg.Now().UnixMilli(), data: data, skip: s.skipped}
	s.skipped = 0
	if ev.Extensions == nil {
		ev.Extensions = map[string]*structpb.Value{}
	}
	ev.Extensions[wireExt] = wireList([]wireEvent{w}, ev, c.rec.Head)
	s.queue = append(s.queue, ev)
}

// add queues ev with its wire events; an event the encoder cannot encode
// (a block past MaxBlockBytes) is an error, which ends the run. A
// lifecycle event's status goes to the run's tree.
//
// Each event carries the frames it makes, so that no two frames share a
// seq (and an event_id, by which the SDK drops repeats): a failed
// message's finish, whose messages error frame the encoder makes with the
// event after it (which tells the error), is held back until then and
// takes that frame.
func (s *runtimeRun) add(ev *canonical.Event) error {
	var err error
	s.wire, err = s.enc.Encode(ev, s.wire[:0])
	if err != nil {
		return err
	}
	for i := range s.wire {
		if w := &s.wire[i]; w.status != "" && !s.opts.Update {
			s.c().rec.noteStatus(s.run, w.namespace, w.status)
		}
	}
	wire := s.wire
	if held := s.held; held != nil && len(wire) > 0 {
		s.held = nil
		s.attach(held, wire[:1])
		s.queue = append(s.queue, held)
		wire = wire[1:]
	}
	s.attach(ev, wire)
	if s.enc.pendingErr != nil && s.held == nil {
		s.held = ev
		return nil
	}
	s.queue = append(s.queue, ev)
	return nil
}

// attach sets ev's wire events (attachWire), the first telling how many
// events before it made none.
func (s *runtimeRun) attach(ev *canonical.Event, ws []wireEvent) {
	if len(ws) == 0 {
		s.skipped++
	} else {
		ws[0].skip, s.skipped = s.skipped, 0
	}
	attachWire(ev, ws)
}

// attachWire sets ev's wire events. An event that makes none carries an
// empty list: a reader encodes only the events the runtime did not
// (tailReader.encode).
func attachWire(ev *canonical.Event, ws []wireEvent) {
	if ev.Extensions == nil {
		ev.Extensions = map[string]*structpb.Value{}
	}
	ev.Extensions[wireExt] = wireList(ws, ev, "")
}

// Recv implements canonical.Stream.
func (s *runtimeRun) Recv() (*canonical.Event, error) {
	if !s.opened {
		s.opened = true
		if err := s.open(); err != nil {
			return nil, err
		}
	}
	for len(s.queue) == 0 {
		if s.isEnded() {
			return nil, io.EOF
		}
		ev, err := s.up.Recv()
		s.mu.Lock()
		switch {
		case s.ended: // closed meanwhile
			err = io.EOF
		case err != nil:
			s.failLocked(err)
		default:
			err = s.handleLocked(ev)
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	switch {
	case s.stepped:
		s.stepped, s.large = false, false
		if err := s.saveState(context.Background(), false); err != nil {
			return nil, s.checkpointsNotSaved(err)
		}
	case s.large:
		s.large = false
		if err := s.saveCheckpoints(context.Background()); err != nil {
			return nil, s.checkpointsNotSaved(err)
		}
	}
	ev := s.queue[0]
	s.queue = s.queue[1:]
	return ev, nil
}

func (s *runtimeRun) isEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// handleLocked queues ev and the steps it makes; a terminal event comes
// after the thread's state is saved. An event the encoder refuses (a
// block past MaxBlockBytes) cancels the run, and the stream fails with
// the error (see checkpointsNotSaved for why not a failed end).
func (s *runtimeRun) handleLocked(ev *canonical.Event) error {
	c := s.c()
	_, terminal := canonical.TerminalOf(ev)
	if s.mode == modeUndecided {
		s.decide(ev, terminal)
	}
	if terminal {
		c.observe(&s.runAcc, ev)
		s.finishLocked(ev)
		return nil
	}
	if err := s.add(ev); err != nil {
		s.r.log.Warn("run cancelled: event not encodable", "thread", s.th.id, "run", s.run, "err", err)
		_ = s.up.Close()
		s.failLocked(err)
		return err
	}
	c.observe(&s.runAcc, ev)
	return nil
}

// checkpointsNotSaved fails the run whose checkpoint records, which its
// queued values events name, could not be written: no reader could read
// those events, so the queue goes, and the stream fails with err. The
// bridge then ends the run as it ends any stream that fails, finishing
// what the events given so far left open; a failed end queued here, after
// the message whose finish was dropped with the queue, broke the event
// model, and the bridge's refusal of it hid err.
func (s *runtimeRun) checkpointsNotSaved(err error) error {
	if s.up != nil {
		_ = s.up.Close()
	}
	s.queue = nil
	ce := canonical.Errorf(canonical.CodeOf(err), "the thread's state could not be saved: %v", err)
	s.mu.Lock()
	s.failLocked(ce) // nothing more when the run's end was queued and saved
	s.mu.Unlock()
	return ce
}

// addEnd queues an event the encoder cannot fail on (a lifecycle event,
// input.answered: no block to keep); should it fail, the event goes
// without its wire events.
func (s *runtimeRun) addEnd(ev *canonical.Event) {
	if err := s.add(ev); err != nil {
		s.r.log.Error("event not encodable", "thread", s.th.id, "run", s.run, "err", err)
		s.queue = append(s.queue, ev)
	}
}

// decide decides how the run's state is kept, on its first event that is
// not a lifecycle one (or its end): an agent backend's reported state, or
// this runtime's, which begins with the run's input as a step.
func (s *runtimeRun) decide(ev *canonical.Event, terminal bool) {
	c := s.c()
	if _, ok := ev.GetExtensions()[passthroughExt]; ok {
		s.mode = modeAgent
	} else {
		switch ev.GetKind().(type) {
		case *canonical.KindLifecycle:
			if terminal {
				s.mode = modeRuntime
			}
		case *canonical.KindStateSnapshot, *canonical.KindStateUpdate, *canonical.KindCheckpoint:
			s.mode = modeAgent
		default:
			s.mode = modeRuntime
		}
	}
	switch s.mode {
	case modeRuntime:
		c.rec.Agent = false
		c.addMessages(s.input, s.update, "", "input", s.run)
		s.stepped = true
	case modeAgent:
		c.rec.Agent = true
	}
}

// failLocked ends the run's state when its stream failed or was closed
// before its terminal event (the bridge then ends the run).
func (s *runtimeRun) failLocked(err error) {
	if s.ended {
		return
	}
	ce := canonical.AsError(err)
	if errors.Is(err, io.EOF) {
		ce = canonical.Errorf(canonical.CodeUnavailable, "run ended without a terminal event")
	}
	end := canonical.Terminal(canonical.StatusFailed, ce)
	if s.mode == modeUndecided {
		s.decide(end, true)
	}
	s.c().observe(&s.runAcc, end)
	s.applyInjected()
	s.ended = true
	if err := s.save(context.Background()); err != nil {
		s.r.log.Error("thread state not saved", "thread", s.th.id, "run", s.run, "err", err)
	}
}

// finishLocked saves the thread and queues the run's terminal event; a
// state that cannot be saved fails the run.
func (s *runtimeRun) finishLocked(end *canonical.Event) {
	if s.ended {
		return
	}
	s.ended = true
	s.applyInjected()
	if lc := end.GetLifecycle(); lc != nil && !s.opts.Update {
		status, _ := wireStatus(lc)
		s.c().rec.noteStatus(s.run, end.GetNamespace(), status)
	}
	if err := s.save(context.Background()); err != nil {
		s.r.log.Error("thread state not saved", "thread", s.th.id, "run", s.run, "err", err)
		s.c().rec.Status = "failed"
		end = canonical.Terminal(canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "the thread's state could not be saved: %v", err))
	}
	s.addEnd(end)
}

// Close implements canonical.Stream. A run closed before its end has its
// state saved as failed, and gives the thread's turn up.
func (s *runtimeRun) Close() error {
	s.cancel()
	var err error
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up != nil { // an update run has none, nor a run not started
		err = s.up.Close()
	}
	if s.th == nil { // not opened: nothing to end
		s.ended = true
		return err
	}
	s.failLocked(canonical.Errorf(canonical.CodeCanceled, "run cancelled"))
	s.releaseLocked()
	return err
}

// save writes the thread's record: the checkpoints not saved yet, then
// the head over the revision last read or written here. A write met
// there (a frontend injecting messages) is merged and the save tried
// again, so neither is lost; then the checkpoints let go are removed.
func (s *runtimeRun) save(ctx context.Context) error { return s.saveState(ctx, true) }

// saveState is save; with apply false (a save while the run goes on) the
// messages another writer injected are kept to inject, not applied: the
// run's end applies them.
func (s *runtimeRun) saveState(ctx context.Context, apply bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.r.cfg.StoreTimeout)
	defer cancel()
	if err := s.saveCheckpoints(ctx); err != nil {
		return err
	}
	th, store := s.th, s.r.store
	for attempt := 0; ; attempt++ {
		rec := th.c.rec
		rec.Thread, rec.Updated, rec.ValuesAt = th.id, s.r.cfg.Now().UTC(), th.c.valuesAt()
		head, err := encodeHead(&rec)
		if err != nil {
			return err
		}
		rev, err := store.Put(ctx, th.id, headKey, head, th.rev)
		if err == nil {
			th.rev, th.c.rec.Updated = rev, rec.Updated
			break
		}
		if canonical.CodeOf(err) != canonical.CodeAborted || attempt == 4 {
			return err
		}
		// Only their head: the merge takes nothing else of theirs.
		theirs, rev, err := readHead(ctx, store, th.id, 0, s.r.log)
		if err != nil {
			return err
		}
		if theirs != nil {
			// The thread's runs take turns here, so the state is this
			// run's; another writer only adds messages to inject (a
			// frontend's input.inject), which this run's end adds.
			ours := &th.c.rec
			ours.Injected = pendingInjected(unionMessagesList(theirs.Injected, ours.Injected), ours.Values["messages"])
			if apply {
				s.applyInjected()
			}
		}
		th.rev = rev
	}
	for _, id := range th.c.dropped {
		if err := store.Delete(ctx, th.id, checkpointKey(id)); err != nil {
			s.r.log.Warn("dropped checkpoint left in the store", "thread", th.id, "checkpoint", id, "err", err)
		}
	}
	th.c.dropped = nil
	return nil
}

// saveCheckpoints writes the checkpoints not saved yet, each once
// (create-only: one that exists was written by a save that failed after
// it), and lets go of their values, which a fork reads back.
func (s *runtimeRun) saveCheckpoints(ctx context.Context) error {
	cps := s.th.c.rec.Checkpoints
	for i := range cps {
		cp := &cps[i]
		if cp.saved {
			continue
		}
		b, err := encodeCheckpoint(cp)
		if err != nil {
			return err
		}
		if _, err := s.r.store.Put(ctx, s.th.id, checkpointKey(cp.ID), b, 0); err != nil && canonical.CodeOf(err) != canonical.CodeAborted {
			return err
		}
		cp.saved, cp.Values = true, nil
	}
	return nil
}
