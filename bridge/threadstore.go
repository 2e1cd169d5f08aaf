package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// Names of the JetStream assets behind the thread store. They are apart
// from ThreadsBucket, whose thread-owner claims must not expire with
// thread_ttl (an expired claim would let another API key claim a thread
// whose records still live).
const (
	ThreadStateBucket = "interlingua_thread_state"
	ThreadObjectStore = "interlingua_thread_objects"
)

const (
	// maxThreadIDBytes bounds a thread id the store accepts.
	maxThreadIDBytes = 256
	// maxInlineBytes is the largest value kept in the KV bucket itself;
	// larger ones go to the object store (a KV value is one NATS message,
	// bounded by the server's max_payload, 1 MiB by default).
	maxInlineBytes = 256 << 10
	// getAttempts bounds the re-reads of a record whose object was
	// replaced between reading its pointer and reading the object.
	getAttempts = 4
)

// A KV entry of the store starts with one of these bytes: the value
// follows, or the name of the object holding it.
const (
	entryInline  byte = 0
	entryPointer byte = 1
)

// natsThreadStore is canonical.ThreadStore over JetStream: a KV bucket
// holds each record under "<thread>.<key>" (the thread encoded by
// subject.Key), its value inline when small, else a pointer to an object
// of the object store. An object is written under a fresh name before the
// pointer that names it, and the object it replaces is removed after, so a
// reader never finds a pointer to a half-written object and a failed write
// leaves the old value whole.
type natsThreadStore struct {
	kv        jetstream.KeyValue
	obs       jetstream.ObjectStore
	inlineMax int
	log       *slog.Logger

	mu sync.Mutex
	// seen holds, per KV key, the revision last read or written here and
	// the object it points to (""), so a Put over that revision knows the
	// object it replaces without reading the entry first: one round trip
	// of a thread's every save. A revision names one entry of the bucket,
	// so a match is never stale. Bounded by maxSeen (cleared when full).
	seen map[string]seenEntry
}

type seenEntry struct {
	rev uint64
	obj string
}

// maxSeen bounds natsThreadStore.seen.
const maxSeen = 16384

// remember notes the entry at k's revision rev.
func (s *natsThreadStore) remember(k string, rev uint64, obj string) {
	s.mu.Lock()
	if s.seen == nil || len(s.seen) >= maxSeen {
		s.seen = make(map[string]seenEntry)
	}
	s.seen[k] = seenEntry{rev, obj}
	s.mu.Unlock()
}

// forget drops what is noted of k (deleted, or a write of unknown outcome).
func (s *natsThreadStore) forget(k string) {
	s.mu.Lock()
	delete(s.seen, k)
	s.mu.Unlock()
}

// replaced returns the object the entry at k's revision rev points to
// ("" for an inline value), reading the entry unless it is noted; a
// conflict if k is not at rev.
func (s *natsThreadStore) replaced(ctx context.Context, thread, key, k string, rev uint64) (string, error) {
	s.mu.Lock()
	e, ok := s.seen[k]
	s.mu.Unlock()
	if ok && e.rev == rev {
		return e.obj, nil
	}
	got, err := s.kv.Get(ctx, k)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", s.fail("put", thread, key, err)
	}
	if err != nil || got.Revision() != rev {
		return "", canonical.Errorf(canonical.CodeAborted, "thread store: %q is not at revision %d", key, rev)
	}
	return pointerOf(got.Value()), nil
}

// pointerOf is the object an entry points to; "" for an inline value.
func pointerOf(v []byte) string {
	if len(v) > 0 && v[0] == entryPointer {
		return string(v[1:])
	}
	return ""
}

// OpenThreadStore creates (or updates) the thread store's KV bucket and
// object store on nc's JetStream, with cfg's thread_ttl, thread_max_bytes
// (each asset's bound) and replicas, and returns the store. The fabric
// opens one (Fabric.ThreadStore); tests open their own on a server.
func OpenThreadStore(ctx context.Context, nc *nats.Conn, cfg NATSConfig, log *slog.Logger) (canonical.ThreadStore, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	return openThreadStore(ctx, js, nc.MaxPayload(), cfg, log)
}

func openThreadStore(ctx context.Context, js jetstream.JetStream, maxPayload int64, cfg NATSConfig, log *slog.Logger) (*natsThreadStore, error) {
	replicas := max(cfg.Replicas, 1)
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: ThreadStateBucket, History: 1, Storage: jetstream.FileStorage,
		TTL: cfg.ThreadTTL, MaxBytes: cfg.ThreadMaxBytes, Replicas: replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("nats: thread state bucket %s: %w", ThreadStateBucket, err)
	}
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: ThreadObjectStore, Storage: jetstream.FileStorage,
		TTL: cfg.ThreadTTL, MaxBytes: cfg.ThreadMaxBytes, Replicas: replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("nats: thread object store %s: %w", ThreadObjectStore, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Half the max payload leaves room for the entry's headers.
	return &natsThreadStore{kv: kv, obs: obs, inlineMax: int(min(maxInlineBytes, maxPayload/2)), log: log}, nil
}

