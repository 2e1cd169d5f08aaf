package evergreen

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

// session is one Evergreen session, whatever its transport: the node
// store, the actions, and the goroutines running them.
//
// Goroutines: the transport's handler goroutine reads messages and calls
// handle, then wait; each started action runs in a goroutine (run) that the
// session owns and wait joins, as it does the one that interrupts the
// transport after an abort. State is guarded by mu; messages go to the
// client through out, which is safe for concurrent use.
type session struct {
	f    *Frontend
	id   string
	ctx  context.Context // cancelled when the session ends: stops its runs
	stop context.CancelFunc
	log  *slog.Logger
	json bool
	// out sends a message to the client. With hold true the transport may
	// keep it in its buffer, as the sending action has its next event at
	// hand: it goes out with a later message sent without hold, or at
	// flush, which the action calls before it waits for anything.
	out   func(m *ev.SessionMessage, hold bool) error
	flush func() // nil: out keeps nothing back
	// interrupt unblocks the transport's reader after an abort and, on
	// WebSocket, sends the close frame; unblock fails a write blocked on a
	// client that does not read.
	interrupt func(e *canonical.Error, shutdown bool)
	unblock   func()

	mu       sync.Mutex
	st       *store
	pending  []*generate
	running  int
	ranOnce  bool // an action has started: the thread has a run
	seen     []*ev.Action
	inputEnd bool
	draining bool
	// ended is set when wait has decided the session is over: no
	// goroutine may start after it (join is waiting for them).
	ended   bool
	err     *canonical.Error
	changed chan struct{}
	wg      sync.WaitGroup
	// active is when the session last received a message or had its
	// last running action end: idle_timeout counts from it (idleCheck).
	active time.Time
	idle   *time.Timer // nil: idle_timeout is off
}

func (f *Frontend) newSession(ctx context.Context, json bool) *session {
	s := &session{f: f, id: uuid4(), json: json, changed: make(chan struct{}, 1), active: time.Now()}
	s.ctx, s.stop = context.WithCancel(ctx)
	s.log = f.cfg.Logger.With("thread", s.thread())
	s.st = newStore(f.cfg.Limits, json)
	return s
}

// thread is the canonical thread of the session's runs: every action of a
// session runs on one thread.
func (s *session) thread() string { return "evergreen-" + s.id }

// signal wakes wait.
func (s *session) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// handle takes one message from the client.
func (s *session) handle(m *ev.SessionMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.active = time.Now()
	for _, f := range m.GetNodeFragments() {
		if err := s.st.apply(f); err != nil {
			s.abortLocked(err)
			return
		}
	}
	for _, a := range m.GetActions() {
		if err := s.addAction(a); err != nil {
			s.abortLocked(err)
			return
		}
	}
	s.startReady()
}

func (s *session) addAction(a *ev.Action) error {
	for _, old := range s.seen {
		if proto.Equal(old, a) {
			return nil // a retransmission
		}
	}
	if s.draining {
		return canonical.Errorf(canonical.CodeUnavailable, "server is shutting down: no new actions")
	}
	if len(s.seen) >= s.f.cfg.MaxActions {
		return canonical.Errorf(canonical.CodeResourceExhausted, "session sent more than %d actions (MaxActions)", s.f.cfg.MaxActions)
	}
	g, err := parseAction(s.st, a, s.resolve)
	if err != nil {
		return err
	}
	if len(g.unknownTypes) > 0 {
		s.log.Debug("ignoring action configs of unknown types", "types", g.unknownTypes)
	}
	s.seen = append(s.seen, a)
	s.pending = append(s.pending, g)
	return nil
}

func (s *session) resolve(id string) (string, bool) {
	if id == "" {
		id = s.f.cfg.DefaultTarget
	}
	_, ok := canonical.VisibleTarget(s.f.cfg.Runner, canonical.PrincipalFrom(s.ctx), id)
	return id, ok
}

