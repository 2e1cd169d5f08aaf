package xmlaction

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// waitLimit bounds waits for things that must happen; quiet is how long
// we watch for things that must not (grpc-go's short timeout).
const (
	waitLimit = 10 * time.Second
	quiet     = 100 * time.Millisecond
)

// reader drains a stream in a goroutine the test owns.
type reader struct {
	ch   chan *canonical.Event
	err  error
	seen []*canonical.Event
	done chan struct{}
}

func startRun(t *testing.T, be canonical.Backend, req *canonical.Request) *reader {
	t.Helper()
	if req == nil {
		req = &canonical.Request{RunId: "run-1"}
	}
	st, err := be.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	r := &reader{ch: make(chan *canonical.Event, 1024), done: make(chan struct{})}
	go func() {
		defer close(r.ch)
		for {
			ev, err := st.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					r.err = err
				}
				return
			}
			select {
			case r.ch <- ev:
			case <-r.done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(r.done)
		_ = st.Close()
		for range r.ch {
		}
	})
	return r
}

// next returns the next event.
func (r *reader) next(t *testing.T) *canonical.Event {
	t.Helper()
	select {
	case ev, ok := <-r.ch:
		if !ok {
			t.Fatalf("stream ended (err %v); seen:\n%s", r.err, strings.Join(summarize(r.seen), "\n"))
		}
		r.seen = append(r.seen, ev)
		return ev
	case <-time.After(waitLimit):
		t.Fatalf("no event within %s; seen:\n%s", waitLimit, strings.Join(summarize(r.seen), "\n"))
	}
	return nil
}

// until reads up to and including the first event matching pred.
func (r *reader) until(t *testing.T, what string, pred func(*canonical.Event) bool) {
	t.Helper()
	for {
		if pred(r.next(t)) {
			return
		}
		_ = what
	}
}

// none checks that no event matching pred arrives within quiet.
func (r *reader) none(t *testing.T, what string, pred func(*canonical.Event) bool) {
	t.Helper()
	deadline := time.After(quiet)
	for {
		select {
		case ev, ok := <-r.ch:
			if !ok {
				return
			}
			r.seen = append(r.seen, ev)
			if pred(ev) {
				t.Fatalf("%s happened too early; seen:\n%s", what, strings.Join(summarize(r.seen), "\n"))
			}
		case <-deadline:
			return
		}
	}
}

// rest reads to the end, checks the whole stream and returns its summary.
func (r *reader) rest(t *testing.T) []string {
	t.Helper()
	for {
		select {
		case ev, ok := <-r.ch:
			if !ok {
				if r.err != nil {
					t.Fatalf("stream error: %v", r.err)
				}
				if err := canonical.Validate(r.seen); err != nil {
					t.Fatalf("%v\n%s", err, strings.Join(summarize(r.seen), "\n"))
				}
				return summarize(r.seen)
			}
			r.seen = append(r.seen, ev)
		case <-time.After(waitLimit):
			t.Fatalf("stream did not end within %s; seen:\n%s", waitLimit, strings.Join(summarize(r.seen), "\n"))
		}
	}
}

// Event predicates.
func started(id string) func(*canonical.Event) bool {
	return func(ev *canonical.Event) bool { return ev.GetToolStarted().GetToolCallId() == id }
}
func finishedEv(id string) func(*canonical.Event) bool {
	return func(ev *canonical.Event) bool { return ev.GetToolFinished().GetToolCallId() == id }
}
func failedEv(id string) func(*canonical.Event) bool {
	return func(ev *canonical.Event) bool { return ev.GetToolFailed().GetToolCallId() == id }
}
func textIs(s string) func(*canonical.Event) bool {
	return func(ev *canonical.Event) bool {
		return ev.GetBlockDelta() != nil && strings.Contains(ev.GetBlockDelta().GetText(), s)
	}
}
func toolBlock(id string) func(*canonical.Event) bool {
	return func(ev *canonical.Event) bool { return ev.GetBlockStart().GetId() == id }
}
func terminal(ev *canonical.Event) bool { _, ok := canonical.TerminalOf(ev); return ok }

