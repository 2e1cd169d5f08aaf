package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
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
	ThreadChunkStream = "interlingua_thread_chunks"
	// ThreadObjectStore held large values in earlier versions; entries
	// pointing into it are still read, replaced and removed, and nothing
	// new is written to it.
	ThreadObjectStore = "interlingua_thread_objects"
)

const (
	// maxThreadIDBytes bounds a thread id the store accepts.
	maxThreadIDBytes = 256
	// maxInlineBytes is the largest value kept in the KV bucket itself;
	// larger ones go to the chunk stream (a KV value is one NATS message,
	// bounded by the server's max_payload, 1 MiB by default).
	maxInlineBytes = 256 << 10
	// maxChunkBytes bounds one message of the chunk stream.
	maxChunkBytes = 1 << 20
	// getAttempts bounds the re-reads of a record whose chunks were
	// replaced between reading its pointer and reading them.
	getAttempts = 4
)

// A KV entry of the store starts with one of these bytes: the value
// follows; or the name of the legacy object holding it; or the chunks
// holding it ("<id> <chunks> <bytes>", chunkPointer).
const (
	entryInline  byte = 0
	entryPointer byte = 1
	entryChunks  byte = 2
)

// natsThreadStore is canonical.ThreadStore over JetStream: a KV bucket
// holds each record under "<thread>.<key>" (the thread encoded by
// subject.Key), its value inline when small, else a pointer to the
// chunks of the chunk stream that hold it, each under
// "interlingua_thread_chunks.<id>.<n>" (id fresh for each write). The
// chunks are written before the pointer that names them, and those it
// replaces are removed after, so a reader never finds a pointer to a
// half-written value and a failed write leaves the old value whole.
//
// The chunk stream is ours rather than a JetStream object store because
// nats.go v1.55.0's ObjectStore.Put can strand a goroutine of its own for
// good on a busy machine: it starts one (resetPendingAcksOnReconnect) with
// each put's private JetStream context, whose cleanup, deferred by Put,
// can run before that goroutine first takes the context's lock, leaving it
// to wait on a nil channel. The chunks go out as plain synchronous
// publishes instead.
type natsThreadStore struct {
	kv        jetstream.KeyValue
	js        jetstream.JetStream
	chunks    jetstream.Stream
	obs       jetstream.ObjectStore // legacy values (ThreadObjectStore)
	inlineMax int
	chunkMax  int
	log       *slog.Logger

	mu sync.Mutex
	// seen holds, per KV key, the revision last read or written here and
	// the entry's pointer (nil for an inline value), so a Put over that
	// revision knows what it replaces without reading the entry first: one
	// round trip of a thread's every save. A revision names one entry of
	// the bucket, so a match is never stale. Bounded by maxSeen (cleared
	// when full).
	seen map[string]seenEntry
}

type seenEntry struct {
	rev uint64
	ptr []byte
}

// maxSeen bounds natsThreadStore.seen.
const maxSeen = 16384

// remember notes the entry at k's revision rev, pointing to ptr.
func (s *natsThreadStore) remember(k string, rev uint64, ptr []byte) {
	s.mu.Lock()
	if s.seen == nil || len(s.seen) >= maxSeen {
		s.seen = make(map[string]seenEntry)
	}
	s.seen[k] = seenEntry{rev, ptr}
	s.mu.Unlock()
}

// forget drops what is noted of k (deleted, or a write of unknown outcome).
func (s *natsThreadStore) forget(k string) {
	s.mu.Lock()
	delete(s.seen, k)
	s.mu.Unlock()
}

// replaced returns the pointer of the entry at k's revision rev (nil
// for an inline value), reading the entry unless it is noted; a conflict
// if k is not at rev.
func (s *natsThreadStore) replaced(ctx context.Context, thread, key, k string, rev uint64) ([]byte, error) {
	s.mu.Lock()
	e, ok := s.seen[k]
	s.mu.Unlock()
	if ok && e.rev == rev {
		return e.ptr, nil
	}
	got, err := s.kv.Get(ctx, k)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, s.fail("put", thread, key, err)
	}
	if err != nil || got.Revision() != rev {
		return nil, canonical.Errorf(canonical.CodeAborted, "thread store: %q is not at revision %d", key, rev)
	}
	return pointerOf(got.Value()), nil
}

