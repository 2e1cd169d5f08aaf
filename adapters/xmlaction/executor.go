package xmlaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// extDepth, on a nested run's request, is how deep it is nested.
const extDepth = "xml.depth"

// customRetry names the custom event reporting a failed attempt that will
// be retried.
const customRetry = "xml.retry"

// actStatus is an action's place in its life.
type actStatus uint8

const (
	asWaiting   actStatus = iota // parsed, dependencies pending
	asRunning                    // started
	asSucceeded                  // finished with a result (or null after on_error skip)
	asFailed                     // failed, or could not run
	asSkipped                    // a dependency failed
)

// act is an action in the executor. Only the stream's Recv goroutine
// touches it; an action's goroutine reads only the immutable *action.
type act struct {
	*action
	st       actStatus
	deps     []dep
	fwd      int    // depends_on entries naming an id not seen yet
	waiters  []*act // actions with a dependency on this one
	value    any
	hasValue bool
	started  bool // fire_and_forget dependents may go once it has
	cancel   context.CancelFunc

	shown    bool               // its block has been emitted
	deferred []*canonical.Event // its events that wait for the block
}

// dep is a dependency. A data dependency (depends_on, a $reference) fails
// its dependent when it fails; an order dependency (the sync barrier) only
// waits for it to end.
type dep struct {
	a    *act
	data bool
}

func (x *act) done() bool {
	return x.st == asSucceeded || x.st == asFailed || x.st == asSkipped
}

// execMsg is what an action's goroutine reports to the stream: an event to
// emit for the action, or its outcome.
type execMsg struct {
	x     *act
	ev    *canonical.Event
	done  bool
	value any
	err   *canonical.Error
}

// register adds a parsed action to the executor and starts it if it can run.
func (s *xstream) register(a *action) *act {
	x := &act{action: a}
	if a.dup {
		x.st = asFailed // reported by the decoder; the id stays the earlier action's
		return x
	}
	s.acts = append(s.acts, x)
	s.byID[a.id] = x
	if a.err != nil {
		x.st = asFailed // reported by the decoder
		s.resolveFwd(x)
		return x
	}
	if a.mode != modeFire {
		s.busy++
	}
	var cycle bool
	if s.lastSync != nil {
		s.addDep(x, s.lastSync, false)
	}
	for _, id := range a.dependsOn {
		if id == a.id {
			cycle = true
			continue
		}
		if y := s.byID[id]; y != nil {
			s.addDep(x, y, true)
		} else if y := s.byUniqueName(id, x); y != nil {
			s.addDep(x, y, true)
		} else {
			s.fwd[id] = append(s.fwd[id], x)
			x.fwd++
		}
	}
	for _, name := range refsIn(a.params, nil) {
		if y := s.lookup(name); y != nil && y != x {
			s.addDep(x, y, true)
		}
	}
	if a.outputKey != "" {
		if a.mode == modeFire {
			s.log.Warn("output_key of a fire_and_forget action is ignored", "run", s.runID, "action", a.id)
		} else {
			s.byKey[a.outputKey] = x
		}
	}
	if a.mode == modeSync {
		s.lastSync = x
	}
	if cycle {
		s.failAct(x, actionErrf(kindDependencyCycle, "the action depends on itself"))
	}
	s.resolveFwd(x)
	s.evaluate(x)
	return x
}

// byUniqueName resolves a depends_on entry naming no id by the one earlier
// action with that name (prompts often list tool names), else nil.
func (s *xstream) byUniqueName(name string, self *act) *act {
	var found *act
	for _, y := range s.acts {
		if y == self || y.name != name {
			continue
		}
		if found != nil {
			return nil
		}
		found = y
	}
	return found
}

func (s *xstream) addDep(x, y *act, data bool) {
	for _, d := range x.deps {
		if d.a == y {
			return
		}
	}
	x.deps = append(x.deps, dep{a: y, data: data})
	y.waiters = append(y.waiters, x)
}