// index returns the position of the first summary line containing s.
func index(t *testing.T, lines []string, s string) int {
	t.Helper()
	for i, l := range lines {
		if strings.Contains(l, s) {
			return i
		}
	}
	t.Fatalf("no line contains %q:\n%s", s, strings.Join(lines, "\n"))
	return -1
}

func before(t *testing.T, lines []string, a, b string) {
	t.Helper()
	if ia, ib := index(t, lines, a), index(t, lines, b); ia >= ib {
		t.Errorf("%q (line %d) is not before %q (line %d):\n%s", a, ia, b, ib, strings.Join(lines, "\n"))
	}
}

// gate is a tool that blocks until released (or cancelled).
type gate struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
	out     any
	err     error
}

func newGate(out any) *gate {
	return &gate{started: make(chan struct{}), release: make(chan struct{}), out: out}
}

func (g *gate) fn(ctx context.Context, _ map[string]any) (any, error) {
	g.once.Do(func() { close(g.started) })
	select {
	case <-g.release:
		return g.out, g.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("%s did not happen within %s", what, waitLimit)
	}
}

type toolFn = func(context.Context, map[string]any) (any, error)

func value(v any) toolFn {
	return func(context.Context, map[string]any) (any, error) { return v, nil }
}

func wrap(t *testing.T, steps []step, tools map[string]toolFn, cfg Config) *Backend {
	t.Helper()
	cfg.Tools = &fakeTools{fns: tools}
	be := Wrap(&fakeModel{steps: steps}, cfg)
	t.Cleanup(func() { _ = be.Close() })
	return be
}

// TestExecAsyncOverlap: async actions run at the same time, and neither
// they nor the response wait for each other.
func TestExecAsyncOverlap(t *testing.T) {
	a, b := newGate("A"), newGate("B")
	be := wrap(t, texts(
		`<action id="a" mode="async">{"name":"ta"}</action>`,
		`<action id="b" mode="async">{"name":"tb"}</action>`,
		`<response>done</response>`,
	), map[string]toolFn{"ta": a.fn, "tb": b.fn}, Config{})
	r := startRun(t, be, nil)
	waitClosed(t, a.started, "tool a starting")
	waitClosed(t, b.started, "tool b starting (while a runs)")
	r.until(t, "response", textIs("done"))
	close(a.release)
	close(b.release)
	lines := r.rest(t)
	before(t, lines, "started a ta", "started b tb")
	before(t, lines, "started b tb", `"done"`)
	before(t, lines, `"done"`, "finished a")
	before(t, lines, `"done"`, "finished b")
}

// TestExecSyncBlocks: later actions and all later output wait for a sync
// action; the model's text is still read meanwhile.
func TestExecSyncBlocks(t *testing.T) {
	s := newGate(map[string]any{"ok": true})
	modelDone := make(chan struct{})
	be := wrap(t, []step{
		{text: `<thought>plan</thought><action id="s" mode="sync">{"name":"slow"}</action>`},
		{text: `<action id="b" mode="async">{"name":"fast"}</action><response>after</response>`},
		{signal: modelDone},
	}, map[string]toolFn{"slow": s.fn, "fast": value(1)}, Config{})
	r := startRun(t, be, nil)
	r.until(t, "tool started", started("s"))
	waitClosed(t, modelDone, "the model finishing its text")
	r.none(t, "output after the sync action", func(ev *canonical.Event) bool {
		return toolBlock("b")(ev) || started("b")(ev) || textIs("after")(ev) || terminal(ev)
	})
	close(s.release)
	lines := r.rest(t)
	before(t, lines, "finished s", `action b "fast"`)
	before(t, lines, "finished s", "started b fast")
	before(t, lines, "finished s", `"after"`)
}

