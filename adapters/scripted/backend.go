package scripted

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Targets lists the targets the scripted backend serves.
var Targets = []string{"echo", "demo-agent", "demo-approval", "stream", "cortex-example"}

// Config configures the scripted backend.
type Config struct {
	// Tools runs demo-agent's tool call; required for demo-agent.
	Tools canonical.Tools
	// MaxDeltas bounds the "deltas" parameter of the stream target; 0 means
	// the default, 10,000,000.
	MaxDeltas int
}

// Backend is the scripted backend.
type Backend struct {
	cfg Config
}

// New returns a scripted backend.
func New(cfg Config) *Backend {
	if cfg.MaxDeltas == 0 {
		cfg.MaxDeltas = 10_000_000
	}
	return &Backend{cfg: cfg}
}

// Knows reports whether target is one of Targets.
func (b *Backend) Knows(target string) bool {
	for _, t := range Targets {
		if t == target {
			return true
		}
	}
	return false
}

// faults are the fault-injection parameters.
type faults struct {
	delay     time.Duration
	failAfter int // -1: never
	failErr   *canonical.Error
	hang      bool
	splitRune bool
}

func param(req *canonical.Request, name string) (any, bool) {
	v, ok := req.GetParameters()[name]
	if !ok {
		return nil, false
	}
	return v.AsInterface(), true
}

func intParam(req *canonical.Request, name string, def int) (int, error) {
	v, ok := param(req, name)
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || x < 0 || x > math.MaxInt32 {
			return 0, canonical.Errorf(canonical.CodeInvalidArgument, "parameter %s must be a non-negative integer", name)
		}
		return int(x), nil
	case string:
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 {
			return 0, canonical.Errorf(canonical.CodeInvalidArgument, "parameter %s must be a non-negative integer", name)
		}
		return n, nil
	}
	return 0, canonical.Errorf(canonical.CodeInvalidArgument, "parameter %s must be a non-negative integer", name)
}

func boolParam(req *canonical.Request, name string) bool {
	v, _ := param(req, name)
	b, ok := v.(bool)
	return ok && b
}

func parseFaults(req *canonical.Request) (faults, error) {
	f := faults{failAfter: -1}
	ms, err := intParam(req, "delay_ms", 0)
	if err != nil {
		return f, err
	}
	f.delay = time.Duration(ms) * time.Millisecond
	if f.failAfter, err = intParam(req, "fail_after", -1); err != nil {
		return f, err
	}
	if f.failAfter >= 0 {
		code := canonical.CodeInternal
		if v, ok := param(req, "fail_code"); ok {
			switch x := v.(type) {
			case string:
				c, ok := canonical.ParseCode(x)
				if !ok {
					return f, canonical.Errorf(canonical.CodeInvalidArgument, "parameter fail_code: unknown code %q", x)
				}
				code = c
			case float64:
				code = canonical.Code(x)
			}
		}
		if code == canonical.CodeOK || int(code) >= len(canonical.AllCodes) {
			return f, canonical.Errorf(canonical.CodeInvalidArgument, "parameter fail_code must name a non-OK code")
		}
		msg, _ := param(req, "fail_message")
		s, _ := msg.(string)
		if s == "" {
			s = fmt.Sprintf("injected failure after %d deltas", f.failAfter)
		}
		f.failErr = canonical.Errorf(code, "%s", s)
	}
	f.hang = boolParam(req, "hang")
	f.splitRune = boolParam(req, "split_rune")
	return f, nil
}