// resolveFwd connects the actions that named x's id before x appeared.
func (s *xstream) resolveFwd(x *act) {
	ws := s.fwd[x.id]
	delete(s.fwd, x.id)
	for _, w := range ws {
		w.fwd--
		s.addDep(w, x, true)
		s.evaluate(w)
	}
}

// lookup is the action a $name refers to: the latest action with that
// output_key, else the action with that id (never a fire_and_forget one,
// whose result is not kept).
func (s *xstream) lookup(name string) *act {
	if y := s.byKey[name]; y != nil {
		return y
	}
	if y := s.byID[name]; y != nil && y.mode != modeFire {
		return y
	}
	return nil
}

// valueOf is the value $name stands for, if it has one.
func (s *xstream) valueOf(name string) (any, bool) {
	if y := s.byKey[name]; y != nil && y.hasValue {
		return y.value, true
	}
	if y := s.byID[name]; y != nil && y.mode != modeFire && y.hasValue {
		return y.value, true
	}
	return nil, false
}

// evaluate starts x, skips it, or leaves it waiting.
func (s *xstream) evaluate(x *act) {
	if x.st != asWaiting {
		return
	}
	for _, d := range x.deps {
		if d.data && blocked(d.a) {
			s.skip(x, d.a)
			return
		}
	}
	if x.fwd > 0 {
		return
	}
	for _, d := range x.deps {
		if !satisfied(d) {
			return
		}
	}
	s.start(x)
}

// blocked reports a dependency that will never provide a result.
func blocked(y *act) bool {
	return (y.st == asFailed || y.st == asSkipped) && !(y.mode == modeFire && y.started)
}

func satisfied(d dep) bool {
	switch {
	case d.a.mode == modeFire:
		return d.a.started || d.a.done()
	case d.data:
		return d.a.st == asSucceeded
	}
	return d.a.done()
}

func (s *xstream) skip(x, because *act) {
	x.st = asSkipped
	e := actionErrf(kindDependencyFailed, "skipped because dependency %q failed", because.id)
	s.emitFor(x, toolFailedEv(x.id, e.toCanonical(x.id)))
	s.log.Info("action skipped", "run", s.runID, "action", x.id, "dependency", because.id)
	s.settled(x)
}

// failAct fails x without running it.
func (s *xstream) failAct(x *act, e *actionError) {
	x.st = asFailed
	s.emitFor(x, toolFailedEv(x.id, e.toCanonical(x.id)))
	s.log.Info("action failed", "run", s.runID, "action", x.id, "kind", e.kind)
	s.settled(x)
}

// settled lets x's dependents go on.
func (s *xstream) settled(x *act) {
	if x.mode != modeFire {
		s.busy--
	}
	for _, w := range x.waiters {
		s.evaluate(w)
	}
}

// start runs x: its parameters are resolved, tool_started is emitted and
// its goroutine launched.
func (s *xstream) start(x *act) {
	if s.aborting {
		s.failAct(x, actionErrf(kindNotRun, "the run ended before the action could start"))
		return
	}
	params, _ := s.resolve(x.params).(map[string]any)
	args := []byte(marshalCompact(params))
	x.st, x.started = asRunning, true
	s.emitFor(x, &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{
		ToolCallId: x.id, Name: x.name, Input: toProto(params),
	}}})
	if x.mode == modeFire {
		for _, w := range x.waiters {
			s.evaluate(w)
		}
	}
	s.launch(x, params, args)
}