// TestExecFireAndForget: a fire_and_forget action never delays the
// response or the run's end; a failure while the run lasts is a tool error.
func TestExecFireAndForget(t *testing.T) {
	t.Run("never delays", func(t *testing.T) {
		c := newGate("cached")
		be := wrap(t, texts(
			`<action id="c" mode="fire_and_forget">{"name":"cache"}</action>`,
			`<response>answer</response>`,
		), map[string]toolFn{"cache": c.fn}, Config{})
		r := startRun(t, be, nil)
		waitClosed(t, c.started, "the cache write starting")
		lines := r.rest(t) // ends while the cache write still runs
		before(t, lines, "started c cache", `"answer"`)
		if !strings.HasPrefix(lines[len(lines)-1], "lifecycle COMPLETED") {
			t.Fatalf("run did not complete: %s", lines[len(lines)-1])
		}
		for _, l := range lines {
			if strings.Contains(l, "finished c") {
				t.Fatalf("the run waited for the fire_and_forget action:\n%s", strings.Join(lines, "\n"))
			}
		}
		close(c.release) // it finishes after its run; Close waits for it
	})
	t.Run("failure reported", func(t *testing.T) {
		seen := make(chan struct{})
		be := wrap(t, []step{
			{text: `<action id="c" mode="fire_and_forget">{"name":"cache"}</action><response>ans`},
			{wait: seen, text: `wer</response>`},
		}, map[string]toolFn{"cache": func(context.Context, map[string]any) (any, error) {
			return nil, canonical.Errorf(canonical.CodeUnavailable, "cache down")
		}}, Config{})
		r := startRun(t, be, nil)
		r.until(t, "tool error", failedEv("c"))
		close(seen)
		lines := r.rest(t)
		index(t, lines, "failed c  unavailable: action \"c\": cache down")
		before(t, lines, "failed c", `"wer"`)
	})
}

// TestExecDependsOn: explicit, forward, by-name and $reference
// dependencies order the actions.
func TestExecDependsOn(t *testing.T) {
	a := newGate("A")
	e := newGate("E")
	be := wrap(t, texts(
		`<action id="a" mode="async">{"name":"ta","output_key":"ak"}</action>`,
		`<action id="b" mode="async">{"name":"tb","depends_on":["a"]}</action>`,
		`<action id="c" mode="async">{"name":"tc","depends_on":"ta"}</action>`,
		`<action id="r" mode="async">{"name":"tr","parameters":{"v":"$ak"}}</action>`,
		`<action id="d" mode="async">{"name":"td","depends_on":["e"]}</action>`,
		`<action id="e" mode="async">{"name":"te"}</action>`,
		`<response>x</response>`,
	), map[string]toolFn{"ta": a.fn, "tb": value(1), "tc": value(2), "tr": value(3), "td": value(4), "te": e.fn}, Config{})
	r := startRun(t, be, nil)
	waitClosed(t, a.started, "a")
	waitClosed(t, e.started, "e")
	r.none(t, "a dependent starting early", func(ev *canonical.Event) bool {
		return started("b")(ev) || started("c")(ev) || started("r")(ev) || started("d")(ev)
	})
	close(a.release)
	r.until(t, "r", started("r"))
	close(e.release)
	lines := r.rest(t)
	for _, id := range []string{"b", "c", "r"} {
		before(t, lines, "finished a", "started "+id)
	}
	before(t, lines, "finished e", "started d")
	index(t, lines, `started r tr {"v":"A"}`)
}