// Get returns the record's value, following its pointer to the object
// store. An object replaced between the two reads sends it back to the
// entry, whose revision then changed.
func (s *natsThreadStore) Get(ctx context.Context, thread, key string) ([]byte, uint64, error) {
	k, err := storeKey(thread, key)
	if err != nil {
		return nil, 0, err
	}
	var lastRev uint64
	for range getAttempts {
		e, err := s.kv.Get(ctx, k)
		if err != nil {
			return nil, 0, s.fail("get", thread, key, err)
		}
		v := e.Value()
		obj := pointerOf(v)
		if obj == "" {
			s.remember(k, e.Revision(), "")
			return inlineValue(v), e.Revision(), nil
		}
		data, err := s.obs.GetBytes(ctx, obj)
		if err == nil {
			s.remember(k, e.Revision(), obj)
			return data, e.Revision(), nil
		}
		if !errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, 0, s.fail("get", thread, key, err)
		}
		if e.Revision() == lastRev { // the same pointer twice: its object is gone
			s.log.Error("thread store: a record's object is missing", "thread", thread, "key", key, "object", obj)
			return nil, 0, canonical.Errorf(canonical.CodeDataLoss, "thread store: the value of %q is missing", key)
		}
		lastRev = e.Revision()
	}
	return nil, 0, canonical.Errorf(canonical.CodeAborted, "thread store: %q changed during %d reads", key, getAttempts)
}

// inlineValue is an inline entry's value (an empty entry is an empty value).
func inlineValue(v []byte) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	return v[1:]
}

// Put writes value at key if it is at expectRev: a large value to a new
// object first, then the entry (inline value or pointer), then it removes
// the object the entry pointed to before.
func (s *natsThreadStore) Put(ctx context.Context, thread, key string, value []byte, expectRev uint64) (uint64, error) {
	k, err := storeKey(thread, key)
	if err != nil {
		return 0, err
	}
	old := ""
	if expectRev > 0 {
		// The object of the entry replaced, if any (and a conflict found
		// before any object is written).
		if old, err = s.replaced(ctx, thread, key, k, expectRev); err != nil {
			return 0, err
		}
	}
	entry, obj, err := s.entry(ctx, k, value)
	if err != nil {
		return 0, s.fail("put", thread, key, err)
	}
	var rev uint64
	if expectRev == 0 {
		rev, err = s.kv.Create(ctx, k, entry)
	} else {
		rev, err = s.kv.Update(ctx, k, entry, expectRev)
	}
	if err != nil {
		s.forget(k)
		s.removeObject(obj)
		return 0, s.fail("put", thread, key, err)
	}
	s.remember(k, rev, obj)
	s.removeObject(old)
	return rev, nil
}

// entry is the KV entry for value: inline, or a pointer to obj, a new
// object holding it. nats.go v1.55.0's ObjectStore.Put can strand one
// goroutine of its own when the machine is busy (internal/leaktest says
// how): a put of a large value, not every event, so it is left to an
// upstream fix.
func (s *natsThreadStore) entry(ctx context.Context, k string, value []byte) (entry []byte, obj string, err error) {
	if len(value) <= s.inlineMax {
		return append([]byte{entryInline}, value...), "", nil
	}
	obj = k + "." + nuid.Next()
	if _, err := s.obs.PutBytes(ctx, obj, value); err != nil {
		return nil, "", err
	}
	return append([]byte{entryPointer}, obj...), obj, nil
}

// removeObject deletes an object no entry points to any more. It is not
// bound to the caller's context (the write it follows succeeded or
// failed already); one it fails to remove expires with thread_ttl.
func (s *natsThreadStore) removeObject(name string) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), removeObjectTimeout)
	defer cancel()
	if err := s.obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		s.log.Warn("thread store: an unused object is left to expire", "object", name, "err", err)
	}
}

// removeObjectTimeout bounds the removal of an unused object.
const removeObjectTimeout = 5 * time.Second

// Delete removes the record and its object.
func (s *natsThreadStore) Delete(ctx context.Context, thread, key string) error {
	k, err := storeKey(thread, key)
	if err != nil {
		return err
	}
	return s.delete(ctx, thread, key, k)
}

