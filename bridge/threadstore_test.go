package bridge_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// startStoreFabric starts a fabric on dir with cfg's NATS settings
// (defaults filled in) and closes it at the test's end.
func startStoreFabric(t *testing.T, dir string, set func(*bridge.NATSConfig)) *bridge.Fabric {
	t.Helper()
	cfg := bridge.DefaultConfig()
	if set != nil {
		set(&cfg.NATS)
	}
	cfg.Defaults()
	f, err := bridge.StartFabric(context.Background(), cfg.NATS, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func wantCode(t *testing.T, what string, err error, code canonical.Code) {
	t.Helper()
	if canonical.CodeOf(err) != code {
		t.Fatalf("%s: %v, want code %s", what, err, code)
	}
	if err != nil && (strings.Contains(err.Error(), "nats:") || strings.Contains(err.Error(), "err_code")) {
		t.Fatalf("%s: the error names NATS internals: %v", what, err)
	}
}

// Values round-trip under thread ids with dots, other scripts and 200
// characters; Put is optimistic (create-only at 0, the read revision
// after); Keys lists a thread's own keys; Delete and DeleteThread remove.
func TestThreadStoreRoundTrip(t *testing.T) {
	s := startStoreFabric(t, t.TempDir(), nil).ThreadStore()
	ctx := t.Context()
	for _, thread := range []string{"plain", "a.b", "é", "a b>*", strings.Repeat("x.", 100), strings.Repeat("ü", 128)} {
		t.Run(thread[:min(len(thread), 8)], func(t *testing.T) {
			_, _, err := s.Get(ctx, thread, "head")
			wantCode(t, "get before put", err, canonical.CodeNotFound)
			rev, err := s.Put(ctx, thread, "head", []byte("one"), 0)
			wantCode(t, "create", err, canonical.CodeOK)
			_, err = s.Put(ctx, thread, "head", []byte("again"), 0)
			wantCode(t, "create over an existing record", err, canonical.CodeAborted)
			v, got, err := s.Get(ctx, thread, "head")
			if err != nil || string(v) != "one" || got != rev {
				t.Fatalf("get = %q rev %d %v, want one rev %d", v, got, err, rev)
			}
			rev2, err := s.Put(ctx, thread, "head", []byte("two"), rev)
			wantCode(t, "update at the read revision", err, canonical.CodeOK)
			if rev2 <= rev {
				t.Fatalf("revision %d after %d", rev2, rev)
			}
			_, err = s.Put(ctx, thread, "head", []byte("stale"), rev)
			wantCode(t, "update at a stale revision", err, canonical.CodeAborted)
			if _, err := s.Put(ctx, thread, "ckpt.1", []byte{}, 0); err != nil {
				t.Fatal(err)
			}
			if v, _, err := s.Get(ctx, thread, "ckpt.1"); err != nil || v == nil || len(v) != 0 {
				t.Fatalf("empty value read back as %q, %v", v, err)
			}
			keys, err := s.Keys(ctx, thread, "")
			if err != nil || !slices.Equal(keys, []string{"ckpt.1", "head"}) {
				t.Fatalf("keys = %v %v", keys, err)
			}
			if keys, _ := s.Keys(ctx, thread, "ckpt."); !slices.Equal(keys, []string{"ckpt.1"}) {
				t.Fatalf("keys under ckpt. = %v", keys)
			}
			wantCode(t, "delete", s.Delete(ctx, thread, "ckpt.1"), canonical.CodeOK)
			wantCode(t, "delete an absent record", s.Delete(ctx, thread, "ckpt.1"), canonical.CodeOK)
			_, _, err = s.Get(ctx, thread, "ckpt.1")
			wantCode(t, "get after delete", err, canonical.CodeNotFound)
			wantCode(t, "delete thread", s.DeleteThread(ctx, thread), canonical.CodeOK)
			if keys, err := s.Keys(ctx, thread, ""); err != nil || len(keys) != 0 {
				t.Fatalf("keys after DeleteThread = %v %v", keys, err)
			}
		})
	}
	// Threads are apart: "a" is not a prefix of "a.b"'s records.
	if _, err := s.Put(ctx, "a", "k", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if keys, _ := s.Keys(ctx, "a.b", ""); len(keys) != 0 {
		t.Fatalf("thread a.b lists %v", keys)
	}
	for _, bad := range []struct{ thread, key string }{{"", "k"}, {strings.Repeat("x", 257), "k"}, {"\xff", "k"}, {"t", ""}, {"t", "a..b"}, {"t", "a b"}, {"t", "a*"}} {
		_, err := s.Put(ctx, bad.thread, bad.key, nil, 0)
		wantCode(t, "put "+bad.thread[:min(len(bad.thread), 5)]+"/"+bad.key, err, canonical.CodeInvalidArgument)
	}
}

// A 20 MiB value (in the chunk stream) survives the fabric's close and a
// restart on the same data folder; replacing and deleting it removes its
// chunks.
func TestThreadStoreLargeValueSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdefghij"), 1<<20) // 20 MiB
	f := startStoreFabric(t, dir, nil)
	rev, err := f.ThreadStore().Put(t.Context(), "a.b é", "head", big, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()

	f = startStoreFabric(t, dir, nil)
	s := f.ThreadStore()
	v, got, err := s.Get(t.Context(), "a.b é", "head")
	if err != nil || got != rev || !bytes.Equal(v, big) {
		t.Fatalf("after restart: %d bytes rev %d %v, want %d bytes rev %d", len(v), got, err, len(big), rev)
	}
	chunks := func() uint64 { return chunkCount(t, f.JetStream()) }
	// The embedded server's 8 MiB max payload makes 1 MiB chunks.
	if n := chunks(); n != 20 {
		t.Fatalf("%d chunks, want 20", n)
	}
	rev, err = s.Put(t.Context(), "a.b é", "head", big[:3<<20], rev)
	if err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n != 3 {
		t.Fatalf("after replacing the value: %d chunks, want 3", n)
	}
	// A create over the existing record writes its chunks, then is
	// refused: the chunks go.
	_, err = s.Put(t.Context(), "a.b é", "head", big, 0)
	wantCode(t, "a large value created over an existing record", err, canonical.CodeAborted)
	if n := chunks(); n != 3 {
		t.Fatalf("after a refused write: %d chunks, want 3", n)
	}
	if _, err := s.Put(t.Context(), "a.b é", "head", []byte("small"), rev); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n != 0 {
		t.Fatalf("after replacing with a small value: %d chunks, want 0", n)
	}
	if v, _, err := s.Get(t.Context(), "a.b é", "head"); err != nil || string(v) != "small" {
		t.Fatalf("get = %q %v", v, err)
	}
}

// At thread_max_bytes a Put fails with resource_exhausted, for a value in
// the chunk stream as for one in the bucket, and every value stored
// before reads back whole.
func TestThreadStoreLimit(t *testing.T) {
	const limit = 1 << 20
	s := startStoreFabric(t, t.TempDir(), func(n *bridge.NATSConfig) { n.ThreadMaxBytes = limit }).ThreadStore()
	ctx := t.Context()
	large := bytes.Repeat([]byte("L"), 600<<10) // over the inline bound: a chunk
	if _, err := s.Put(ctx, "t", "large.1", large, 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.Put(ctx, "t", "large.2", large, 0)
	wantCode(t, "a second large value", err, canonical.CodeResourceExhausted)

	small := bytes.Repeat([]byte("s"), 100<<10)
	var stored []string
	for i := 0; ; i++ {
		key := "small." + strings.Repeat("x", i+1)
		_, err := s.Put(ctx, "t", key, small, 0)
		if err != nil {
			wantCode(t, "small values past the bound", err, canonical.CodeResourceExhausted)
			break
		}
		stored = append(stored, key)
		if i > 20 {
			t.Fatalf("%d values of 100 KiB stored under a 1 MiB bound", i)
		}
	}
	if v, _, err := s.Get(ctx, "t", "large.1"); err != nil || !bytes.Equal(v, large) {
		t.Fatalf("large value after the limit: %d bytes, %v", len(v), err)
	}
	if len(stored) == 0 {
		t.Fatal("no small value stored")
	}
	for _, key := range stored {
		if v, _, err := s.Get(ctx, "t", key); err != nil || !bytes.Equal(v, small) {
			t.Fatalf("%s after the limit: %d bytes, %v", key, len(v), err)
		}
	}
}

// nats.thread_ttl and nats.thread_max_bytes reach the bucket, the chunk
// stream and the object store of earlier versions' values.
func TestThreadStoreRetentionConfig(t *testing.T) {
	f := startStoreFabric(t, t.TempDir(), func(n *bridge.NATSConfig) { n.ThreadTTL = 3 * time.Hour; n.ThreadMaxBytes = 5 << 20 })
	js := f.JetStream()
	for _, name := range []string{"KV_" + bridge.ThreadStateBucket, bridge.ThreadChunkStream, "OBJ_" + bridge.ThreadObjectStore} {
		st, err := js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if c := st.CachedInfo().Config; c.MaxAge != 3*time.Hour || c.MaxBytes != 5<<20 || c.Discard != jetstream.DiscardNew {
			t.Fatalf("%s: max age %v, max bytes %d, discard %v", name, c.MaxAge, c.MaxBytes, c.Discard)
		}
	}
	cfg := bridge.DefaultConfig()
	cfg.Defaults()
	if cfg.NATS.ThreadTTL != 7*24*time.Hour || cfg.NATS.ThreadMaxBytes != 1<<30 {
		t.Fatalf("defaults: thread_ttl %v, thread_max_bytes %d", cfg.NATS.ThreadTTL, cfg.NATS.ThreadMaxBytes)
	}
}

// A nats-server killed (SIGKILL) while a large value's chunks are being
// written, and started again: the thread store's value is, then and after
// the write is tried again, one of the values written, whole, at the
// revision that wrote it; never a pointer to chunks the server lacks.
func TestThreadStoreLargePutAcrossNATSKill(t *testing.T) {
	n := bridgetest.StartNATSProcess(t)
	nc, err := nats.Connect(n.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cfg := bridge.DefaultConfig()
	cfg.Defaults()
	s, err := bridge.OpenThreadStore(t.Context(), nc, cfg.NATS, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The server's 1 MiB max payload makes chunks of 512 KiB.
	old := bytes.Repeat([]byte("old "), 1<<20)         // 4 MiB: 8 chunks
	next := bytes.Repeat([]byte("next value "), 4<<20) // 44 MiB: 88 chunks
	rev, err := s.Put(t.Context(), "t", "head", old, 0)
	if err != nil {
		t.Fatal(err)
	}

	put := make(chan error, 1)
	go func() {
		// A chunk's publish whose reply the kill lost waits for this.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := s.Put(ctx, "t", "head", next, rev)
		put <- err
	}()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waitChunks(t, js, 8+4) // some of next's chunks are stored
	n.Kill()
	n.Start(t)
	putErr := <-put
	t.Logf("the put across the kill: %v", putErr)

	readBack := func(what string) uint64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		v, got, err := s.Get(ctx, "t", "head")
		switch {
		case err != nil:
			t.Fatalf("%s: %v", what, err)
		case got == rev && !bytes.Equal(v, old), got != rev && !bytes.Equal(v, next):
			t.Fatalf("%s: %d bytes at revision %d (the old value's is %d): neither value written", what, len(v), got, rev)
		}
		return got
	}
	got := readBack("after the restart")
	if putErr == nil && got == rev {
		t.Fatal("the put succeeded, and the old value is read")
	}
	if got == rev {
		if _, err := s.Put(t.Context(), "t", "head", next, rev); err != nil {
			t.Fatalf("the put tried again: %v", err)
		}
		if readBack("after the put tried again") == rev {
			t.Fatal("the put tried again left the old value")
		}
	}
}

// waitChunks waits until the chunk stream holds more than n messages.
func waitChunks(t *testing.T, js jetstream.JetStream, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if chunkCount(t, js) > n {
			return
		}
	}
	t.Fatalf("the chunk stream never held more than %d messages", n)
}

// chunkCount is how many messages the chunk stream holds.
func chunkCount(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	st, err := js.Stream(t.Context(), bridge.ThreadChunkStream) // reads its info
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}