// TestExecFailedDependency: a failed dependency skips its dependents
// (transitively) with a tool error naming it; on_error skip binds null.
func TestExecFailedDependency(t *testing.T) {
	fail := func(context.Context, map[string]any) (any, error) {
		return nil, canonical.Errorf(canonical.CodeInternal, "exploded")
	}
	var got map[string]any
	be := wrap(t, texts(
		`<action id="a" mode="async">{"name":"bad"}</action>`,
		`<action id="b" mode="async">{"name":"ok","depends_on":["a"]}</action>`,
		`<action id="c" mode="async">{"name":"ok","depends_on":["b"]}</action>`,
		`<action id="s" mode="async">{"name":"bad","on_error":"skip","output_key":"sv"}</action>`,
		`<action id="u" mode="async">{"name":"rec","parameters":{"v":"$sv","t":"got $sv"}}</action>`,
		`<action id="p">{bad json</action>`,
		`<action id="q" mode="async">{"name":"ok","depends_on":["p"]}</action>`,
		`<response>r</response>`,
	), map[string]toolFn{"bad": fail, "ok": value(1), "rec": func(_ context.Context, in map[string]any) (any, error) {
		got = in
		return "fine", nil
	}}, Config{})
	lines := startRun(t, be, nil).rest(t)
	for _, want := range []string{
		`failed a  internal: action "a": exploded`,
		`failed b  failed_precondition: action "b": dependency_failed: skipped because dependency "a" failed`,
		`failed c  failed_precondition: action "c": dependency_failed: skipped because dependency "b" failed`,
		`failed s  internal: action "s": exploded (on_error skip: continuing with null)`,
		`started u rec {"t":"got null","v":null}`,
		`finished u "fine"`,
		`failed p invalid_json`,
		`failed q  failed_precondition: action "q": dependency_failed: skipped because dependency "p" failed`,
	} {
		index(t, lines, want)
	}
	if d := cmp.Diff(map[string]any{"v": nil, "t": "got null"}, got); d != "" {
		t.Errorf("tool arguments (-want +got):\n%s", d)
	}
}

// TestExecUnknownDependencyAndCycle: at the end of the stream, unknown
// dependencies and cycles fail.
func TestExecUnknownDependencyAndCycle(t *testing.T) {
	be := wrap(t, texts(
		`<action id="a" mode="async">{"name":"t","depends_on":["nope"]}</action>`,
		`<action id="b" mode="async">{"name":"t","depends_on":["c"]}</action>`,
		`<action id="c" mode="async">{"name":"t","depends_on":["b"]}</action>`,
		`<action id="d" mode="async">{"name":"t","depends_on":["b"]}</action>`,
		`<action id="e" mode="async">{"name":"t","depends_on":["e"]}</action>`,
	), map[string]toolFn{"t": value(1)}, Config{})
	lines := startRun(t, be, nil).rest(t)
	for _, want := range []string{
		`failed a  failed_precondition: action "a": unknown_dependency: depends on "nope", which no action declares`,
		`failed b  failed_precondition: action "b": dependency_cycle`,
		`failed c  failed_precondition: action "c": dependency_cycle`,
		`failed d  failed_precondition: action "d": dependency_failed: skipped because dependency "b" failed`,
		`failed e  failed_precondition: action "e": dependency_cycle: the action depends on itself`,
		"lifecycle COMPLETED",
	} {
		index(t, lines, want)
	}
}

// TestExecTimeout: an attempt past its timeout is cancelled and fails.
func TestExecTimeout(t *testing.T) {
	clk := newFakeClock()
	g := newGate(nil)
	be := wrap(t, texts(`<action id="a" mode="async">{"name":"slow","timeout":5}</action><response>r</response>`),
		map[string]toolFn{"slow": g.fn}, Config{Clock: clk})
	r := startRun(t, be, nil)
	waitClosed(t, g.started, "the tool starting")
	clk.waitFor(t, 5*time.Second)
	clk.Advance(5 * time.Second)
	lines := r.rest(t)
	index(t, lines, `failed a  deadline_exceeded: action "a": attempt 1 timed out after 5s`)
}