// startReady starts the pending actions whose input is complete, up to
// MaxRunning. mu is held.
func (s *session) startReady() {
	if s.err != nil || s.ended {
		return
	}
	keep := s.pending[:0]
	for i, g := range s.pending {
		if !g.input.complete || s.running >= s.f.cfg.MaxRunning {
			keep = append(keep, g)
			continue
		}
		req, err := g.request(s.st, s.thread(), s.f.refs)
		if err != nil {
			keep = append(keep, s.pending[i:]...)
			s.pending = keep
			s.abortLocked(err)
			return
		}
		if !s.ranOnce {
			// The session's thread is new (its id was minted with the
			// session): its first run takes the thread's id as its own,
			// which tells the bridge the thread has no history, so it does
			// not ask the replay log for a last seq. That JetStream request
			// was made for every session's first action; with a burst of
			// sessions starting they queued, adding milliseconds to TTFD.
			req.RunId = s.thread()
			s.ranOnce = true
		}
		g.started = true
		for _, n := range g.outputs() {
			n.guard = nil
		}
		s.running++
		s.wg.Add(1)
		go s.run(g, req)
	}
	clear(s.pending[len(keep):])
	s.pending = keep
}

// run executes one action and renders its run's events.
func (s *session) run(g *generate, req *canonical.Request) {
	defer s.wg.Done()
	err := s.execute(g, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	if s.running == 0 && s.idle != nil {
		s.active = time.Now()
		s.idle.Reset(s.f.cfg.IdleTimeout)
	}
	if err != nil {
		s.abortLocked(err)
	} else {
		s.startReady()
	}
	if s.draining && s.running == 0 {
		s.abortLocked(canonical.Errorf(canonical.CodeUnavailable, "server is shutting down"))
	}
	s.signal()
}

func (s *session) execute(g *generate, req *canonical.Request) error {
	if err := s.f.fetchRefs(s.ctx, req); err != nil {
		return g.fail(err)
	}
	stream, err := s.f.cfg.Runner.Run(s.ctx, req)
	if err != nil {
		return g.fail(err)
	}
	stream = canonical.AnswerStream(stream, 0) // an agent's answer, on the root (doc.go)
	defer stream.Close()
	sk := &actionSink{session: s}
	if rs, ok := stream.(canonical.Buffered); ok && s.flush != nil {
		sk.ready = rs
		defer s.flush()
	}
	r := newRenderer(sk, g, s.json, s.f.cfg.ResponseTree, s.f.cfg.MaxToolArgsBytes)
	for {
		sk.flushIfIdle()
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return g.fail(canonical.Errorf(canonical.CodeInternal, "run ended without a terminal event"))
		}
		if err != nil {
			return g.fail(err)
		}
		done, err := r.event(e)
		if err != nil {
			return g.fail(err)
		}
		if done {
			return nil
		}
	}
}

// outputs lists the action's output nodes.
func (g *generate) outputs() []*node {
	out := append([]*node(nil), g.response...)
	if g.reasoning != nil {
		out = append(out, g.reasoning)
	}
	if g.tools != nil {
		out = append(out, g.tools)
	}
	return out
}

// fail names the action in err's message, keeping its code.
func (g *generate) fail(err error) *canonical.Error {
	ce := canonical.AsError(err)
	first := ""
	if outs := g.outputs(); len(outs) > 0 {
		first = outs[0].id
	}
	return &canonical.Error{Code: ce.Code, Message: "action GENERATE (output \"" + first + "\", target \"" + g.target + "\"): " + ce.Message, Cause: ce}
}

// actionSink is one action's sink: the session's, with the action's
// messages held back in the transport's buffer while its run has more
// events at hand (a burst of deltas is one write), and flushed before the
// action waits for its next event, so no message waits for a later one.
type actionSink struct {
	*session
	ready canonical.Buffered // nil: every message goes out at once
	held  bool               // a message was held back since the last flush
}

func (a *actionSink) send(m *ev.SessionMessage) error {
	if a.ready == nil {
		return a.out(m, false)
	}
	a.held = true
	return a.out(m, true)
}

// flushIfIdle flushes held messages unless the next event is at hand.
func (a *actionSink) flushIfIdle() {
	if a.held && a.ready.Buffered() == 0 {
		a.held = false
		a.flush()
	}
}

// sink (with actionSink.send), for the renderers of the session's
// actions.