// launch starts x's goroutine: owned by the stream, or for a
// fire_and_forget action by the Backend (it outlives the run).
func (s *xstream) launch(x *act, params map[string]any, args []byte) {
	ff := x.mode == modeFire
	var ctx context.Context
	var cancel context.CancelFunc
	if ff {
		if !s.be.acquire() {
			s.finished(x, nil, canonical.Errorf(canonical.CodeResourceExhausted,
				"action %q: more than MaxBackground (%d) fire_and_forget actions in flight", x.id, s.cfg.MaxBackground))
			return
		}
		// The run's values (the caller's key, which the bridge checks a
		// nested run against), the Backend's lifetime, not the run's.
		ctx, cancel = context.WithCancel(context.WithoutCancel(s.ctx))
		stop := context.AfterFunc(s.be.bgCtx, cancel)
		cancelCtx := cancel
		cancel = func() { stop(); cancelCtx() }
	} else {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			s.finished(x, nil, canonical.Errorf(canonical.CodeCanceled, "action %q: the stream is closed", x.id))
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		ctx, cancel = context.WithCancel(s.ctx)
	}
	x.cancel = cancel
	go s.runAction(ctx, cancel, x, params, args)
}

// finished records x's outcome.
func (s *xstream) finished(x *act, value any, err *canonical.Error) {
	switch {
	case err == nil:
		x.st, x.value, x.hasValue = asSucceeded, value, true
		s.emitFor(x, &canonical.Event{Kind: &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{
			ToolCallId: x.id, Output: toProto(value),
		}}})
	case x.onError == onErrSkip:
		x.st, x.value, x.hasValue = asSucceeded, nil, true
		e := &canonical.Error{Code: err.Code, Message: err.Message + " (on_error skip: continuing with null)", Wire: err.Wire}
		s.emitFor(x, toolFailedEv(x.id, e))
	default:
		x.st = asFailed
		s.emitFor(x, toolFailedEv(x.id, err))
		s.log.Info("action failed", "run", s.runID, "action", x.id, "code", err.Code.String())
	}
	s.settled(x)
}

// endOfStream fails the actions that can never run now that no more
// actions will be parsed: unknown dependencies, then dependency cycles.
func (s *xstream) endOfStream() {
	ids := make([]string, 0, len(s.fwd))
	for id := range s.fwd {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		for _, w := range s.fwd[id] {
			if w.st == asWaiting {
				w.fwd--
				s.failAct(w, actionErrf(kindUnknownDependency, "depends on %q, which no action declares", id))
			}
		}
	}
	clear(s.fwd)
	// Whatever still waits only on waiting actions is in (or behind) a cycle.
	const (
		white = iota
		grey
		black
	)
	color := map[*act]int{}
	var inCycle []*act
	var visit func(x *act, stack []*act)
	visit = func(x *act, stack []*act) {
		color[x] = grey
		stack = append(stack, x)
		for _, d := range x.deps {
			y := d.a
			if y.st != asWaiting {
				continue
			}
			switch color[y] {
			case white:
				visit(y, stack)
			case grey:
				i := slices.Index(stack, y)
				inCycle = append(inCycle, stack[i:]...)
			}
		}
		color[x] = black
	}
	for _, x := range s.acts {
		if x.st == asWaiting && color[x] == white {
			visit(x, nil)
		}
	}
	// Fail every member first, so none is reported as merely skipped.
	var failed []*act
	for _, x := range inCycle {
		if x.st == asWaiting {
			x.st = asFailed
			e := actionErrf(kindDependencyCycle, "its dependencies form a cycle")
			s.emitFor(x, toolFailedEv(x.id, e.toCanonical(x.id)))
			failed = append(failed, x)
		}
	}
	for _, x := range failed {
		s.settled(x)
	}
}

// abort stops the actions of a run that ended early: waiting ones fail,
// running ones (not fire_and_forget) are cancelled.
func (s *xstream) abort() {
	s.aborting = true
	for _, x := range s.acts {
		switch x.st {
		case asWaiting:
			s.failAct(x, actionErrf(kindNotRun, "the run ended before the action could start"))
		case asRunning:
			if x.mode != modeFire && x.cancel != nil {
				x.cancel()
			}
		}
	}
}

func toolFailedEv(id string, e *canonical.Error) *canonical.Event {
	return &canonical.Event{Kind: &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{ToolCallId: id, Error: e.Proto()}}}
}

// The action goroutine.

// errAttemptTimeout is the cancel cause of an attempt that timed out.
var errAttemptTimeout = errors.New("action attempt timed out")

