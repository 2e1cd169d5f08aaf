package bridge

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/internal/subject"
)

// seqFloors keeps each thread's last seq in the threads bucket, where it
// outlives the replay log. The log lets go of a thread's events after
// replay_max_age (an hour by default), or sooner when replay_max_bytes
// discards the oldest, while the thread lives on: its claim never
// expires, its state lasts thread_ttl. A run of such a thread that
// numbered from what the log still holds (nothing) would give its seqs
// again, from 1. So when a run ends its thread's last seq is written here,
// and a run's numbering starts after the higher of the log's last and
// this floor (Fabric.LastSeq).
//
// The write is off the run's path: one goroutine takes each thread's
// highest seq noted since its last write and raises the entry, never
// lowering it (a compare-and-set on the entry's revision: two instances
// ending runs of one thread write in either order). A write that fails is
// retried while the fabric runs; the log still holds the run's events
// meanwhile, for replay_max_age, so the floor is needed only if it stays
// unwritten that long.
type seqFloors struct {
	kv  jetstream.KeyValue
	log *slog.Logger

	mu      sync.Mutex
	pending map[string]uint64 // thread -> highest seq noted, not yet written
	wake    chan struct{}

	ctx    context.Context // the writes', until close
	cancel context.CancelFunc
	stop   chan struct{}
	done   chan struct{}
}

const (
	// maxPendingFloors bounds the threads whose floor waits to be
	// written (NATS away): past it a note is dropped, and logged.
	maxPendingFloors = 1 << 16
	// floorRetry is the pause before writing floors again after a failure.
	floorRetry = time.Second
	// floorFinalWrite bounds the last writes when the fabric closes.
	floorFinalWrite = 2 * time.Second
	// floorCASAttempts bounds the compare-and-set retries of one write.
	floorCASAttempts = 8
)

// seqFloorKey is the threads bucket's key of thread's floor (its claim is
// "owner.<thread>").
func seqFloorKey(thread string) string { return "seq." + subject.Key(thread) }

func startSeqFloors(kv jetstream.KeyValue, log *slog.Logger) *seqFloors {
	s := &seqFloors{kv: kv, log: log, pending: map[string]uint64{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.loop()
	return s
}

// note records that thread's seqs up to seq are given. A nil s (a fabric
// without its assets, in tests) keeps nothing.
func (s *seqFloors) note(thread string, seq uint64) {
	if s == nil || seq == 0 {
		return
	}
	s.mu.Lock()
	cur, ok := s.pending[thread]
	switch {
	case ok && cur >= seq:
	case !ok && len(s.pending) >= maxPendingFloors:
		s.mu.Unlock()
		s.log.Warn("thread seq floor not written: too many waiting", "thread", thread, "seq", seq)
		return
	default:
		s.pending[thread] = seq
	}
	s.mu.Unlock()
	s.signal()
}

// read returns thread's floor (0 when none is written, or s is nil).
func (s *seqFloors) read(ctx context.Context, thread string) (uint64, error) {
	floor, _, err := s.readAt(ctx, thread)
	return floor, err
}

// readAt is read, with when the floor was written (zero for none).
func (s *seqFloors) readAt(ctx context.Context, thread string) (uint64, time.Time, error) {
	if s == nil {
		return 0, time.Time{}, nil
	}
	e, err := s.kv.Get(ctx, seqFloorKey(thread))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	floor, err := strconv.ParseUint(string(e.Value()), 10, 64)
	return floor, e.Created(), err
}

// close stops the writes under way, writes what is noted within
// floorFinalWrite, and returns.
func (s *seqFloors) close() {
	s.cancel()
	close(s.stop)
	<-s.done
}

func (s *seqFloors) loop() {
	defer close(s.done)
	for {
		select {
		case <-s.wake:
		case <-s.stop:
			ctx, cancel := context.WithTimeout(context.Background(), floorFinalWrite)
			s.writeNoted(ctx)
			cancel()
			return
		}
		if !s.writeNoted(s.ctx) {
			select { // NATS away: try again in a while
			case <-time.After(floorRetry):
				s.signal()
			case <-s.stop: // the final write, above
			}
		}
	}
}

func (s *seqFloors) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// writeNoted writes the floors noted so far. At the first that fails it
// stops, noting it and the rest again: NATS away would fail each of them
// after its own timeout, and the loop would take that long to try again.
// It reports whether all were written.
func (s *seqFloors) writeNoted(ctx context.Context) bool {
	s.mu.Lock()
	batch := s.pending
	s.pending = map[string]uint64{}
	s.mu.Unlock()
	var failed error
	for thread, seq := range batch {
		if failed == nil {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if failed = s.raise(wctx, thread, seq); failed != nil {
				s.log.Debug("thread seq floors not written yet", "thread", thread, "seq", seq, "waiting", len(batch), "err", failed)
			}
			cancel()
		}
		if failed != nil {
			s.note(thread, seq)
		}
	}
	return failed == nil
}

// raise sets thread's floor to seq unless it is at or above it already.
func (s *seqFloors) raise(ctx context.Context, thread string, seq uint64) error {
	key := seqFloorKey(thread)
	val := []byte(strconv.FormatUint(seq, 10))
	for range floorCASAttempts {
		e, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if _, err = s.kv.Create(ctx, key, val); errors.Is(err, jetstream.ErrKeyExists) {
				continue // another instance wrote it first: compare with that
			}
			return err
		}
		if err != nil {
			return err
		}
		if cur, perr := strconv.ParseUint(string(e.Value()), 10, 64); perr == nil && cur >= seq {
			return nil
		}
		_, err = s.kv.Update(ctx, key, val, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // written since: compare with that
		}
		return err
	}
	return errors.New("the floor kept changing under the write")
}
