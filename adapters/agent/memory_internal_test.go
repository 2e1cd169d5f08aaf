package agent

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// bytesThread returns a thread whose buffer holds up to events events and
// maxBytes bytes of frames, outside any frontend's map.
func bytesThread(t *testing.T, events, maxBytes int) *Thread {
	t.Helper()
	f, err := NewFrontend(Config{Runner: nopRunner{}, BufferEvents: events, BufferBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return newThread(f, "t")
}

// sizedEvent is an event of method on the root namespace with size bytes
// of data.
func sizedEvent(method string, size int) *wireEvent {
	return &wireEvent{method: method, timeMs: 1, data: []byte(`{"text":"` + strings.Repeat("x", max(size-11, 0)) + `"}`)}
}

// addSized appends count sizedEvents.
func addSized(th *Thread, count int, method string, size int) {
	th.mu.Lock()
	defer th.mu.Unlock()
	for range count {
		th.appendLocked(sizedEvent(method, size), "run-1")
	}
}

// bufferedSeqs are the seqs the thread's buffer holds, oldest first, and
// the bytes of their frames.
func bufferedSeqs(th *Thread) (seqs []uint64, bytes int) {
	th.mu.Lock()
	defer th.mu.Unlock()
	for i := range th.buf.n {
		rec := th.buf.at(i)
		seqs = append(seqs, rec.seq)
		bytes += len(rec.frame)
	}
	return seqs, bytes
}

// Past BufferBytes the oldest events leave, as past BufferEvents: the
// buffer keeps the newest events whose frames fit, its byte count is
// theirs, and an event larger than the bound alone is kept alone.
func TestBufferBytesEvictsOldest(t *testing.T) {
	const maxBytes = 10_000
	th := bytesThread(t, 1000, maxBytes)
	addSized(th, 40, methodMessages, 1000)
	got, bytes := bufferedSeqs(th)
	before := len(newFrame(got[0]-1, sizedEvent(methodMessages, 1000))) // the last evicted
	if len(got) < 2 || got[len(got)-1] != 40 || !slices.Equal(got, span(got[0], 40)) {
		t.Fatalf("buffer holds %v, want the newest events up to 40", got)
	}
	th.mu.Lock()
	counted := th.buf.bytes
	th.mu.Unlock()
	if counted != bytes || bytes > maxBytes || bytes+before <= maxBytes {
		t.Fatalf("buffer of %v counts %d bytes, holds %d, bound %d; the event before is %d bytes", got, counted, bytes, maxBytes, before)
	}

	addSized(th, 1, methodMessages, 3*maxBytes) // seq 41
	if got, bytes := bufferedSeqs(th); !slices.Equal(got, []uint64{41}) || bytes <= maxBytes {
		t.Fatalf("after an event over the bound the buffer holds %v (%d bytes), want [41] alone", got, bytes)
	}
	addSized(th, 1, methodMessages, 1000) // seq 42 pushes the large one out
	if got, _ := bufferedSeqs(th); !slices.Equal(got, []uint64{42}) {
		t.Fatalf("buffer holds %v, want [42]", got)
	}
}

// A since older than what the byte bound keeps gets the gap report, naming
// the oldest event kept, and then the events from there on; a since the
// buffer holds gets none.
func TestBufferBytesGapReport(t *testing.T) {
	th := bytesThread(t, 1000, 10_000)
	addSized(th, 40, methodMessages, 1000)
	got, _ := bufferedSeqs(th)
	oldest := got[0]
	r, first, g := th.attach(5, true, nil)
	if g == nil || g.since != 5 || g.minAvail != oldest || len(first) != 0 {
		t.Fatalf("attach since 5: gap %+v, first %v; want since 5, min_available %d", g, seqs(first), oldest)
	}
	read, gaps := drain(th, r)
	if len(gaps) != 0 || !slices.Equal(seqs(read), span(oldest, 40)) {
		t.Fatalf("after the gap report: %v, gaps %v", seqs(read), gaps)
	}
	if _, _, g := th.attach(oldest-1, true, nil); g != nil {
		t.Fatalf("since %d (the buffer holds what follows) reported a gap: %+v", oldest-1, g)
	}

	// A reader that stops reading and is overtaken by events the pump does
	// not hold back (a command's) is told on its next read.
	r2, _, _ := th.attach(40, true, nil)
	addSized(th, 30, methodMessages, 1000)
	read, gaps = drain(th, r2)
	got, _ = bufferedSeqs(th)
	if len(gaps) != 1 || gaps[0].since != 40 || gaps[0].minAvail != got[0] || !slices.Equal(seqs(read), span(got[0], 70)) {
		t.Fatalf("overtaken reader: gaps %+v, read %v; buffer %v", gaps, seqs(read), got)
	}
}

// A values event the byte bound evicts is pinned while it is its
// namespace's state: a replay from before it, or with no since, starts
// with it, and a newer state replaces it.
func TestBufferBytesPinsValues(t *testing.T) {
	th := bytesThread(t, 1000, 10_000)
	addSized(th, 3, methodMessages, 100)
	addSized(th, 1, methodValues, 4000) // seq 4: the state
	addSized(th, 20, methodMessages, 1000)
	got, _ := bufferedSeqs(th)
	if got[0] <= 4 {
		t.Fatalf("the state is still buffered: %v", got)
	}
	_, first, g := th.attach(0, false, nil)
	if g != nil || !slices.Equal(seqs(first), []uint64{4}) {
		t.Fatalf("attach with no since: first %v, gap %+v; want the pinned state [4]", seqs(first), g)
	}
	_, first, g = th.attach(2, true, nil)
	if g == nil || !slices.Equal(seqs(first), []uint64{4}) {
		t.Fatalf("attach since 2: first %v, gap %+v; want a gap report and the pinned state [4]", seqs(first), g)
	}
	addSized(th, 1, methodValues, 100) // seq 25: a newer state, buffered
	if _, first, _ := th.attach(0, false, nil); len(first) != 0 {
		t.Fatalf("a superseded state is still replayed: %v", seqs(first))
	}
}

// A reader in the buffer holds back the pump by bytes as by events: the
// pump waits until the reader has read what storing would evict, and no
// longer. What one step stores beyond the bound waits only for the reader
// to have read the whole buffer.
func TestBufferBytesBackpressure(t *testing.T) {
	th := bytesThread(t, 1000, 10_000)
	addSized(th, 8, methodMessages, 1000) // about 8,400 bytes
	r, _, _ := th.attach(0, false, nil)
	th.mu.Lock()
	held := th.heldLocked(1, 1000)     // fits beside them
	heldMore := th.heldLocked(1, 3000) // evicts the oldest, unread
	th.mu.Unlock()
	if held || !heldMore {
		t.Fatalf("reader at the start: held for 1,000 bytes %v (want false), for 3,000 %v (want true)", held, heldMore)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waited := make(chan struct{})
	go func() {
		th.mu.Lock()
		th.awaitRoomLocked(ctx, 1, 1<<30) // capped at the bound
		th.mu.Unlock()
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("the pump did not wait for an unread reader")
	case <-time.After(50 * time.Millisecond):
	}
	read, _ := drain(th, r)
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the pump still waits after the reader read the whole buffer")
	}
	if ctx.Err() != nil || len(read) != 8 {
		t.Fatalf("read %d events, ctx %v", len(read), ctx.Err())
	}
}

// A ring that pops its oldest records and pushes new ones keeps them in
// order, counts their frames' bytes, allocates each array once (room for
// max records in all) and lets go of what it popped; evictions says what a
// push would evict.
func TestRingPopMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, capacity := range []int{1, 7, ringChunk, ringChunk + 3, 3*ringChunk - 1} {
		r := ring{max: capacity}
		var model []record
		var seq uint64
		for step := range 20 * capacity {
			if len(model) > 0 && rng.IntN(3) == 0 {
				got := r.pop()
				if got.seq != model[0].seq {
					t.Fatalf("capacity %d step %d: pop gave seq %d, want %d", capacity, step, got.seq, model[0].seq)
				}
				model = model[1:]
				if slot := r.at(r.max - 1); slot.frame != nil && r.n < r.max { // the freed place
					t.Fatalf("capacity %d step %d: the popped place still holds a frame", capacity, step)
				}
			} else {
				seq++
				rec := record{seq: seq, frame: make([]byte, rng.IntN(100))}
				size, maxBytes := len(rec.frame), rng.IntN(2000)
				k := r.evictions(1, size, maxBytes)
				want := modelEvictions(model, capacity, size, maxBytes)
				if k != want {
					t.Fatalf("capacity %d step %d: evictions %d, want %d", capacity, step, k, want)
				}
				if _, evicted := r.push(rec); evicted != (len(model) == capacity) {
					t.Fatalf("capacity %d step %d: push evicted %v with %d held", capacity, step, evicted, len(model))
				}
				model = append(model, rec)
				if len(model) > capacity {
					model = model[1:]
				}
			}
			checkRing(t, &r, model)
		}
	}
}

// modelEvictions is ring.evictions over a slice.
func modelEvictions(model []record, capacity, size, maxBytes int) int {
	k := len(model) + 1 - capacity
	total := size
	for _, m := range model {
		total += len(m.frame)
	}
	i := 0
	for ; maxBytes > 0 && total > maxBytes && i < len(model); i++ {
		total -= len(model[i].frame)
	}
	return min(len(model), max(k, i, 0))
}

func checkRing(t *testing.T, r *ring, model []record) {
	t.Helper()
	if r.n != len(model) {
		t.Fatalf("ring holds %d records, model %d", r.n, len(model))
	}
	bytes := 0
	for i, m := range model {
		if r.at(i).seq != m.seq {
			t.Fatalf("record %d: seq %d, want %d", i, r.at(i).seq, m.seq)
		}
		bytes += len(m.frame)
	}
	if r.bytes != bytes {
		t.Fatalf("ring counts %d bytes, holds %d", r.bytes, bytes)
	}
	room := 0
	for _, c := range r.chunks {
		room += cap(c)
	}
	if room > r.max {
		t.Fatalf("the ring's arrays hold %d records, max %d", room, r.max)
	}
}

// unusedStore is a store the test never reaches.
type unusedStore struct{ canonical.ThreadStore }

// A save encodes a checkpoint as its turn comes and lets go of its
// values then: until the checkpoint is saved, a fork reads them back from
// its JSON, the same values.
func TestEncodedCheckpointLetsGoOfValues(t *testing.T) {
	f, err := NewFrontend(Config{Runner: nopRunner{}, Store: unusedStore{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	th := newThread(f, "t")
	values := map[string]json.Value{"messages": json.Value(`[{"type":"human","content":"a<b","id":"m1"}]`), "n": json.Value(`7`)}
	th.rt.known = true
	th.rt.rec.Checkpoints = []checkpointRec{
		{ID: "ckpt-1", Step: -1, Source: "input", Time: time.Unix(1, 0).UTC(), saved: true},
		{ID: "ckpt-2", Step: 0, Source: "loop", Time: time.Unix(2, 0).UTC(), Values: values},
	}
	snap, err := th.snapshot()
	if err != nil || snap == nil || !slices.Equal(snap.checkpoints, []string{"ckpt-2"}) {
		t.Fatalf("snapshot: %+v, %v; want ckpt-2 to save", snap, err)
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	cp := th.rt.findCheckpoint("ckpt-2")
	if cp.Values == nil || cp.enc != nil {
		t.Fatal("the snapshot encoded the checkpoint: saveCheckpoints does, in turn")
	}
	enc, err := th.checkpointJSONLocked("ckpt-2")
	if err != nil || enc == nil || cp.Values != nil || &cp.enc[0] != &enc[0] {
		t.Fatalf("encoded: %q, %v; the checkpoint holds values %v", enc, err, cp.Values)
	}
	if enc, _ := th.checkpointJSONLocked("ckpt-1"); enc != nil {
		t.Fatalf("a saved checkpoint encoded again: %q", enc)
	}
	got, err := th.checkpointValuesLocked(cp)
	if err != nil {
		t.Fatal(err)
	}
	if string(valuesJSON(got, nil)) != string(valuesJSON(values, nil)) {
		t.Fatalf("values read back from the JSON: %s, want %s", valuesJSON(got, nil), valuesJSON(values, nil))
	}
}

// headCountingStore counts the head records written; it stores nothing.
type headCountingStore struct {
	canonical.ThreadStore
	heads int
}

func (s *headCountingStore) Put(_ context.Context, _, key string, _ []byte, rev uint64) (uint64, error) {
	if key == headKey {
		s.heads++
	}
	return rev + 1, nil
}

// A save saveLoop was asked for is not made when a snapshot taken after
// the ask has been written since (a run's end, saved at once, was written
// a second time after its client saw it); one asked for after that
// written snapshot is made.
func TestSaveMadeRedundantIsSkipped(t *testing.T) {
	store := &headCountingStore{}
	f, err := NewFrontend(Config{Runner: nopRunner{}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	th := newThread(f, "t")
	th.rt.known = true
	asked := th.rt.snapshots
	th.persist() // saveNow's save, after the ask
	th.persistUnlessSaved(asked)
	if store.heads != 1 {
		t.Fatalf("%d heads written, want 1: the asked save was redundant", store.heads)
	}
	th.persistUnlessSaved(th.rt.snapshots)
	if store.heads != 2 {
		t.Fatalf("%d heads written, want 2: a save asked after the last written one is made", store.heads)
	}
}
