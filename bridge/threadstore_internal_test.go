package bridge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/canonical"
)

// chunkStore is a thread store on a fabric of its own whose values over
// 8 KiB go to chunks of 8 KiB, with thread_max_bytes maxBytes (0: the
// default).
func chunkStore(t *testing.T, maxBytes int64) *natsThreadStore {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NATS.ThreadMaxBytes = maxBytes
	cfg.Defaults()
	f, err := StartFabric(context.Background(), cfg.NATS, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	f.store.inlineMax, f.store.chunkMax = 8<<10, 8<<10
	return f.store
}

// chunkMsgs is how many messages the chunk stream holds.
func chunkMsgs(t *testing.T, s *natsThreadStore) uint64 {
	t.Helper()
	info, err := s.chunks.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// A value is written as whole chunks plus the last one's rest, read back
// whole, and its chunks go when it is replaced or deleted; a write that
// fails part-way (the stream's byte bound) leaves none of its chunks.
func TestThreadStoreChunks(t *testing.T) {
	s := chunkStore(t, 200<<10)
	ctx := t.Context()
	v := bytes.Repeat([]byte("0123456789abcdef"), 5<<10) // 80 KiB: 10 chunks
	v = append(v, "tail"...)                             // and an 11th of 4 bytes
	rev, err := s.Put(ctx, "t", "a", v, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := chunkMsgs(t, s); n != 11 {
		t.Fatalf("%d chunks, want 11", n)
	}
	s.forget("t.a") // read the entry, not what Put noted
	got, gotRev, err := s.Get(ctx, "t", "a")
	if err != nil || gotRev != rev || !bytes.Equal(got, v) {
		t.Fatalf("get = %d bytes rev %d %v, want %d bytes rev %d", len(got), gotRev, err, len(v), rev)
	}

	// 160 KiB more does not fit under 200 KiB: refused part-way, and
	// the chunks it wrote are removed.
	_, err = s.Put(ctx, "t", "b", bytes.Repeat([]byte("b"), 160<<10), 0)
	if canonical.CodeOf(err) != canonical.CodeResourceExhausted {
		t.Fatalf("put past the bound: %v, want resource_exhausted", err)
	}
	if n := chunkMsgs(t, s); n != 11 {
		t.Fatalf("after a refused write: %d chunks, want 11", n)
	}

	if _, err := s.Put(ctx, "t", "a", v[:20<<10], rev); err != nil { // 3 chunks
		t.Fatal(err)
	}
	if n := chunkMsgs(t, s); n != 3 {
		t.Fatalf("after replacing the value: %d chunks, want 3", n)
	}
	if err := s.Delete(ctx, "t", "a"); err != nil {
		t.Fatal(err)
	}
	if n := chunkMsgs(t, s); n != 0 {
		t.Fatalf("after deleting the record: %d chunks, want 0", n)
	}
}

// A pointer whose chunks are gone (on a second read of the entry), or
// do not add up to the length it gives, or does not parse, reads as
// data_loss.
func TestThreadStoreMissingChunks(t *testing.T) {
	s := chunkStore(t, 0)
	ctx := t.Context()
	v := bytes.Repeat([]byte("x"), 20<<10)
	if _, err := s.Put(ctx, "t", "gone", v, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.chunks.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "t", "gone"); canonical.CodeOf(err) != canonical.CodeDataLoss {
		t.Fatalf("get of a value whose chunks are gone: %v, want data_loss", err)
	}
	for name, entry := range map[string][]byte{
		"short": chunkPointer{id: "x", chunks: 1, bytes: 3}.entry(), // its chunk holds 2 bytes
		"junk":  append([]byte{entryChunks}, "x y"...),
	} {
		if _, err := s.js.Publish(ctx, chunkPointer{id: "x"}.subject("0"), []byte("ab")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.kv.Put(ctx, "t."+name, entry); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Get(ctx, "t", name); canonical.CodeOf(err) != canonical.CodeDataLoss {
			t.Fatalf("get of %s pointer: %v, want data_loss", name, err)
		}
	}
}

// A write the bucket refuses (here, another writer's revision came
// first) removes the chunks it wrote; one whose reply is lost keeps them,
// since the entry may point to them: here it does, and the value reads
// back whole.
func TestThreadStoreUnknownWriteKeepsChunks(t *testing.T) {
	s := chunkStore(t, 0)
	ctx := t.Context()
	rev, err := s.Put(ctx, "t", "a", bytes.Repeat([]byte("1"), 20<<10), 0) // 3 chunks
	if err != nil {
		t.Fatal(err)
	}
	// Another writer: the store's note of rev is now stale.
	if _, err := s.kv.Put(ctx, "t.a", []byte{entryInline, 'x'}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "t", "a", bytes.Repeat([]byte("2"), 20<<10), rev); canonical.CodeOf(err) != canonical.CodeAborted {
		t.Fatalf("put over a stale revision: %v, want aborted", err)
	}
	if n := chunkMsgs(t, s); n != 3 {
		t.Fatalf("after a refused write: %d chunks, want the first value's 3", n)
	}

	_, rev, err = s.Get(ctx, "t", "a")
	if err != nil {
		t.Fatal(err)
	}
	s.kv = lostReply{s.kv}
	v := bytes.Repeat([]byte("3"), 20<<10)
	if _, err := s.Put(ctx, "t", "a", v, rev); canonical.CodeOf(err) != canonical.CodeDeadlineExceeded {
		t.Fatalf("put whose reply was lost: %v, want deadline_exceeded", err)
	}
	if got, _, err := s.Get(ctx, "t", "a"); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("after a write whose reply was lost: %d bytes, %v; want the value written", len(got), err)
	}
}

// lostReply is a bucket whose updates are stored, then answer as though
// their reply never came.
type lostReply struct{ jetstream.KeyValue }

func (l lostReply) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if _, err := l.KeyValue.Update(ctx, key, value, rev); err != nil {
		return 0, err
	}
	return 0, context.DeadlineExceeded
}

// Values an earlier version put in the object store read back, and
// replacing or deleting them removes their objects.
func TestThreadStoreReadsObjectValues(t *testing.T) {
	s := chunkStore(t, 0)
	ctx := t.Context()
	v := bytes.Repeat([]byte("legacy "), 50<<10) // 350 KiB: 3 of the object store's chunks
	for _, key := range []string{"replaced", "deleted"} {
		putObject(t, s.obs, "t."+key+".obj", v)
		if _, err := s.kv.Create(ctx, "t."+key, append([]byte{entryPointer}, "t."+key+".obj"...)); err != nil {
			t.Fatal(err)
		}
	}
	got, rev, err := s.Get(ctx, "t", "replaced")
	if err != nil || !bytes.Equal(got, v) {
		t.Fatalf("get of an object value = %d bytes %v, want %d", len(got), err, len(v))
	}
	if _, err := s.Put(ctx, "t", "replaced", v, rev); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t", "deleted"); err != nil {
		t.Fatal(err)
	}
	if l, err := s.obs.List(ctx); !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatalf("objects left: %d, %v", len(l), err)
	}
	if got, _, err := s.Get(ctx, "t", "replaced"); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("get after the replacement = %d bytes %v", len(got), err)
	}
}