// pointerOf is an entry's pointer (the entry itself); nil for an inline
// value.
func pointerOf(v []byte) []byte {
	if len(v) > 0 && v[0] != entryInline {
		return v
	}
	return nil
}

// chunkPointer is what an entryChunks entry says: the value is bytes
// long, in chunks messages under the chunk stream's "<id>.>".
type chunkPointer struct {
	id     string
	chunks int
	bytes  int
}

func (p chunkPointer) entry() []byte {
	return fmt.Appendf([]byte{entryChunks}, "%s %d %d", p.id, p.chunks, p.bytes)
}

// subject is the subject of the chunk numbered token, or with token ">"
// the filter of them all.
func (p chunkPointer) subject(token string) string {
	return ThreadChunkStream + "." + p.id + "." + token
}

// parseChunkPointer reads an entryChunks entry.
func parseChunkPointer(v []byte) (chunkPointer, bool) {
	f := strings.Fields(string(v[1:]))
	if len(f) != 3 || !validStoreKey(f[0]) || strings.Contains(f[0], ".") {
		return chunkPointer{}, false
	}
	chunks, err1 := strconv.Atoi(f[1])
	size, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || chunks < 0 || size < 0 {
		return chunkPointer{}, false
	}
	return chunkPointer{id: f[0], chunks: chunks, bytes: size}, true
}

// OpenThreadStore creates (or updates) the thread store's KV bucket,
// chunk stream and (for earlier versions' values) object store on nc's
// JetStream, with cfg's thread_ttl, thread_max_bytes (each asset's bound)
// and replicas, and returns the store. The fabric
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
	chunks, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: ThreadChunkStream, Subjects: []string{ThreadChunkStream + ".>"},
		Storage: jetstream.FileStorage, MaxAge: cfg.ThreadTTL, MaxBytes: cfg.ThreadMaxBytes,
		Replicas: replicas, Discard: jetstream.DiscardNew, AllowDirect: true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats: thread chunk stream %s: %w", ThreadChunkStream, err)
	}
	// Kept, with the same limits, for the values an earlier version put
	// there: their entries are still read, and removing them frees it.
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
	// Half the max payload leaves room for the messages' headers.
	return &natsThreadStore{
		kv: kv, js: js, chunks: chunks, obs: obs, log: log,
		inlineMax: int(min(maxInlineBytes, maxPayload/2)),
		chunkMax:  int(min(maxChunkBytes, maxPayload/2)),
	}, nil
}

// errValueGone: a pointer's chunks (or object) are not in the store: the
// entry was replaced meanwhile, or they are lost.
var errValueGone = errors.New("the value pointed to is not stored")

// errBadPointer: an entry's pointer does not parse, or its chunks do not
// add up to the length it gives.
var errBadPointer = errors.New("the pointer does not match what is stored")

// Get returns the record's value, following its pointer to the chunks
// holding it. Chunks replaced between the two reads send it back to the
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
		ptr := pointerOf(v)
		if ptr == nil {
			s.remember(k, e.Revision(), nil)
			return inlineValue(v), e.Revision(), nil
		}
		data, err := s.readValue(ctx, ptr)
		switch {
		case err == nil:
			s.remember(k, e.Revision(), ptr)
			return data, e.Revision(), nil
		case errors.Is(err, errValueGone) && e.Revision() != lastRev:
			lastRev = e.Revision()
			continue
		case errors.Is(err, errValueGone), errors.Is(err, errBadPointer):
			// The same pointer twice: its value is gone.
			s.log.Error("thread store: a record's value is missing", "thread", thread, "key", key, "pointer", string(ptr[1:]), "err", err)
			return nil, 0, canonical.Errorf(canonical.CodeDataLoss, "thread store: the value of %q is missing", key)
		}
		return nil, 0, s.fail("get", thread, key, err)
	}
	return nil, 0, canonical.Errorf(canonical.CodeAborted, "thread store: %q changed during %d reads", key, getAttempts)
}

