package driver

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// Script is what one target plays, with the hooks the runner observes it
// by. The hooks may be called from any goroutine; nil hooks are skipped.
type Script struct {
	Response *cv1.Response
	// Hanging is called when a run starts to hang (Response.Hang).
	Hanging func()
	// Cancelled is called when a run's context ends before its end.
	Cancelled func()
	// Emitted receives each event the upstream produces (for --trace).
	Emitted func(*canonical.Event)
}

// Backend is the in-process canonical upstream: a canonical.Backend that
// plays the Script its Lookup returns for the request's target.
type Backend struct {
	Lookup func(target string) (*Script, bool)
}

// Knows reports whether a script exists for target.
func (b *Backend) Knows(target string) bool {
	_, ok := b.Lookup(target)
	return ok
}

// Start implements canonical.Backend. A response with a failure and no
// output fails here, before any event.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	sc, ok := b.Lookup(req.GetTarget())
	if !ok {
		return nil, canonical.Errorf(canonical.CodeNotFound, "conformance driver: no script for target %q", req.GetTarget())
	}
	r := sc.Response
	if RefusesBeforeFirstEvent(r) {
		return nil, FailureError(r.GetFailure())
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{ctx: ctx, cancel: cancel, sc: sc, delay: time.Duration(r.GetDelayMs()) * time.Millisecond}
	s.steps = Events(r, canonical.PromptText(req))
	return s, nil
}

// RefusesBeforeFirstEvent reports whether r fails before producing
// anything: a failure with no output.
func RefusesBeforeFirstEvent(r *cv1.Response) bool {
	return r.GetFailure() != nil && !r.GetEcho() && len(r.GetItems()) == 0 && !r.GetHang()
}

// FailureError is f as a canonical error (code internal when the name is
// unknown).
func FailureError(f *cv1.Failure) *canonical.Error {
	code, ok := canonical.ParseCode(f.GetCode())
	if !ok || code == canonical.CodeOK {
		code = canonical.CodeInternal
	}
	msg := f.GetMessage()
	if msg == "" {
		msg = "scripted failure"
	}
	return canonical.Errorf(code, "%s", msg)
}

// Step is one event a definition produces; Delta marks the content deltas
// Response.DelayMs is slept before.
type Step struct {
	Event *canonical.Event
	Delta bool
}

// Events returns the events r produces for a prompt, from running to the
// last content event: the terminal event (completed, or failed with the
// failure) is not included, nor anything for Hang.
func Events(r *cv1.Response, prompt string) []Step {
	p := &player{b: canonical.NewBuilder()}
	p.b.MessageID = "conf-"
	p.emit(p.b.Lifecycle(nil, canonical.StatusRunning), false)
	if r.GetEcho() && prompt != "" {
		p.text(Words(prompt), false)
	}
	for _, it := range r.GetItems() {
		switch k := it.GetKind().(type) {
		case *cv1.Item_Text:
			p.text(Deltas(k.Text), false)
		case *cv1.Item_Reasoning:
			p.text(Deltas(k.Reasoning), true)
		case *cv1.Item_ToolCall:
			tc := k.ToolCall
			p.emit(p.b.ToolCall(nil, tc.GetId(), tc.GetName()), false)
			var acc canonical.TextAccumulator
			for _, d := range Deltas(tc.GetArguments()) {
				p.emit(p.b.ToolArgs(nil, acc.AppendString(d)), true)
			}
			p.emit(p.b.ToolArgs(nil, acc.Flush()), true)
			p.emit(p.b.FinishBlock(nil), false)
		case *cv1.Item_Tool:
			p.tool(k.Tool)
		case *cv1.Item_Data:
			p.emit(p.b.Data(nil, k.Data.GetMime(), DataBytes(k.Data)), true)
		case *cv1.Item_Ref:
			p.emit(p.b.Ref(nil, k.Ref.GetMime(), k.Ref.GetUri()), false)
		case *cv1.Item_Message:
			p.emit(p.b.FinishMessage(nil, canonical.FinishStop, nil), false)
			p.emit(p.b.StartMessage(nil, "", k.Message.GetRole()), false)
		case *cv1.Item_Error:
			p.emit(p.b.FinishBlock(nil), false) // an error stands between blocks
			p.emit(p.b.Emit(nil, &canonical.Event{Kind: &canonical.KindError{Error: FailureError(k.Error).Proto()}}), false)
		}
	}
	return p.steps
}