// runAction runs a's attempts and reports the outcome.
//
// The goroutine reads only x.action, which never changes once parsed.
func (s *xstream) runAction(ctx context.Context, cancel context.CancelFunc, x *act, params map[string]any, args []byte) {
	a := x.action
	ff := a.mode == modeFire
	defer func() {
		cancel()
		if ff {
			s.be.release()
		} else {
			s.wg.Done()
		}
	}()
	v, err := s.attempts(ctx, x, params, args)
	ce := canonical.AsError(err)
	if ff && ce != nil {
		s.log.Warn("fire_and_forget action failed", "run", s.runID, "action", a.id, "code", ce.Code.String())
	}
	if !s.send(execMsg{x: x, done: true, value: v, err: ce}) && ff {
		s.log.Debug("fire_and_forget action ended after its run", "run", s.runID, "action", a.id)
	}
}

// send hands m to the stream; false once the stream has ended.
func (s *xstream) send(m execMsg) bool {
	select {
	case s.exec <- m:
		return true
	case <-s.quit:
		return false
	}
}

// attempts runs a's attempts with timeout, retry and backoff.
func (s *xstream) attempts(ctx context.Context, x *act, params map[string]any, args []byte) (any, error) {
	a := x.action
	retries := min(a.retry, s.cfg.MaxRetries)
	for n := 1; ; n++ {
		v, err := s.attempt(ctx, x, params, args, n)
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return nil, canonical.Errorf(canonical.CodeOf(ctx.Err()), "action %q: cancelled: %v", a.id, ctx.Err())
		}
		if n > retries {
			return nil, err
		}
		wait := s.backoff(n)
		ce := canonical.AsError(err)
		s.send(execMsg{x: x, ev: &canonical.Event{Kind: &canonical.KindCustom{Custom: &canonical.Custom{
			Name: customRetry,
			Payload: canonical.Value(map[string]any{
				"action": a.id, "attempt": float64(n), "code": ce.Code.String(),
				"error": ce.Message, "backoff_ms": float64(wait.Milliseconds()),
			}),
		}}}})
		if !s.sleep(ctx, wait) {
			return nil, canonical.Errorf(canonical.CodeOf(ctx.Err()), "action %q: cancelled: %v", a.id, ctx.Err())
		}
	}
}

// backoff is the wait before retry n: RetryBackoff doubled per retry, at
// most 32 times it.
func (s *xstream) backoff(n int) time.Duration {
	return s.cfg.RetryBackoff << min(n-1, 5)
}

// sleep waits d on the configured clock; false if ctx ended first.
func (s *xstream) sleep(ctx context.Context, d time.Duration) bool {
	ch := make(chan struct{})
	stop := s.cfg.Clock.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		stop()
		return false
	}
}

// attempt is one try, bounded by the action's timeout.
func (s *xstream) attempt(ctx context.Context, x *act, params map[string]any, args []byte, n int) (any, error) {
	a := x.action
	timeout := s.cfg.ActionTimeout
	if a.timeout > 0 && a.timeout < timeout {
		timeout = a.timeout
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := s.cfg.Clock.AfterFunc(timeout, func() { cancel(errAttemptTimeout) })
	defer stop()
	v, err := s.dispatch(actx, x, params, args)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
		return nil, canonical.Errorf(canonical.CodeDeadlineExceeded, "action %q: attempt %d timed out after %s", a.id, n, timeout)
	}
	return v, err
}

// dispatch runs a by type: tools and relics through the tool registry;
// agents, LLMs and workflows as a nested run on the routed target of that
// name, or through the tool registry when no route serves it.
func (s *xstream) dispatch(ctx context.Context, x *act, params map[string]any, args []byte) (any, error) {
	a := x.action
	switch a.typ {
	case typeAgent, typeLLM, typeWorkflow:
		if r := s.cfg.Runner; r != nil {
			if _, ok := r.Target(a.name); ok {
				return s.nested(ctx, x, params)
			}
		}
		v, err := s.callTool(ctx, a, args)
		if canonical.CodeOf(err) == canonical.CodeNotFound {
			return nil, canonical.Errorf(canonical.CodeNotFound,
				"action %q: no route serves %s %q and no allowed tool has that name", a.id, a.typ, a.name)
		}
		return v, err
	}
	return s.callTool(ctx, a, args)
}