// readValue reads the value an entry's pointer names.
func (s *natsThreadStore) readValue(ctx context.Context, ptr []byte) ([]byte, error) {
	if ptr[0] == entryPointer {
		data, err := s.obs.GetBytes(ctx, string(ptr[1:]))
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, errValueGone
		}
		return data, err
	}
	p, ok := parseChunkPointer(ptr)
	if !ok {
		return nil, errBadPointer
	}
	data := make([]byte, 0, min(p.bytes, p.chunks*maxChunkBytes))
	for n := range p.chunks {
		m, err := s.chunks.GetLastMsgForSubject(ctx, p.subject(strconv.Itoa(n)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, errValueGone
		}
		if err != nil {
			return nil, err
		}
		data = append(data, m.Data...)
	}
	if len(data) != p.bytes {
		return nil, errBadPointer
	}
	return data, nil
}

// inlineValue is an inline entry's value (an empty entry is an empty value).
func inlineValue(v []byte) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	return v[1:]
}

// Put writes value at key if it is at expectRev: a large value to new
// chunks first, then the entry (inline value or pointer), then it removes
// the value the entry pointed to before.
func (s *natsThreadStore) Put(ctx context.Context, thread, key string, value []byte, expectRev uint64) (uint64, error) {
	k, err := storeKey(thread, key)
	if err != nil {
		return 0, err
	}
	var old []byte
	if expectRev > 0 {
		// The pointer of the entry replaced, if any (and a conflict found
		// before any chunk is written).
		if old, err = s.replaced(ctx, thread, key, k, expectRev); err != nil {
			return 0, err
		}
	}
	entry, err := s.entry(ctx, value)
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
		if refused(err) {
			s.removeValue(pointerOf(entry))
		}
		return 0, s.fail("put", thread, key, err)
	}
	s.remember(k, rev, pointerOf(entry))
	s.removeValue(old)
	return rev, nil
}

// refused tells a write the server refused (it answered with an error),
// or one never sent, from one whose outcome is unknown: a reply lost to
// a broken connection or a deadline may follow a write that was stored.
// The chunks of an unknown write are kept (the entry may point to them);
// if it was lost, they expire with thread_ttl.
func refused(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) || errors.Is(err, nats.ErrMaxPayload)
}

// entry is the KV entry for value: inline, or a pointer to new chunks
// holding it.
func (s *natsThreadStore) entry(ctx context.Context, value []byte) ([]byte, error) {
	if len(value) <= s.inlineMax {
		return append([]byte{entryInline}, value...), nil
	}
	p := chunkPointer{id: nuid.Next(), chunks: (len(value) + s.chunkMax - 1) / s.chunkMax, bytes: len(value)}
	for n := range p.chunks {
		part := value[n*s.chunkMax : min((n+1)*s.chunkMax, len(value))]
		if _, err := s.js.Publish(ctx, p.subject(strconv.Itoa(n)), part, jetstream.WithExpectStream(ThreadChunkStream)); err != nil {
			// A publish that failed may have been stored all the same.
			s.removeValue(p.entry())
			return nil, err
		}
	}
	return p.entry(), nil
}

// removeValue deletes the chunks (or object) of a pointer no entry holds
// any more. It is not bound to the caller's context (the write it follows
// succeeded or failed already); what it fails to remove expires with
// thread_ttl.
func (s *natsThreadStore) removeValue(ptr []byte) {
	if ptr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), removeValueTimeout)
	defer cancel()
	var err error
	if ptr[0] == entryPointer {
		if err = s.obs.Delete(ctx, string(ptr[1:])); errors.Is(err, jetstream.ErrObjectNotFound) {
			err = nil
		}
	} else if p, ok := parseChunkPointer(ptr); ok {
		err = s.chunks.Purge(ctx, jetstream.WithPurgeSubject(p.subject(">")))
	}
	if err != nil {
		s.log.Warn("thread store: an unused value is left to expire", "pointer", string(ptr[1:]), "err", err)
	}
}

// removeValueTimeout bounds the removal of an unused value.
const removeValueTimeout = 5 * time.Second

// Delete removes the record and its value's chunks.
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
	s.removeValue(pointerOf(e.Value()))
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