// Start implements canonical.Backend.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	if !b.Knows(req.GetTarget()) {
		return nil, canonical.Errorf(canonical.CodeNotFound, "unknown target %q", req.GetTarget())
	}
	f, err := parseFaults(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{ctx: ctx, cancel: cancel, f: f, b: canonical.NewBuilder(), tools: b.cfg.Tools}
	s.b.MessageID = req.GetRunId() + "-"
	if f.hang {
		s.seen = &canonical.Guard{}
	}
	s.pending = s.b.Lifecycle(s.pending, canonical.StatusRunning)
	switch req.GetTarget() {
	case "echo":
		s.words = splitWords(canonical.PromptText(req))
		s.plan = []func() bool{s.textDeltas, s.complete}
	case "cortex-example":
		s.words = cortexTokens()
		s.plan = []func() bool{s.textDeltas, s.complete}
	case "stream":
		n, err := intParam(req, "deltas", 16)
		if err != nil {
			cancel()
			return nil, err
		}
		if n > b.cfg.MaxDeltas {
			cancel()
			return nil, canonical.Errorf(canonical.CodeInvalidArgument, "parameter deltas exceeds %d", b.cfg.MaxDeltas)
		}
		text := "tok "
		if v, ok := param(req, "delta_text"); ok {
			if t, ok := v.(string); ok {
				text = t
			}
		}
		s.repeat, s.repeatText = n, text
		s.plan = []func() bool{s.textDeltas, s.complete}
	case "demo-agent":
		s.plan = []func() bool{s.agentThink, s.agentTool, s.agentAnswer, s.complete}
	case "demo-approval":
		id := "approve-" + req.GetRunId()
		if v, ok := req.GetResume()[id]; ok || len(req.GetResume()) > 0 {
			if !ok { // resumed under another run's interrupt id
				for _, rv := range req.GetResume() {
					v = rv
				}
			}
			m, _ := v.AsInterface().(map[string]any)
			if approved, _ := m["approved"].(bool); approved {
				s.plan = []func() bool{s.agentThink, s.agentTool, s.agentAnswer, s.complete}
			} else {
				s.words = splitWords("The calculator call was declined.")
				s.plan = []func() bool{s.textDeltas, s.complete}
			}
			break
		}
		s.interruptID = id
		s.plan = []func() bool{s.agentThink, s.askApproval}
	}
	return s, nil
}

// splitWords cuts text into words, each delta carrying its leading space.
func splitWords(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

type stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	f      faults
	b      *canonical.Builder
	tools  canonical.Tools
	// seen observes what Recv returned, on a run asked to hang: the hang
	// drops the events its step made after the first content delta (a
	// block's finish, the message's), which the builder counts as sent,
	// so what the run still owes when cancelled is taken from seen.
	seen *canonical.Guard

	plan    []func() bool // steps; a step appends to pending and reports whether it is done
	pending []*canonical.Event
	next    int // index of the next pending event

	words       []string
	repeat      int
	repeatText  string
	sent        int // text deltas sent
	acc         canonical.TextAccumulator
	interruptID string
	toolResult  string
}

// Recv implements canonical.Stream.
func (s *stream) Recv() (*canonical.Event, error) {
	for s.next == len(s.pending) {
		if s.b.Ended() {
			return nil, io.EOF
		}
		s.pending, s.next = s.pending[:0], 0
		if err := s.ctx.Err(); err != nil {
			s.abort(err)
			continue
		}
		if len(s.plan) == 0 {
			if s.f.hang { // a run without content hangs before it ends
				s.f.hang = false
				s.plan = []func() bool{s.waitCancel}
				continue
			}
			s.pending = s.b.End(s.pending, canonical.StatusCompleted, nil)
			continue
		}
		if s.plan[0]() {
			s.plan = s.plan[1:]
		}
	}
	ev := s.pending[s.next]
	s.next++
	if s.seen != nil {
		s.seen.Observe(ev)
	}
	if _, delta := ev.GetKind().(*canonical.KindBlockDelta); s.f.hang && delta && !s.b.Ended() {
		// Hang after the first content delta (so every frontend has sent
		// its first response): the next Recv waits for cancellation.
		s.f.hang = false
		s.pending, s.next = s.pending[:0], 0
		s.plan = []func() bool{s.waitCancel}
	}
	return ev, nil
}

func (s *stream) abort(err error) {
	ce := canonical.AsError(err)
	if s.seen != nil {
		s.pending = s.seen.End(s.pending, canonical.StatusCancelled, ce)
		s.b.End(nil, canonical.StatusCancelled, ce) // the builder is done: Recv ends after these
		return
	}
	s.pending = s.b.End(s.pending, canonical.StatusCancelled, ce)
}

// Close implements canonical.Stream.
func (s *stream) Close() error {
	s.cancel()
	return nil
}

// sleep waits d or until cancellation; it reports false when cancelled.
func (s *stream) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *stream) waitCancel() bool {
	<-s.ctx.Done()
	return false // Recv sees ctx.Err and aborts
}

