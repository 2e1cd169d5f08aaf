package load

import (
	"sync"
	"time"
)

// epoch is the origin of every timestamp of the harness (monotonic).
var epoch = time.Now()

// Now is nanoseconds since the harness's epoch on the monotonic clock: the
// clock of every stamp and record.
func Now() int64 { return int64(time.Since(epoch)) }

// Recorder is what a client records of one stream.
type Recorder struct {
	// Start is when the request was sent.
	Start int64
	// Recv holds when each text delta was parsed.
	Recv []int64
}

// Begin records the request's start.
func (r *Recorder) Begin() { r.Start = Now() }

// Delta records a text delta.
func (r *Recorder) Delta() { r.Recv = append(r.Recv, Now()) }

// Stamps are the upstream's send times of one stream's deltas. The
// upstream appends from its one writer goroutine and calls Finish when the
// stream's last frame is written; the harness reads them only after Done.
type Stamps struct {
	t    []int64
	done chan struct{}
	once sync.Once
}

// NewStamps returns empty stamps, hint deltas long.
func NewStamps(hint int) *Stamps {
	return &Stamps{t: make([]int64, 0, hint), done: make(chan struct{})}
}

// Add stamps a delta as sent now.
func (s *Stamps) Add() { s.t = append(s.t, Now()) }

// Finish marks the stream's last frame written (once; later calls do
// nothing).
func (s *Stamps) Finish() { s.once.Do(func() { close(s.done) }) }

// Done is closed by Finish.
func (s *Stamps) Done() <-chan struct{} { return s.done }

// Times are the stamps; read them only after Done.
func (s *Stamps) Times() []int64 { return s.t }

// StampBook maps a stream's key (its prompt text) to its stamps.
type StampBook struct {
	mu   sync.Mutex
	m    map[string]*Stamps
	hint int // expected deltas per stream
}

// NewStampBook returns an empty book for streams of about hint deltas.
func NewStampBook(hint int) *StampBook {
	return &StampBook{m: map[string]*Stamps{}, hint: hint}
}

// Open registers key before its request is sent.
func (b *StampBook) Open(key string) *Stamps {
	s := NewStamps(b.hint)
	b.mu.Lock()
	b.m[key] = s
	b.mu.Unlock()
	return s
}

// Get returns key's stamps, nil when no stream registered it.
func (b *StampBook) Get(key string) *Stamps {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m[key]
}

// Forget drops key.
func (b *StampBook) Forget(key string) {
	b.mu.Lock()
	delete(b.m, key)
	b.mu.Unlock()
}