// TestExecRetry: failed attempts are retried after a doubling backoff;
// on_error retry defaults to three retries.
func TestExecRetry(t *testing.T) {
	clk := newFakeClock()
	var mu sync.Mutex
	calls := map[string]int{}
	flaky := func(name string, okAt int) toolFn {
		return func(context.Context, map[string]any) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			calls[name]++
			if calls[name] == okAt {
				return "ok", nil
			}
			return nil, canonical.Errorf(canonical.CodeUnavailable, "try %d failed", calls[name])
		}
	}
	be := wrap(t, texts(
		`<action id="a" mode="sync">{"name":"twice","retry":2}</action>`,
		`<action id="b" mode="sync">{"name":"never","on_error":"retry"}</action>`,
	), map[string]toolFn{"twice": flaky("twice", 3), "never": flaky("never", 0)}, Config{Clock: clk, RetryBackoff: 100 * time.Millisecond})
	r := startRun(t, be, nil)
	for _, d := range []time.Duration{100, 200} {
		clk.waitFor(t, d*time.Millisecond)
		clk.Advance(d * time.Millisecond)
	}
	r.until(t, "a done", finishedEv("a"))
	for _, d := range []time.Duration{100, 200, 400} {
		clk.waitFor(t, d*time.Millisecond)
		clk.Advance(d * time.Millisecond)
	}
	lines := r.rest(t)
	for _, want := range []string{
		`custom xml.retry {"action":"a","attempt":1,"backoff_ms":100,"code":"unavailable","error":"action \"a\": try 1 failed"}`,
		`custom xml.retry {"action":"a","attempt":2,"backoff_ms":200`,
		`finished a "ok"`,
		`custom xml.retry {"action":"b","attempt":3,"backoff_ms":400`,
		`failed b  unavailable: action "b": try 4 failed`,
	} {
		index(t, lines, want)
	}
	if calls["twice"] != 3 || calls["never"] != 4 {
		t.Errorf("attempts: %v, want twice 3, never 4", calls)
	}
}

// TestExecVariables: $name in parameters (typed when whole, stringified
// inside text) and in the response (streamed up to it, then the value).
func TestExecVariables(t *testing.T) {
	a := newGate(map[string]any{"x": []any{1, 2}})
	var got map[string]any
	be := wrap(t, texts(
		`<action id="a" mode="async">{"name":"ta","output_key":"data"}</action>`,
		`<action id="n" mode="async">{"name":"tn"}</action>`,
		`<action id="b" mode="async">{"name":"rec","parameters":{"whole":"$data","num":"$n","text":"got $data and $n!","deep":["$n",{"k":"$unknown"}],"lit":"$ 5"}}</action>`,
		`<response>v=$da`, `ta; n=$n; missing=$nope.</response>`,
	), map[string]toolFn{"ta": a.fn, "tn": value(42), "rec": func(_ context.Context, in map[string]any) (any, error) {
		got = in
		return nil, nil
	}}, Config{})
	r := startRun(t, be, nil)
	r.until(t, "text up to the reference", textIs("v="))
	r.none(t, "text after a pending reference", textIs("n="))
	close(a.release)
	lines := r.rest(t)
	want := map[string]any{
		"whole": map[string]any{"x": []any{float64(1), float64(2)}},
		"num":   float64(42),
		"text":  `got {"x":[1,2]} and 42!`,
		"deep":  []any{float64(42), map[string]any{"k": "$unknown"}},
		"lit":   "$ 5",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tool arguments (-want +got):\n%s", d)
	}
	var text string
	for _, ev := range r.seen {
		text += ev.GetBlockDelta().GetText()
	}
	if !strings.Contains(text, `v={"x":[1,2]}; n=42; missing=$nope.`) {
		t.Errorf("response text: %q", text)
	}
	before(t, lines, `"v="`, "finished a")
}