func (s *natsThreadStore) delete(ctx context.Context, thread, key, k string) error {
	e, err := s.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return s.fail("delete", thread, key, err)
	}
	s.forget(k)
	if err := s.kv.Delete(ctx, k); err != nil {
		return s.fail("delete", thread, key, err)
	}
	s.removeObject(pointerOf(e.Value()))
	return nil
}

// Keys lists the thread's keys under prefix, sorted.
func (s *natsThreadStore) Keys(ctx context.Context, thread, prefix string) ([]string, error) {
	t, err := storeThread(thread)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx) // ends the lister's goroutine on every return
	defer cancel()
	l, err := s.kv.ListKeysFiltered(ctx, t+".>")
	if err != nil {
		return nil, s.fail("keys", thread, prefix, err)
	}
	var keys []string
	for k := range l.Keys() {
		if key := k[len(t)+1:]; strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, canonical.AsError(err)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil // a listing may repeat a key written meanwhile
}

// DeleteThread removes each of the thread's records.
func (s *natsThreadStore) DeleteThread(ctx context.Context, thread string) error {
	keys, err := s.Keys(ctx, thread, "")
	if err != nil {
		return err
	}
	t, _ := storeThread(thread)
	for _, key := range keys {
		if err := s.delete(ctx, thread, key, t+"."+key); err != nil {
			return err
		}
	}
	return nil
}

// storeThread is the thread's token in KV keys and object names.
func storeThread(thread string) (string, error) {
	if thread == "" || len(thread) > maxThreadIDBytes || !utf8.ValidString(thread) {
		return "", canonical.Errorf(canonical.CodeInvalidArgument, "thread store: a thread id is 1 to %d bytes of UTF-8", maxThreadIDBytes)
	}
	return subject.Key(thread), nil
}

// storeKey is the KV key of a record: the thread's token, then key.
func storeKey(thread, key string) (string, error) {
	t, err := storeThread(thread)
	if err != nil {
		return "", err
	}
	if !validStoreKey(key) {
		return "", canonical.Errorf(canonical.CodeInvalidArgument, "thread store: key %q is not dot-separated tokens of [A-Za-z0-9_=-]", key)
	}
	return t + "." + key, nil
}

func validStoreKey(key string) bool {
	for tok := range strings.SplitSeq(key, ".") {
		if tok == "" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '=') {
				return false
			}
		}
	}
	return true
}

// fail turns a NATS error into the store's canonical one, with a plain
// message; the NATS details are logged here (not for a missing record or
// a conflict, which callers expect).
func (s *natsThreadStore) fail(op, thread, key string, err error) error {
	code := storeCode(err)
	switch code {
	case canonical.CodeNotFound:
		return canonical.Errorf(code, "thread store: no record %q", key)
	case canonical.CodeAborted:
		return canonical.Errorf(code, "thread store: %q was written meanwhile", key)
	case canonical.CodeCanceled, canonical.CodeDeadlineExceeded:
		return canonical.Errorf(code, "thread store: %s %q: %s", op, key, code)
	}
	s.log.Warn("thread store: "+op+" failed", "thread", thread, "key", key, "code", code.String(), "err", err)
	if code == canonical.CodeResourceExhausted {
		return canonical.Errorf(code, "thread store: %s %q: the store is full (nats.thread_max_bytes)", op, key)
	}
	return canonical.Errorf(code, "thread store: %s %q failed", op, key)
}

// storeCode maps a JetStream error to a canonical code.
func storeCode(err error) canonical.Code {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, context.Canceled):
		return canonical.CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return canonical.CodeDeadlineExceeded
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrObjectNotFound):
		return canonical.CodeNotFound
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return canonical.CodeAborted
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, jetstream.ErrMaxBytesExceeded):
		return canonical.CodeResourceExhausted
	case errors.As(err, &api):
		return apiCode(api)
	}
	return canonical.CodeUnavailable
}

// JetStream API error codes the store tells apart (nats-server's
// server/errors.json).
const (
	jsInsufficientResources   = 10023 // the server's JetStream storage is full
	jsMessageExceedsMaximum   = 10054
	jsStreamStoreFailed       = 10077 // the stream refused to store: its limits, or a disk error
	jsStreamWrongLastSeqConst = 10164
)

func apiCode(api *jetstream.APIError) canonical.Code {
	switch api.ErrorCode {
	case jetstream.JSErrCodeStreamWrongLastSequence, jsStreamWrongLastSeqConst:
		return canonical.CodeAborted
	case jsInsufficientResources, jsMessageExceedsMaximum:
		return canonical.CodeResourceExhausted
	case jsStreamStoreFailed:
		if d := api.Description; strings.Contains(d, "maximum") || strings.Contains(d, "too large") {
			return canonical.CodeResourceExhausted
		}
	}
	return canonical.CodeUnavailable
}
