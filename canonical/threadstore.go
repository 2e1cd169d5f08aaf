package canonical

import "context"

// ThreadStore keeps durable per-thread records that outlive runs and
// instances: the agent runtime's thread state and checkpoints, a stateful
// protocol's stored responses. The bridge provides it (over JetStream), so
// no adapter talks to NATS for its state.
//
// A thread is any string (up to 256 bytes of UTF-8: dots, spaces and other
// scripts included); the store encodes it. A key names one record of the
// thread: one or more tokens of [A-Za-z0-9_=-] joined by dots (an adapter
// encodes free text with a token encoding first). A value may be of any
// size the store's limits allow: there is no per-value cap that drops
// anything, and a write that does not fit fails with CodeResourceExhausted
// leaving every stored value as it was.
//
// Errors are *Error: CodeNotFound (no such record), CodeAborted (a
// revision conflict), CodeResourceExhausted (a limit of the store),
// CodeInvalidArgument (a bad thread or key), CodeUnavailable (the store
// cannot be reached), or the context's code. Messages are plain: the
// details of the backing store are logged, not returned.
//
// Records expire a configured time after their last write (the bridge's
// nats.thread_ttl); a thread's records are written independently, so an
// adapter rewrites what must live as long as the thread.
type ThreadStore interface {
	// Get returns a record's value and its revision, which a later Put
	// names to update exactly this version.
	Get(ctx context.Context, thread, key string) (value []byte, rev uint64, err error)
	// Put writes a record if it is still at revision expectRev (0: only if
	// it does not exist) and returns the new revision: optimistic
	// concurrency, so two instances writing one thread never overwrite
	// each other unseen. A mismatch is CodeAborted: read, merge, retry.
	// Revisions of a key only grow.
	Put(ctx context.Context, thread, key string, value []byte, expectRev uint64) (rev uint64, err error)
	// Delete removes a record; removing an absent one is not an error
	// (records that became obsolete are removed best-effort).
	Delete(ctx context.Context, thread, key string) error
	// Keys lists the thread's keys that start with prefix ("" for all),
	// sorted, for a protocol that finds its records by name.
	Keys(ctx context.Context, thread, prefix string) ([]string, error)
	// DeleteThread removes every record of the thread (a thread deleted by
	// its client).
	DeleteThread(ctx context.Context, thread string) error
}