// TestExecToolErrors: an unknown tool, no registry, a bad result.
func TestExecToolErrors(t *testing.T) {
	be := wrap(t, texts(
		`<action id="a">{"name":"rm_rf"}</action>`,
		`<action id="g" type="agent">{"name":"ghost"}</action>`,
	), map[string]toolFn{}, Config{})
	lines := startRun(t, be, nil).rest(t)
	index(t, lines, `failed a  not_found: action "a": tool "rm_rf" is not in the allowlist`)
	index(t, lines, `failed g  not_found: action "g": no route serves agent "ghost" and no allowed tool has that name`)

	none := Wrap(&fakeModel{steps: texts(`<action id="a">{"name":"x"}</action>`)}, Config{})
	defer none.Close()
	lines = startRun(t, none, nil).rest(t)
	index(t, lines, `failed a  failed_precondition: action "a": no tool registry is configured`)
}

// fakeRunner routes targets to backends.
type fakeRunner map[string]canonical.Backend

func (f fakeRunner) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	be, ok := f[req.GetTarget()]
	if !ok {
		return nil, canonical.Errorf(canonical.CodeNotFound, "unknown target %q", req.GetTarget())
	}
	return be.Start(ctx, req)
}

func (f fakeRunner) Target(name string) (canonical.TargetInfo, bool) {
	_, ok := f[name]
	return canonical.TargetInfo{Name: name}, ok
}

func (f fakeRunner) Targets() []canonical.TargetInfo { return nil }

// recordingBackend records the requests it gets.
type recordingBackend struct {
	canonical.Backend
	mu   sync.Mutex
	reqs []*canonical.Request
}

func (r *recordingBackend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Backend.Start(ctx, req)
}

// TestExecNested: agent actions run the named target as a nested run in
// the action's namespace; its text is the result.
func TestExecNested(t *testing.T) {
	helper := &recordingBackend{Backend: &fakeModel{steps: texts("hello ", "from helper")}}
	runner := fakeRunner{
		"helper": helper,
		"broken": &fakeModel{steps: texts("partial"), status: canonical.StatusFailed, err: canonical.Errorf(canonical.CodeUnavailable, "helper down")},
	}
	model := &fakeModel{steps: texts(
		`<action id="h" type="agent" mode="sync">{"name":"helper","parameters":{"prompt":"hi","n":1},"output_key":"greeting"}</action>`,
		`<action id="x" type="llm">{"name":"broken"}</action>`,
		`<action id="c" type="workflow">{"name":"calc"}</action>`,
		`<response>$greeting</response>`,
	)}
	be := Wrap(model, Config{Runner: runner, Tools: &fakeTools{fns: map[string]toolFn{"calc": value(7)}}})
	defer be.Close()
	lines := startRun(t, be, nil).rest(t)
	for _, want := range []string{
		`started h helper {"n":1,"prompt":"hi"}`,
		"[h] lifecycle STARTED cause=toolCall:h",
		"[h] lifecycle RUNNING",
		"[h] message{",
		`[h]   "hello from helper"`,
		"[h] lifecycle COMPLETED",
		`finished h "hello from helper"`,
		"[x] lifecycle FAILED unavailable: helper down",
		`failed x  unavailable: action "x": nested run on "broken": helper down`,
		`finished c 7`,
	} {
		index(t, lines, want)
	}
	before(t, lines, "[h] lifecycle COMPLETED", `finished h`)
	index(t, lines, `  "hello from helper"`) // the response's value
	if len(helper.reqs) != 1 {
		t.Fatalf("helper runs: %d", len(helper.reqs))
	}
	req := helper.reqs[0]
	if got := canonical.PromptText(req); got != "hi" {
		t.Errorf("nested prompt %q", got)
	}
	if d := req.GetExtensions()[extDepth].GetNumberValue(); d != 1 {
		t.Errorf("nested depth %v", d)
	}

	// At MaxDepth an agent action fails instead of nesting further.
	deep := Wrap(&fakeModel{steps: texts(`<action id="h" type="agent">{"name":"helper"}</action>`)}, Config{Runner: runner, MaxDepth: 2})
	defer deep.Close()
	lines = startRun(t, deep, &canonical.Request{Extensions: map[string]*structpb.Value{extDepth: structpb.NewNumberValue(2)}}).rest(t)
	index(t, lines, `failed h  resource_exhausted: action "h": nested runs deeper than MaxDepth (2)`)
}