// textDeltas emits one text delta per call (words, then repeats), then the
// split rune if asked.
func (s *stream) textDeltas() bool {
	if s.f.failErr != nil && s.sent == s.f.failAfter {
		s.pending = s.b.End(s.pending, canonical.StatusFailed, s.f.failErr)
		return true
	}
	if !s.sleep(s.f.delay) {
		return false
	}
	var chunk []byte
	switch {
	case len(s.words) > 0:
		chunk, s.words = []byte(s.words[0]), s.words[1:]
	case s.repeat > 0:
		chunk, s.repeat = []byte(s.repeatText), s.repeat-1
	case s.f.splitRune && s.acc.Pending() == 0 && s.sent >= 0:
		s.f.splitRune = false
		chunk = []byte(" \xF0\x9F") // first half of U+1F600
		s.pending = s.b.Text(s.pending, s.acc.Append(chunk))
		s.sent++
		return false
	case s.acc.Pending() > 0:
		chunk = []byte("\x98\x80!") // second half, then more text
	default:
		return true
	}
	s.pending = s.b.Text(s.pending, s.acc.Append(chunk))
	s.sent++
	return false
}

func (s *stream) complete() bool {
	s.pending = s.b.FinishMessage(s.pending, canonical.FinishStop, &canonical.Usage{OutputTokens: int64(s.sent)})
	return true
}

const demoArgs = `{"expression": "6 * 7"}`

func (s *stream) agentThink() bool {
	s.pending = s.b.StartMessage(s.pending, "", "assistant")
	for _, w := range splitWords("I should compute 6 * 7 with the calculator.") {
		s.pending = s.b.Reasoning(s.pending, w)
	}
	s.pending = s.b.ToolCall(s.pending, "call-1", "calculator")
	for _, part := range []string{`{"expression"`, `: "6 * 7"}`} {
		s.pending = s.b.ToolArgs(s.pending, part)
	}
	s.pending = s.b.FinishMessage(s.pending, canonical.FinishToolCalls, nil)
	return true
}

func (s *stream) askApproval() bool {
	s.pending = s.b.Emit(s.pending, &canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{
		InterruptId: s.interruptID,
		Payload:     canonical.Value(map[string]any{"question": "Approve the calculator call?", "tool": "calculator", "args": map[string]any{"expression": "6 * 7"}}),
	}}})
	s.pending = s.b.End(s.pending, canonical.StatusInterrupted, nil)
	return true
}

func (s *stream) agentTool() bool {
	var args map[string]any
	_ = json.Unmarshal([]byte(demoArgs), &args)
	s.pending = s.b.Emit(s.pending, &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{
		ToolCallId: "call-1", Name: "calculator", Input: canonical.Value(args),
	}}})
	if s.tools == nil {
		s.pending = s.b.End(s.pending, canonical.StatusFailed, canonical.Errorf(canonical.CodeFailedPrecondition, "demo-agent: no tools configured"))
		return true
	}
	out, err := s.tools.Call(s.ctx, "calculator", []byte(demoArgs))
	if err != nil {
		ce := canonical.AsError(err)
		s.pending = s.b.Emit(s.pending, &canonical.Event{Kind: &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{ToolCallId: "call-1", Error: ce.Proto()}}})
		s.pending = s.b.End(s.pending, canonical.StatusFailed, ce)
		return true
	}
	// A tool's result is read as encoding/json read it (the last of
	// repeated names wins, invalid UTF-8 becomes U+FFFD); a result that is
	// not JSON is null, where v2 would leave what it read before the error
	// (so is one with a number beyond float64, which encoding/json kept
	// with that number null).
	var v any
	if json.Unmarshal(out, &v, json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true)) != nil {
		v = nil
	}
	s.pending = s.b.Emit(s.pending, &canonical.Event{Kind: &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{
		ToolCallId: "call-1", Output: canonical.Value(v),
	}}})
	if m, ok := v.(map[string]any); ok {
		s.toolResult = fmt.Sprint(m["result"])
	}
	return true
}

func (s *stream) agentAnswer() bool {
	s.pending = s.b.StartMessage(s.pending, "", "assistant")
	s.words = splitWords("6 * 7 = " + s.toolResult + ".")
	s.plan = append([]func() bool{s.textDeltas}, s.plan[1:]...)
	return false // the plan was replaced; do not drop its head
}