// putObject writes data to obs as an earlier version did. nats.go's
// ObjectStore.Put may strand its private JetStream context's goroutine
// (the reason the store writes chunks of its own), so the reader holds
// back its end until that goroutine waits on a live channel: Put's cleanup
// then closes the channel and the goroutine ends.
func putObject(t *testing.T, obs jetstream.ObjectStore, name string, data []byte) {
	t.Helper()
	r := &settledReader{Reader: bytes.NewReader(data), before: resetGoroutines()}
	if _, err := obs.Put(t.Context(), jetstream.ObjectMeta{Name: name}, r); err != nil {
		t.Fatal(err)
	}
}

type settledReader struct {
	io.Reader
	before int
}

func (r *settledReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	if err != io.EOF {
		return n, err
	}
	for deadline := time.Now().Add(10 * time.Second); resetGoroutines() <= r.before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return n, errors.New("ObjectStore.Put's goroutine never waited on its channel")
		}
	}
	return n, err
}

// resetGoroutines counts nats.go's resetPendingAcksOnReconnect goroutines
// waiting on a live channel (not a nil one, nor yet to run).
func resetGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		head, _, _ := bytes.Cut(g, []byte("\n"))
		live := bytes.Contains(head, []byte("[chan receive]")) || bytes.Contains(head, []byte("[chan receive, "))
		if live && bytes.Contains(g, []byte("jetstream.(*jetStream).resetPendingAcksOnReconnect")) {
			n++
		}
	}
	return n
}
