package responses

import (
	"context"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// maxSettlers bounds the settlers running at once on an instance.
const maxSettlers = 64

// settlers end, in the thread store, the responses whose run died with
// the instance serving them (kill -9, a crash, a lost host): their record
// says in_progress or queued for ever, so a client polls it for ever and
// previous_response_id on it is refused for ever. When a read finds a
// response unfinished and no run of this instance is writing it, a
// settler reads the response's run from the bridge's replay log, where a
// run whose owner sent neither event nor heartbeat for twice
// nats.owner_timeout ends failed (unavailable), renders the events with
// the encoder and records the end, unless the record changed meanwhile
// (a run of another instance recorded its own end; an end other than
// failed is recorded only after store_timeout, giving a live owner the
// time to record it first). A run still alive after settle_wait is left
// alone; a later read tries again. A run killed before its first event
// reached the replay log left nothing to read: its record stays as it was
// (the window is the log's acknowledgement of the run's first events).
type settlers struct {
	mu      sync.Mutex
	local   map[string]int  // stored responses a run of this instance writes
	running map[string]bool // responses being settled
	wg      sync.WaitGroup
	closed  bool
	ctx     context.Context // ended by close
	cancel  context.CancelFunc
}

func unfinished(rec *record) bool {
	return rec.Response.Status == "in_progress" || rec.Response.Status == "queued"
}

// writing marks a stored response as written by a run of this instance
// (add) or no longer (!add).
func (s *settlers) writing(id string, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local == nil {
		s.local = map[string]int{}
	}
	if add {
		s.local[id]++
	} else if s.local[id]--; s.local[id] <= 0 {
		delete(s.local, id)
	}
}

// close stops the settlers and waits for them.
func (s *settlers) close() {
	s.mu.Lock()
	s.closed = true
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// settleLater starts a settler for rec when it is unfinished, no run of
// this instance writes it, and none settles it already. ctx is the read's
// (its API key observes the run); the settler outlives the read.
func (f *Frontend) settleLater(ctx context.Context, rec *record) {
	if f.cfg.Observer == nil || f.store == nil || !unfinished(rec) {
		return
	}
	s, id := &f.settling, rec.Response.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.local[id] > 0 || s.running[id] || len(s.running) >= maxSettlers {
		return
	}
	if s.running == nil {
		s.running = map[string]bool{}
	}
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(context.Background())
	}
	s.running[id] = true
	s.wg.Add(1)
	go f.settle(context.WithoutCancel(ctx), id, s.ctx)
}

// settle reads response id's run from the replay log to its end and
// records it (see settlers).
func (f *Frontend) settle(parent context.Context, id string, closing context.Context) {
	s := &f.settling
	defer func() {
		s.mu.Lock()
		delete(s.running, id)
		s.mu.Unlock()
		s.wg.Done()
	}()
	ctx, cancel := context.WithTimeout(parent, f.cfg.SettleWait)
	defer cancel()
	defer context.AfterFunc(closing, cancel)()
	obs, err := f.cfg.Observer.Observe(ctx, id, 0)
	if err != nil {
		return
	}
	obs = canonical.AnswerStream(obs, f.cfg.MaxOutputBytes) // as the live run was rendered
	defer obs.Close()
	rec, rev, e := f.store.load(ctx, id)
	if e != nil || !unfinished(rec) {
		return
	}
	r := replayResponse(&rec.Response)
	enc := newEncoder(r, r.Reasoning.Summary != nil, f.cfg.MaxOutputBytes, func(*streamEvent) error { return nil })
	if enc.start() != nil {
		return
	}
	for !enc.done {
		ev, err := obs.Recv()
		if err != nil {
			return // still running, or stopped: the record stays as it is
		}
		if enc.event(ev) != nil {
			return
		}
	}
	if enc.r.Status != "failed" {
		// A real end: its owner may be alive and about to record it.
		t := time.NewTimer(f.cfg.StoreTimeout)
		defer t.Stop()
		select {
		case <-t.C:
		case <-closing.Done():
			return
		}
	}
	rec.Response = *enc.r
	sctx, scancel := f.storeCtx(parent)
	defer scancel()
	if _, err := f.store.save(sctx, rec, rev); err != nil {
		f.log.Debug("ended response not recorded", "thread", id, "code", err.Code.String(), "err", err)
		return
	}
	f.log.Info("response ended from the replay log: the instance serving it stopped", "thread", id, "status", rec.Response.Status)
}
