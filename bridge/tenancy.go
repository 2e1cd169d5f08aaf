package bridge

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// maxOwnerCache bounds the thread-owner entries cached in memory.
const maxOwnerCache = 100_000

// owners records which API key a thread belongs to, in the thread KV bucket
// (key "owner.<thread>"), so every instance agrees; another key gets
// not-found for the thread on every path.
type owners struct {
	kv    jetstream.KeyValue // nil: in memory only (no fabric)
	log   *slog.Logger
	mu    sync.Mutex
	cache map[string]string
}

func (o *owners) check(ctx context.Context, thread string, p *canonical.Principal) error {
	if p == nil || thread == "" {
		return nil // auth off
	}
	o.mu.Lock()
	owner, ok := o.cache[thread]
	o.mu.Unlock()
	if !ok {
		var err error
		if owner, err = o.claim(ctx, thread, p.Name); err != nil {
			return err
		}
		o.remember(thread, owner)
	}
	if owner != p.Name {
		return canonical.Errorf(canonical.CodeNotFound, "unknown thread %q", thread)
	}
	return nil
}

// remember caches a thread's owner.
func (o *owners) remember(thread, owner string) {
	o.mu.Lock()
	if o.cache == nil || len(o.cache) >= maxOwnerCache {
		o.cache = map[string]string{}
	}
	o.cache[thread] = owner
	o.mu.Unlock()
}

// claim records name as the thread's owner unless it has one, and returns
// the owner.
func (o *owners) claim(ctx context.Context, thread, name string) (string, error) {
	if o.kv == nil {
		return name, nil
	}
	key := "owner." + subject.Key(thread)
	_, err := o.kv.Create(ctx, key, []byte(name))
	if err == nil {
		return name, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", natsFailure(o.log.With("thread", thread), canonical.CodeUnavailable, "the thread's owner could not be recorded", err)
	}
	e, err := o.kv.Get(ctx, key)
	if err != nil {
		return "", natsFailure(o.log.With("thread", thread), canonical.CodeUnavailable, "the thread's owner could not be read", err)
	}
	return string(e.Value()), nil
}

// claimNew claims a thread the bridge just named for one run (no client
// chose it) for p's key, in the background: the result arrives on the
// channel returned, nil when auth is off. Ids are random (canonical.NewID), so the
// claim can only fail when the thread KV cannot be written.
func (o *owners) claimNew(ctx context.Context, thread string, p *canonical.Principal) <-chan error {
	done := make(chan error, 1)
	if p == nil {
		done <- nil
		return done
	}
	go func() {
		owner, err := o.claim(context.WithoutCancel(ctx), thread, p.Name)
		if err == nil && owner != p.Name {
			err = canonical.Errorf(canonical.CodeAlreadyExists, "thread %q already exists", thread)
		}
		if err == nil {
			o.remember(thread, owner)
		}
		done <- err
	}()
	return done
}

// CheckThread claims thread for the caller in ctx, or verifies the caller
// owns it: CodeNotFound for a thread of another API key. Frontends that
// keep thread state of their own call it before serving a thread.
func (b *Bridge) CheckThread(ctx context.Context, thread string) error {
	return b.owners.check(ctx, thread, canonical.PrincipalFrom(ctx))
}
