package canonical

import (
	"context"
	"path"
)

// Principal is the authenticated caller: the API key's name and the
// targets it may use. Frontends receive it in the request context from the
// daemon's auth layer; the bridge enforces it.
type Principal struct {
	// Name identifies the key; threads and sessions belong to it.
	Name string
	// Targets are the target names or path.Match globs the key may use;
	// empty means every target.
	Targets []string
	// MaxRuns bounds the key's runs in flight; 0 means no per-key bound
	// (the daemon's other limits still apply).
	MaxRuns int
	// MaxObservers bounds the key's open thread observers (replays and
	// live event streams); 0 means no per-key bound.
	MaxObservers int
}

// Allows reports whether the principal may use target.
func (p *Principal) Allows(target string) bool {
	if p == nil || len(p.Targets) == 0 {
		return true
	}
	for _, t := range p.Targets {
		if ok, _ := path.Match(t, target); ok {
			return true
		}
	}
	return false
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the caller, or nil when auth is off.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