func (s *xstream) callTool(ctx context.Context, a *action, args []byte) (any, error) {
	if s.cfg.Tools == nil {
		return nil, canonical.Errorf(canonical.CodeFailedPrecondition, "action %q: no tool registry is configured", a.id)
	}
	out, err := s.cfg.Tools.Call(ctx, a.name, args)
	if err != nil {
		ce := canonical.AsError(err)
		return nil, &canonical.Error{Code: ce.Code, Message: fmt.Sprintf("action %q: %s", a.id, ce.Message), Wire: ce.Wire, Cause: err}
	}
	v, err := decodeValue(out)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInternal, "action %q: tool %q returned invalid JSON: %v", a.id, a.name, err)
	}
	return v, nil
}

// nested runs a on the routed target of its name; its events appear in the
// namespace [a.id], opened by a lifecycle event whose cause is the tool
// call. The result is the nested run's text.
func (s *xstream) nested(ctx context.Context, x *act, params map[string]any) (any, error) {
	a := x.action
	if s.depth+1 > s.cfg.MaxDepth {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "action %q: nested runs deeper than MaxDepth (%d)", a.id, s.cfg.MaxDepth)
	}
	pv := make(map[string]*structpb.Value, len(params))
	for k, v := range params {
		pv[k] = toProto(v)
	}
	req := &canonical.Request{
		Target:     a.name,
		Inputs:     []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", promptOf(params))}},
		Parameters: pv,
		Metadata:   map[string]string{"xml.parent_run": s.runID, "xml.action": a.id},
		Extensions: map[string]*structpb.Value{extDepth: structpb.NewNumberValue(float64(s.depth + 1))},
	}
	st, err := s.cfg.Runner.Run(ctx, req)
	if err != nil {
		ce := canonical.AsError(err)
		return nil, &canonical.Error{Code: ce.Code, Message: fmt.Sprintf("action %q: %s", a.id, ce.Message), Cause: err}
	}
	defer st.Close()
	ns := []string{a.id}
	emit := func(ev *canonical.Event) {
		if a.mode == modeFire {
			return // it may outlive the run: its events are not shown
		}
		ev.Namespace = append(append([]string(nil), ns...), ev.GetNamespace()...)
		ev.ThreadId, ev.RunId, ev.Seq = "", "", 0
		s.send(execMsg{x: x, ev: ev})
	}
	emit(&canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{
		Status: canonical.StatusStarted,
		Cause:  &canonical.Cause{Type: "toolCall", ToolCallId: a.id},
	}}})
	var g canonical.Guard
	var text []byte
	textBlocks := map[uint32]bool{}
	end := func(status canonical.RunStatus, ce *canonical.Error) error {
		for _, ev := range g.End(nil, status, ce) {
			emit(ev)
		}
		return ce
	}
	for {
		ev, err := st.Recv()
		if err != nil {
			ce := canonical.AsError(err)
			if errors.Is(err, io.EOF) {
				ce = canonical.Errorf(canonical.CodeUnavailable, "action %q: nested run ended without a terminal event", a.id)
			}
			if ctx.Err() != nil {
				return nil, end(canonical.StatusCancelled, canonical.AsError(ctx.Err()))
			}
			return nil, end(canonical.StatusFailed, ce)
		}
		if v := g.Observe(ev); v != nil {
			return nil, end(canonical.StatusFailed, v)
		}
		if len(ev.GetNamespace()) == 0 {
			switch k := ev.GetKind().(type) {
			case *canonical.KindBlockStart:
				textBlocks[k.BlockStart.GetIndex()] = k.BlockStart.GetType() == canonical.BlockText
			case *canonical.KindBlockDelta:
				if textBlocks[k.BlockDelta.GetIndex()] {
					if len(text)+len(k.BlockDelta.GetText()) > s.cfg.MaxOutputBytes {
						emit(ev)
						_ = st.Close()
						return nil, end(canonical.StatusCancelled, canonical.Errorf(canonical.CodeResourceExhausted,
							"action %q: nested run output exceeds MaxOutputBytes (%d bytes)", a.id, s.cfg.MaxOutputBytes))
					}
					text = append(text, k.BlockDelta.GetText()...)
				}
			}
		}
		status, terminal := canonical.TerminalOf(ev)
		lcErr := canonical.FromProto(ev.GetLifecycle().GetError())
		emit(ev)
		if !terminal {
			continue
		}
		switch status {
		case canonical.StatusCompleted:
			return string(text), nil
		case canonical.StatusInterrupted:
			return nil, canonical.Errorf(canonical.CodeFailedPrecondition,
				"action %q: the nested run on %q asked for input; nested interrupts are not supported", a.id, a.name)
		}
		if lcErr == nil {
			lcErr = canonical.Errorf(canonical.CodeUnknown, "nested run %s", strings.ToLower(status.String()))
		}
		return nil, &canonical.Error{Code: lcErr.Code, Message: fmt.Sprintf("action %q: nested run on %q: %s", a.id, a.name, lcErr.Message), Wire: true}
	}
}