// TestExecHeldLimit: output held behind a running sync action is bounded.
func TestExecHeldLimit(t *testing.T) {
	s := newGate(nil)
	be := wrap(t, texts(
		`<action id="s" mode="sync">{"name":"slow"}</action>`,
		`<response>`+strings.Repeat("long text ", 50)+`</response>`,
	), map[string]toolFn{"slow": s.fn}, Config{MaxHeldBytes: 256})
	lines := startRun(t, be, nil).rest(t)
	if last := lines[len(lines)-1]; !strings.Contains(last, "lifecycle FAILED resource_exhausted: output waiting for actions exceeds MaxHeldBytes (256 bytes)") {
		t.Fatalf("last event: %s", last)
	}
}

// TestExecModelFails: when the model's stream fails, running actions are
// cancelled and the run fails with the model's error.
func TestExecModelFails(t *testing.T) {
	s := newGate(nil)
	model := &fakeModel{
		steps:  texts(`<action id="s" mode="async">{"name":"slow"}</action><action id="w" mode="async">{"name":"slow","depends_on":"s"}</action><response>x`),
		status: canonical.StatusFailed, err: canonical.Errorf(canonical.CodeUnavailable, "model lost"),
	}
	be := Wrap(model, Config{Tools: &fakeTools{fns: map[string]toolFn{"slow": s.fn}}})
	defer be.Close()
	lines := startRun(t, be, nil).rest(t)
	for _, want := range []string{
		`failed s  canceled: action "s": cancelled: context canceled`,
		`failed w  aborted: action "w": not_run`,
		"lifecycle FAILED unavailable: model lost",
	} {
		index(t, lines, want)
	}
}

// TestExecClose: closing mid-run stops everything (goleak checks).
func TestExecClose(t *testing.T) {
	s := newGate(nil)
	be := wrap(t, texts(`<action id="s">{"name":"slow"}</action><response>x</response>`), map[string]toolFn{"slow": s.fn}, Config{})
	st, err := be.Start(context.Background(), &canonical.Request{})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { // Recv drives the run; Close comes from another goroutine
		for {
			if _, err := st.Recv(); err != nil {
				errc <- err
				return
			}
		}
	}()
	waitClosed(t, s.started, "tool start")
	_ = st.Close()
	if err := <-errc; canonical.CodeOf(err) != canonical.CodeCanceled {
		t.Fatalf("Recv after Close: %v", err)
	}
	_ = st.Close()
}

// TestWrapPassThrough: non-text blocks and other events of the inner
// stream pass through; text in several inner text blocks is one stream.
func TestWrapPassThrough(t *testing.T) {
	inner := backendFunc(func(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
		b := canonical.NewBuilder()
		var evs []*canonical.Event
		evs = b.Lifecycle(evs, canonical.StatusRunning)
		evs = b.Reasoning(evs, "native reasoning")
		evs = b.Text(evs, "<thou")
		evs = b.FinishBlock(evs)
		evs = b.Text(evs, "ght>x</thought>")
		evs = b.ToolCall(evs, "call-1", "calculator")
		evs = b.ToolArgs(evs, `{"expression":"1"}`)
		evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindCustom{Custom: &canonical.Custom{Name: "note"}}})
		evs = b.Text(evs, "<response>y</response>")
		evs = b.FinishMessage(evs, canonical.FinishStop, &canonical.Usage{OutputTokens: 9})
		evs = b.End(evs, canonical.StatusCompleted, nil)
		return &sliceStream{evs: evs}, nil
	})
	be := Wrap(inner, Config{})
	defer be.Close()
	got := startRun(t, be, nil).rest(t)
	want := []string{
		"lifecycle RUNNING",
		"message{",
		"thought{", `  "native reasoning"`, "}",
		"thought{", `  "x"`, "}",
		`action call-1 "calculator"`, `  "{\"expression\":\"1\"}"`, "custom note null", "}",
		"text{", `  "y"`, "}",
		"message} STOP",
		"lifecycle COMPLETED",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

type backendFunc func(context.Context, *canonical.Request) (canonical.Stream, error)

func (f backendFunc) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	return f(ctx, req)
}

