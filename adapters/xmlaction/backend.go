package xmlaction

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Backend wraps a text backend: the inner backend's text is decoded as an
// XML action stream while it streams, each action is executed the moment
// its </action> arrives, and the run's events carry the reasoning, the
// tool-call blocks, the tool events and the response text in place of the
// inner text. Everything else of the inner stream passes through.
type Backend struct {
	inner canonical.Backend
	cfg   Config

	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
	bgMu     sync.Mutex
	bgN      int
	bgClosed bool
}

// Wrap returns inner with the decoder and the executor in front of it.
func Wrap(inner canonical.Backend, cfg Config) *Backend {
	ctx, cancel := context.WithCancel(context.Background())
	return &Backend{inner: inner, cfg: cfg.withDefaults(), bgCtx: ctx, bgCancel: cancel}
}

// Knows reports whether the inner backend serves target (true when it does
// not say), so a wrapped route still serves only its backend's targets.
func (b *Backend) Knows(target string) bool {
	if k, ok := b.inner.(interface{ Knows(string) bool }); ok {
		return k.Knows(target)
	}
	return true
}

// Close cancels the fire_and_forget actions still running (they outlive
// their runs, each bounded by its timeout) and waits for them.
func (b *Backend) Close() error {
	b.bgMu.Lock()
	b.bgClosed = true
	b.bgMu.Unlock()
	b.bgCancel()
	b.bg.Wait()
	return nil
}

func (b *Backend) acquire() bool {
	b.bgMu.Lock()
	defer b.bgMu.Unlock()
	if b.bgClosed || b.bgN >= b.cfg.MaxBackground {
		return false
	}
	b.bgN++
	b.bg.Add(1)
	return true
}

func (b *Backend) release() {
	b.bgMu.Lock()
	b.bgN--
	b.bgMu.Unlock()
	b.bg.Done()
}

// Start implements canonical.Backend.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	sctx, cancel := context.WithCancel(ctx)
	up, err := b.inner.Start(sctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &xstream{
		be: b, cfg: b.cfg, log: b.cfg.Logger.With("protocol", "xml"),
		ctx: sctx, cancel: cancel, inner: up,
		in: make(chan innerMsg), exec: make(chan execMsg), quit: make(chan struct{}),
		b:     canonical.NewBuilder(),
		runID: req.GetRunId(),
		depth: int(req.GetExtensions()[extDepth].GetNumberValue()),
		byID:  map[string]*act{}, byKey: map[string]*act{}, fwd: map[string][]*act{},
	}
	s.b.MessageID = req.GetRunId() + "-"
	s.d = newDecoder(b.cfg, s.b)
	s.d.track = true
	s.wg.Add(1)
	go s.readLoop()
	return s, nil
}

// innerMsg is one Recv result of the inner stream.
type innerMsg struct {
	ev  *canonical.Event
	err error
}

// qitem is an entry of the output queue: decoded events wait there, in
// order, behind sync actions and $references.
type qitem struct {
	ev   *canonical.Event
	mark *act   // an action's place: its own events flow once it is passed
	wait *act   // this item and all after it wait until wait has ended
	ref  string // ev is a text delta to fill with $ref's value
	size int
}

// xstream is one wrapped run. Recv's goroutine owns all its state except
// what Close touches (mu, closed, the channels, the contexts); readLoop and
// the action goroutines talk to it over in and exec.
type xstream struct {
	be     *Backend
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	inner  canonical.Stream
	runID  string
	depth  int

	in       chan innerMsg
	exec     chan execMsg
	quit     chan struct{}
	quitOnce sync.Once
	wg       sync.WaitGroup // readLoop and the non-fire-and-forget actions
	mu       sync.Mutex
	closed   bool
	once     sync.Once

	b     *canonical.Builder
	d     *Decoder
	guard canonical.Guard // over the emitted events

	queue []qitem
	held  int
	ready []*canonical.Event

	inText    bool   // the inner text block being decoded is open
	passing   bool   // an inner non-text block is being passed through
	passIndex uint32 // its index in our output

	innerDone  bool
	final      *canonical.Event // the terminal event, once nothing else is owed
	terminated bool             // the terminal event has been emitted
	ended      bool             // ... and returned

	acts     []*act
	byID     map[string]*act
	byKey    map[string]*act
	fwd      map[string][]*act
	lastSync *act
	busy     int // actions (not fire_and_forget) that have not ended
	aborting bool
}

// readLoop forwards the inner stream's events until its end.
func (s *xstream) readLoop() {
	defer s.wg.Done()
	for {
		ev, err := s.inner.Recv()
		last := err != nil
		if !last {
			_, last = canonical.TerminalOf(ev) // before the event changes hands
		}
		select {
		case s.in <- innerMsg{ev, err}:
		case <-s.quit:
			return
		}
		if last {
			return
		}
	}
}