func (s *session) mint() (*node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.mint()
}

func (s *session) produce(n *node, meta *ev.ChunkMetadata, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.produce(n, meta, data)
}

func (s *session) produceRef(n *node, meta *ev.ChunkMetadata, ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.produceRef(n, meta, ref)
}

func (s *session) adopt(p, c *node) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.adopt(p, c)
}

func (s *session) finish(n *node) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.finish(n)
	s.startReady()
	return nil
}

// abort ends the session with err, unless it has ended already.
func (s *session) abort(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abortLocked(err)
}

func (s *session) abortLocked(err error) {
	if s.err != nil || s.ended {
		return
	}
	s.err = canonical.AsError(err)
	lvl := slog.LevelInfo
	if s.err.Code == canonical.CodeCanceled {
		lvl = slog.LevelDebug // the client left
	}
	s.log.Log(context.Background(), lvl, "session aborted", "code", wireCode(s.err.Code).String(), "err", s.err.Message)
	s.stop()
	shutdown := s.draining
	e := s.err
	s.wg.Add(1)
	go s.interruptTransport(e, shutdown)
	s.signal()
}

func (s *session) interruptTransport(e *canonical.Error, shutdown bool) {
	defer s.wg.Done()
	s.interrupt(e, shutdown)
}

// endInput records the client's half-close.
func (s *session) endInput() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inputEnd = true
	s.signal()
}

// drain refuses new actions and ends the session once running ones end.
func (s *session) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	if s.running == 0 {
		s.abortLocked(canonical.Errorf(canonical.CodeUnavailable, "server is shutting down"))
	}
}

// wait returns when the session is over: aborted, or input ended and every
// action done. A pending action that can no longer start (nothing runs that
// could complete its input) aborts it with FAILED_PRECONDITION. wait then
// stops and joins the session's goroutines and returns the abort error, or
// nil for a normal end.
func (s *session) wait() *canonical.Error {
	for {
		s.mu.Lock()
		over := s.err != nil
		if !over && s.inputEnd && s.running == 0 {
			if len(s.pending) > 0 {
				g := s.pending[0]
				s.abortLocked(canonical.Errorf(canonical.CodeFailedPrecondition,
					"client half-closed the stream while action GENERATE (output %q) waits for its input %q: node %q is incomplete",
					g.outputs()[0].id, g.input.id, s.st.firstIncomplete(g.input).id))
			}
			over = true
		}
		s.ended = over
		s.mu.Unlock()
		if over {
			break
		}
		<-s.changed
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	s.stop()
	s.join()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// watchIdle starts the session's idle bound (idle_timeout), unless it is
// off.
func (s *session) watchIdle() {
	if s.f.cfg.IdleTimeout > 0 {
		s.idle = time.AfterFunc(s.f.cfg.IdleTimeout, s.idleCheck)
	}
}

// idleCheck runs on the idle timer: it aborts the session idle since
// idle_timeout, or waits for the rest of it after a later message. While
// an action runs the timer stays off: run restarts it when the last one
// ends.
func (s *session) idleCheck() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.ended || s.running > 0 {
		return
	}
	if left := s.f.cfg.IdleTimeout - time.Since(s.active); left > 0 {
		s.idle.Reset(left)
		return
	}
	s.abortLocked(canonical.Errorf(canonical.CodeDeadlineExceeded,
		"session idle for %s: no message received and no action running (idle_timeout)", s.f.cfg.IdleTimeout))
}

// join waits for the session's goroutines; past CloseGrace it fails any
// write blocked on the client.
func (s *session) join() {
	done := make(chan struct{})
	go s.waitGroup(done)
	t := time.NewTimer(s.f.cfg.CloseGrace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	if s.unblock != nil {
		s.unblock()
	}
	<-done
}

func (s *session) waitGroup(done chan<- struct{}) {
	s.wg.Wait()
	close(done)
}

// firstIncomplete returns an incomplete node under n (n if none below).
func (s *store) firstIncomplete(n *node) *node {
	for !n.complete {
		if !n.done {
			return n
		}
		next := (*node)(nil)
		for _, c := range n.children {
			if !c.complete {
				next = c
				break
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
	return n
}