type sliceStream struct{ evs []*canonical.Event }

func (s *sliceStream) Recv() (*canonical.Event, error) {
	if len(s.evs) == 0 {
		return nil, io.EOF
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, nil
}

func (s *sliceStream) Close() error { return nil }

// TestExecNestedFireAndForget: a fire_and_forget nested run may outlive
// its run; the run still ends valid, without its events.
func TestExecNestedFireAndForget(t *testing.T) {
	release := make(chan struct{})
	runner := fakeRunner{"slow": &fakeModel{steps: []step{{text: "partial "}, {wait: release, text: "rest"}}}}
	be := Wrap(&fakeModel{steps: texts(`<action id="f" type="agent" mode="fire_and_forget">{"name":"slow"}</action><response>done</response>`)}, Config{Runner: runner})
	defer be.Close()
	lines := startRun(t, be, nil).rest(t)
	index(t, lines, "started f slow")
	for _, l := range lines {
		if strings.HasPrefix(l, "[f]") {
			t.Fatalf("a fire_and_forget nested run's events were shown:\n%s", strings.Join(lines, "\n"))
		}
	}
	close(release)
}

// TestExecActionWithoutID: an action without an id attribute runs as
// action-<n> (issue 36 #2: the Cortex spec does not require an id).
func TestExecActionWithoutID(t *testing.T) {
	be := wrap(t, []step{
		{text: `<action type="tool">{"name":"one"}</action><action>{"name":"two"}</action>`},
		{text: `<response>done</response>`},
	}, map[string]toolFn{"one": value(1), "two": value("second")}, Config{})
	r := startRun(t, be, nil)
	lines := r.rest(t)
	before(t, lines, "started action-1 one", "finished action-1")
	before(t, lines, "started action-2 two", "finished action-2")
	before(t, lines, "finished action-2", `"done"`)
}

// keyRecorder records the caller's key each nested run starts under.
type keyRecorder struct {
	canonical.Backend
	keys chan string
}

func (k *keyRecorder) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	name := "(none)"
	if p := canonical.PrincipalFrom(ctx); p != nil {
		name = p.Name
	}
	k.keys <- name
	return k.Backend.Start(ctx, req)
}

// TestExecNestedRunsKeepTheCallersKey: every nested run starts as the
// caller's key, the bridge's check of the targets it may use included: a
// sync action's and a fire_and_forget action's, which outlives the run
// (it ran under no key: any target).
func TestExecNestedRunsKeepTheCallersKey(t *testing.T) {
	rec := &keyRecorder{Backend: &fakeModel{steps: texts("ok")}, keys: make(chan string, 2)}
	be := Wrap(&fakeModel{steps: texts(
		`<action id="s" type="agent" mode="sync">{"name":"helper"}</action>`,
		`<action id="f" type="agent" mode="fire_and_forget">{"name":"helper"}</action><response>done</response>`,
	)}, Config{Runner: fakeRunner{"helper": rec}})
	defer be.Close()
	ctx := canonical.WithPrincipal(t.Context(), &canonical.Principal{Name: "alice", Targets: []string{"helper"}})
	st, err := be.Start(ctx, &canonical.Request{RunId: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	_ = st.Close()
	for range 2 {
		select {
		case k := <-rec.keys:
			if k != "alice" {
				t.Errorf("a nested run started as %s, want alice", k)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a nested run did not start")
		}
	}
}