// Recv implements canonical.Stream.
func (s *xstream) Recv() (*canonical.Event, error) {
	for len(s.ready) == 0 {
		if s.ended {
			return nil, io.EOF
		}
		if s.tryEnd() {
			continue
		}
		in, done := s.in, s.ctx.Done()
		if s.innerDone {
			in, done = nil, nil
		}
		select {
		case m := <-in:
			s.onInner(m)
		case m := <-s.exec:
			s.onExec(m)
		case <-done:
			s.innerEnd(canonical.StatusCancelled, canonical.AsError(s.ctx.Err()))
			_ = s.inner.Close()
		case <-s.quit:
			return nil, canonical.Errorf(canonical.CodeCanceled, "xmlaction: stream closed")
		}
	}
	ev := s.ready[0]
	s.ready[0] = nil
	s.ready = s.ready[1:]
	if _, ok := canonical.TerminalOf(ev); ok {
		s.ended = true
		s.closeQuit()
	}
	return ev, nil
}

// Close implements canonical.Stream: it cancels the run's actions (not
// fire_and_forget ones) and the inner stream, and waits for its goroutines.
func (s *xstream) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.closeQuit()
		_ = s.inner.Close()
		s.wg.Wait()
	})
	return nil
}

func (s *xstream) closeQuit() { s.quitOnce.Do(func() { close(s.quit) }) }

func (s *xstream) onInner(m innerMsg) {
	if s.innerDone {
		return
	}
	if m.err != nil {
		if s.ctx.Err() != nil {
			s.innerEnd(canonical.StatusCancelled, canonical.AsError(s.ctx.Err()))
			return
		}
		ce := canonical.AsError(m.err)
		if errors.Is(m.err, io.EOF) {
			ce = canonical.Errorf(canonical.CodeUnavailable, "the wrapped backend ended the stream without a terminal event")
		}
		if ce.Code == canonical.CodeCanceled {
			s.innerEnd(canonical.StatusCancelled, ce)
			return
		}
		s.innerEnd(canonical.StatusFailed, ce)
		return
	}
	ev := m.ev
	if len(ev.GetNamespace()) != 0 {
		s.enqueue(ev)
		s.pump()
		return
	}
	var out []*canonical.Event
	switch k := ev.GetKind().(type) {
	case *canonical.KindLifecycle:
		if st, ok := canonical.TerminalOf(ev); ok {
			s.innerEnd(st, canonical.FromProto(k.Lifecycle.GetError()))
			return
		}
		out = s.b.Emit(out, ev)
	case *canonical.KindMessageStart:
		out = s.d.interrupt(out)
		ms := k.MessageStart
		out = s.b.StartMessage(out, ms.GetMessageId(), ms.GetRole())
		out[len(out)-1].GetMessageStart().Metadata = ms.GetMetadata()
	case *canonical.KindBlockStart:
		bs := k.BlockStart
		if bs.GetType() == canonical.BlockText {
			s.inText = true
			return
		}
		out = s.d.interrupt(out)
		out = s.b.StartBlock(out, bs.GetType(), bs.GetId(), bs.GetName(), bs.GetMime(), bs.GetRef())
		last := out[len(out)-1]
		last.Extensions = ev.GetExtensions()
		s.passing, s.passIndex = true, last.GetBlockStart().GetIndex()
	case *canonical.KindBlockDelta:
		if s.inText {
			evs, _ := s.d.Feed([]byte(k.BlockDelta.GetText()), nil)
			s.process(evs, s.d.takeMarks())
			return
		}
		if s.passing {
			out = s.b.Emit(out, &canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{
				Index: s.passIndex, Text: k.BlockDelta.GetText(), Data: k.BlockDelta.GetData(),
			}}})
		}
	case *canonical.KindBlockFinish:
		if s.inText {
			s.inText = false // the decoded block may go on in the next text block
			return
		}
		if s.passing {
			s.passing = false
			out = s.b.FinishBlock(out)
		}
	case *canonical.KindMessageFinish:
		out = s.d.interrupt(out)
		mf := k.MessageFinish
		out = s.b.FinishMessage(out, mf.GetFinishReason(), mf.GetUsage())
	default:
		out = s.b.Emit(out, ev)
	}
	s.enqueue(out...)
	s.pump()
}

// process queues a batch of decoded events, registering the actions it
// completes and holding response text at its $references.
func (s *xstream) process(evs []*canonical.Event, marks []mark) {
	pos := 0
	for _, m := range marks {
		s.enqueue(evs[pos:m.at]...)
		pos = m.at
		if m.act != nil {
			x := s.register(m.act)
			s.queue = append(s.queue, qitem{mark: x})
			if x.mode == modeSync && x.err == nil && !x.dup {
				s.queue = append(s.queue, qitem{wait: x})
			}
			continue
		}
		ev := evs[m.at]
		pos = m.at + 1
		y := s.lookup(m.ref)
		if y == nil {
			s.enqueue(ev)
			continue
		}
		size := len(ev.GetBlockDelta().GetText())
		s.queue = append(s.queue, qitem{ev: ev, ref: m.ref, wait: y, size: size})
		s.held += size
	}
	s.enqueue(evs[pos:]...)
	s.pump()
}