// DataBytes returns a data item's bytes: its UTF-8 text, else Size bytes
// of a repeating pattern (at most MaxTextBytes).
func DataBytes(d *cv1.Data) []byte {
	if d.GetUtf8() != "" {
		return []byte(d.GetUtf8())
	}
	n := min(int(d.GetSize()), MaxTextBytes)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

type player struct {
	b     *canonical.Builder
	steps []Step
}

func (p *player) emit(evs []*canonical.Event, delta bool) {
	for _, ev := range evs {
		_, isDelta := ev.GetKind().(*canonical.KindBlockDelta)
		p.steps = append(p.steps, Step{Event: ev, Delta: delta && isDelta})
	}
}

// text appends the deltas to the open text (or reasoning) block, opening
// one if needed: consecutive text items (and the echo) make one block.
// Deltas pass through the UTF-8 accumulator, so a rune cut across deltas
// arrives whole.
func (p *player) text(deltas []string, reasoning bool) {
	var acc canonical.TextAccumulator
	add := p.b.Text
	if reasoning {
		add = p.b.Reasoning
	}
	for _, d := range deltas {
		p.emit(add(nil, acc.AppendString(d)), true)
	}
	p.emit(add(nil, acc.Flush()), true)
}

// tool appends tool activity, outside any message.
func (p *player) tool(t *cv1.ToolActivity) {
	p.emit(p.b.FinishMessage(nil, canonical.FinishToolCalls, nil), false)
	p.emit(p.b.Emit(nil, &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{
		ToolCallId: t.GetId(), Name: t.GetName(), Input: t.GetInput(),
	}}}), false)
	for _, o := range t.GetOutput() {
		p.emit(p.b.Emit(nil, &canonical.Event{Kind: &canonical.KindToolOutput{ToolOutput: &canonical.ToolOutput{
			ToolCallId: t.GetId(), Delta: o,
		}}}), false)
	}
	if f := t.GetFailure(); f != nil {
		p.emit(p.b.Emit(nil, &canonical.Event{Kind: &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{
			ToolCallId: t.GetId(), Error: FailureError(f).Proto(),
		}}}), false)
		return
	}
	p.emit(p.b.Emit(nil, &canonical.Event{Kind: &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{
		ToolCallId: t.GetId(), Output: t.GetResult(),
	}}}), false)
}

type stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	sc     *Script
	delay  time.Duration
	steps  []Step
	next   int
	guard  canonical.Guard
	tail   []*canonical.Event // the finishes and terminal event owed
	ended  atomic.Bool
	hung   bool
	once   sync.Once
}

// Recv implements canonical.Stream.
func (s *stream) Recv() (*canonical.Event, error) {
	for {
		if len(s.tail) > 0 {
			ev := s.tail[0]
			s.tail = s.tail[1:]
			return s.out(ev), nil
		}
		if s.ended.Load() {
			return nil, io.EOF
		}
		if err := s.ctx.Err(); err != nil {
			s.cancelled()
			s.end(canonical.StatusCancelled, canonical.AsError(err))
			continue
		}
		if s.next < len(s.steps) {
			st := s.steps[s.next]
			if st.Delta && !s.sleep() {
				continue
			}
			s.next++
			return s.out(st.Event), nil
		}
		r := s.sc.Response
		if in := r.GetInterrupt(); in != nil && r.GetFailure() == nil {
			// Close what is open, ask, then end interrupted.
			tail := s.guard.End(nil, canonical.StatusInterrupted, nil)
			ask := &canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{
				InterruptId: in.GetId(), Payload: in.GetPayload(),
			}}}
			last := len(tail) - 1
			s.tail = append(append(tail[:last:last], ask), tail[last])
			s.ended.Store(true)
			continue
		}
		if r.GetHang() && !s.hung {
			s.hung = true
			if s.sc.Hanging != nil {
				s.sc.Hanging()
			}
			<-s.ctx.Done()
			continue
		}
		if f := r.GetFailure(); f != nil {
			s.end(canonical.StatusFailed, FailureError(f))
		} else {
			s.end(canonical.StatusCompleted, nil)
		}
	}
}

func (s *stream) out(ev *canonical.Event) *canonical.Event {
	_ = s.guard.Observe(ev)
	if s.sc.Emitted != nil {
		s.sc.Emitted(ev)
	}
	return ev
}

// end queues what the run still owes: a completed run closes its open
// message with finish reason stop; any run ends with one terminal event.
func (s *stream) end(st canonical.RunStatus, err *canonical.Error) {
	s.ended.Store(true)
	if st == canonical.StatusCompleted {
		var open []*canonical.Event
		for _, step := range s.steps[:s.next] {
			open = trackOpen(open, step.Event)
		}
		for i := len(open) - 1; i >= 0; i-- {
			switch k := open[i].GetKind().(type) {
			case *canonical.KindBlockStart:
				s.tail = append(s.tail, &canonical.Event{Kind: &canonical.KindBlockFinish{BlockFinish: &canonical.BlockFinish{Index: k.BlockStart.GetIndex()}}})
			case *canonical.KindMessageStart:
				s.tail = append(s.tail, &canonical.Event{Kind: &canonical.KindMessageFinish{MessageFinish: &canonical.MessageFinish{FinishReason: canonical.FinishStop}}})
			}
		}
		s.tail = append(s.tail, canonical.Terminal(canonical.StatusCompleted, nil))
		return
	}
	s.tail = s.guard.End(s.tail, st, err)
}

// trackOpen keeps the stack of open message and block starts.
func trackOpen(open []*canonical.Event, ev *canonical.Event) []*canonical.Event {
	switch ev.GetKind().(type) {
	case *canonical.KindMessageStart, *canonical.KindBlockStart:
		return append(open, ev)
	case *canonical.KindMessageFinish, *canonical.KindBlockFinish:
		if len(open) > 0 {
			return open[:len(open)-1]
		}
	}
	return open
}

// sleep waits the delay; false when the run was cancelled first.
func (s *stream) sleep() bool {
	if s.delay <= 0 {
		return true
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// cancelled reports the run's cancellation to the script, once.
func (s *stream) cancelled() {
	s.once.Do(func() {
		if s.sc.Cancelled != nil {
			s.sc.Cancelled()
		}
	})
}

// Close implements canonical.Stream: closing a run that has not ended
// cancels it (and tells the script).
func (s *stream) Close() error {
	if !s.ended.Load() {
		s.cancelled()
	}
	s.cancel()
	return nil
}