// promptOf is a nested run's prompt: the "prompt" or "input" parameter if
// it is a string, else the parameters as JSON.
func promptOf(params map[string]any) string {
	for _, k := range []string{"prompt", "input"} {
		if s, ok := params[k].(string); ok {
			return s
		}
	}
	return marshalCompact(params)
}

// Values and $references.

// decodeValue parses a tool's JSON result (empty is null), numbers as
// written.
func decodeValue(b []byte) (any, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	return decodeJSON(b)
}

// stringify is a value inside text: strings as they are, numbers and
// booleans as JSON, null as "null", objects and arrays as compact JSON.
func stringify(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case number:
		return string(x)
	}
	return marshalCompact(v)
}

// resolve replaces $references in the string leaves of v: a leaf that is
// exactly "$name" becomes the value (with its JSON type); references inside
// longer strings are interpolated; unknown names stay as written.
func (s *xstream) resolve(v any) any {
	switch x := v.(type) {
	case string:
		if len(x) > 1 && x[0] == '$' {
			if n, st := matchRef([]byte(x), true); st == matchOK && n == len(x) {
				if val, ok := s.valueOf(x[1:]); ok {
					return val
				}
				return x
			}
		}
		return s.interpolate(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = s.resolve(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = s.resolve(e)
		}
		return l
	}
	return v
}

// interpolate replaces each known $name in str by its value as text.
func (s *xstream) interpolate(str string) string {
	if strings.IndexByte(str, '$') < 0 {
		return str
	}
	var sb strings.Builder
	p := []byte(str)
	for i := 0; i < len(p); {
		if p[i] == '$' {
			if n, st := matchRef(p[i:], true); st == matchOK {
				if val, ok := s.valueOf(string(p[i+1 : i+n])); ok {
					sb.WriteString(stringify(val))
					i += n
					continue
				}
				sb.Write(p[i : i+n])
				i += n
				continue
			}
		}
		sb.WriteByte(p[i])
		i++
	}
	return sb.String()
}

// refsIn appends the $names referenced in v's string leaves.
func refsIn(v any, out []string) []string {
	switch x := v.(type) {
	case string:
		p := []byte(x)
		for i := 0; i < len(p); i++ {
			if p[i] == '$' {
				if n, st := matchRef(p[i:], true); st == matchOK {
					out = append(out, x[i+1:i+n])
					i += n - 1
				}
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = refsIn(x[k], out)
		}
	case []any:
		for _, e := range x {
			out = refsIn(e, out)
		}
	}
	return out
}