// innerEnd handles the end of the model's stream: what the decoder holds
// is decoded, actions that can never run fail, and the terminal event is
// kept until every action (but fire_and_forget ones) has ended.
func (s *xstream) innerEnd(status canonical.RunStatus, err *canonical.Error) {
	if s.innerDone {
		return
	}
	s.innerDone = true
	if s.terminated {
		return
	}
	evs := s.d.finish(nil)
	s.process(evs, s.d.takeMarks())
	s.endOfStream()
	if status == canonical.StatusFailed || status == canonical.StatusCancelled {
		s.abort()
	}
	out := s.b.End(nil, status, err)
	s.enqueue(out[:len(out)-1]...)
	s.final = out[len(out)-1]
	s.pump()
}

// tryEnd emits the terminal event once nothing else is owed.
func (s *xstream) tryEnd() bool {
	if s.terminated || s.final == nil || len(s.queue) > 0 || s.busy > 0 {
		return false
	}
	final := s.final
	s.final = nil
	s.emit(final)
	s.terminated = true
	return true
}

func (s *xstream) onExec(m execMsg) {
	if s.terminated {
		return
	}
	if m.ev != nil {
		s.emitFor(m.x, m.ev)
		return
	}
	s.finished(m.x, m.value, m.err)
	s.pump()
}

// enqueue appends events to the output queue.
func (s *xstream) enqueue(evs ...*canonical.Event) {
	for _, ev := range evs {
		size := 64 + len(ev.GetBlockDelta().GetText()) + len(ev.GetBlockDelta().GetData())
		s.queue = append(s.queue, qitem{ev: ev, size: size})
		s.held += size
	}
}

// pump moves the queue's head to the ready events until it reaches an
// item that must wait, then enforces MaxHeldBytes on what is left.
func (s *xstream) pump() {
	n := 0
	for n < len(s.queue) {
		it := &s.queue[n]
		if it.wait != nil && !it.wait.done() {
			break
		}
		if it.mark != nil {
			it.mark.shown = true
			for _, ev := range it.mark.deferred {
				s.emit(ev)
			}
			it.mark.deferred = nil
		}
		if it.ev != nil {
			if it.ref != "" {
				text := "$" + it.ref
				if it.wait.hasValue {
					text = stringify(it.wait.value)
				}
				it.ev.GetBlockDelta().Text = text
			}
			if it.ev.GetBlockDelta() == nil || it.ev.GetBlockDelta().GetText() != "" || len(it.ev.GetBlockDelta().GetData()) > 0 {
				s.emit(it.ev)
			}
		}
		s.held -= it.size
		*it = qitem{}
		n++
	}
	s.queue = s.queue[n:]
	if len(s.queue) == 0 {
		s.queue = nil
	}
	if s.held > s.cfg.MaxHeldBytes {
		s.failRun(canonical.Errorf(canonical.CodeResourceExhausted,
			"output waiting for actions exceeds MaxHeldBytes (%d bytes)", s.cfg.MaxHeldBytes))
	}
}

// emitFor emits an action's event, or keeps it until the action's block
// has been emitted.
func (s *xstream) emitFor(x *act, ev *canonical.Event) {
	if x.shown {
		s.emit(ev)
		return
	}
	x.deferred = append(x.deferred, ev)
}

// emit makes ev ready for Recv, checking it against the event model.
func (s *xstream) emit(ev *canonical.Event) {
	if s.terminated {
		return
	}
	if v := s.guard.Observe(ev); v != nil {
		s.log.Error("xmlaction broke the event model", "run", s.runID, "err", v.Message)
		s.failRun(v)
		return
	}
	s.ready = append(s.ready, ev)
	if _, ok := canonical.TerminalOf(ev); ok {
		s.terminated = true
	}
}

// failRun ends the run at once with err: actions are cancelled, held
// output is dropped, and what the emitted events still owe is closed.
func (s *xstream) failRun(err *canonical.Error) {
	if s.terminated {
		return
	}
	s.log.Warn("run failed", "run", s.runID, "code", err.Code.String(), "err", err.Message)
	s.aborting = true
	for _, x := range s.acts {
		if x.st == asRunning && x.mode != modeFire && x.cancel != nil {
			x.cancel()
		}
	}
	s.queue, s.held, s.final, s.innerDone = nil, 0, nil, true
	_ = s.inner.Close()
	s.ready = append(s.ready, s.guard.End(nil, canonical.StatusFailed, err)...)
	s.terminated = true
}
