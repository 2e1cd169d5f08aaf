package load

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Hooks collect what a frontend registers to run when its server shuts
// down (idle connections close) and after (flushes and closes).
type Hooks struct {
	shutdown, close []func()
}

// OnShutdown registers f to run when the server begins to shut down.
func (h *Hooks) OnShutdown(f func()) { h.shutdown = append(h.shutdown, f) }

// OnClose registers f to run after the server has closed.
func (h *Hooks) OnClose(f func()) { h.close = append(h.close, f) }

// MountFunc mounts a protocol's frontend on mux in front of runner.
type MountFunc func(mux *http.ServeMux, runner canonical.Runner, hooks *Hooks) error

// FrontendUpstream is the upstream of a protocol without an independent
// reference peer: its own frontend (mount) in front of a producer that
// streams sc for any target, paced on an absolute schedule, each delta
// stamped as it is handed to the frontend. The stream key is the request's
// prompt text. backend returns the bridge backend's options for the
// frontend at base (http://host:port); with h2c it serves HTTP/2 without
// TLS too.
func FrontendUpstream(sc Script, h2c bool, mount MountFunc, backend func(base string) map[string]any) (*Upstream, error) {
	p := &producer{sc: sc, stamp: NewStampBook(sc.Deltas)}
	mux := http.NewServeMux()
	hooks := &Hooks{}
	if err := mount(mux, p, hooks); err != nil {
		return nil, err
	}
	closeHooks := func() {
		for _, f := range hooks.close {
			f()
		}
	}
	srv, err := Serve(mux, h2c)
	if err != nil {
		closeHooks()
		return nil, err
	}
	base := "http://" + srv.Addr()
	return &Upstream{Base: base, Backend: backend(base), Book: p.stamp, H2C: h2c, Close: func() {
		for _, f := range hooks.shutdown {
			f()
		}
		srv.Close()
		closeHooks()
	}}, nil
}

// producer is a canonical.Runner that streams the script for any target:
// one assistant message of sc.Deltas text deltas.
type producer struct {
	sc    Script
	stamp *StampBook
}

func (p *producer) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	key := canonical.PromptText(req)
	ctx, cancel := context.WithCancel(ctx)
	s := &prodStream{ctx: ctx, cancel: cancel, sc: p.sc, st: p.stamp.Get(key), b: canonical.NewBuilder()}
	s.out = s.b.Lifecycle(s.out, canonical.StatusRunning)
	s.start = time.Now()
	return s, nil
}

func (p *producer) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name, Backend: "producer"}, true
}

func (p *producer) Targets() []canonical.TargetInfo {
	return []canonical.TargetInfo{{Name: p.sc.Target, Backend: "producer"}}
}

type prodStream struct {
	ctx    context.Context
	cancel context.CancelFunc
	sc     Script
	st     *Stamps
	b      *canonical.Builder
	out    []*canonical.Event
	next   int
	sent   int
	start  time.Time
	timer  *time.Timer
	seq    uint64
}

func (s *prodStream) Recv() (*canonical.Event, error) {
	for s.next == len(s.out) {
		if s.b.Ended() {
			if s.st != nil {
				s.st.Finish()
			}
			return nil, io.EOF
		}
		s.out, s.next = s.out[:0], 0
		switch {
		case s.ctx.Err() != nil:
			s.out = s.b.End(s.out, canonical.StatusCancelled, canonical.AsError(s.ctx.Err()))
		case s.sent == s.sc.Deltas:
			s.out = s.b.FinishMessage(s.out, canonical.FinishStop, nil)
			s.out = s.b.End(s.out, canonical.StatusCompleted, nil)
		default:
			if !s.wait() {
				continue
			}
			s.out = s.b.Text(s.out, s.sc.Text)
			s.sent++
		}
	}
	ev := s.out[s.next]
	s.next++
	s.seq++
	ev.Seq = s.seq
	if _, ok := ev.GetKind().(*canonical.KindBlockDelta); ok && s.st != nil {
		s.st.Add()
	}
	return ev, nil
}

// wait sleeps until the next delta is due; false when cancelled.
func (s *prodStream) wait() bool {
	if s.sc.Interval <= 0 {
		return true
	}
	d := time.Until(s.start.Add(time.Duration(s.sent+1) * s.sc.Interval))
	if d <= 0 {
		return true
	}
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.timer.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *prodStream) Close() error {
	s.cancel()
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.st != nil {
		s.st.Finish()
	}
	return nil
}
