package bridge

import (
	"fmt"
	"sort"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// routeWrapper applies the per-route wrappers: a route with xml: true is
// wrapped by the protocol that decodes it.
func routeWrapper(d protocol.BackendDeps) RouteWrapper {
	return func(rt Route, be canonical.Backend) canonical.Backend {
		if !rt.XML {
			return be
		}
		for _, p := range protocols.All {
			if p.WrapRoute != nil {
				be = p.WrapRoute(be, d)
			}
		}
		return be
	}
}

// BackendTypes lists the backend types.
func BackendTypes() []string {
	var t []string
	for _, p := range protocols.All {
		if p.NewBackend != nil {
			t = append(t, p.Name)
		}
	}
	sort.Strings(t)
	return t
}

// FrontendNames lists the frontends, in mount order.
func FrontendNames() []string {
	var n []string
	for _, p := range protocols.All {
		if p.Mount != nil {
			n = append(n, p.Name)
		}
	}
	return n
}

func knownFrontend(name string) bool {
	p := protocols.Get(name)
	return p != nil && p.Mount != nil
}

// buildBackends constructs every configured backend.
func buildBackends(cfg Config, deps protocol.BackendDeps) (map[string]canonical.Backend, error) {
	out := map[string]canonical.Backend{}
	names := make([]string, 0, len(cfg.Backends))
	for n := range cfg.Backends {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		bc := cfg.Backends[name]
		p := protocols.Get(bc.Type)
		if p == nil || p.NewBackend == nil {
			return nil, fmt.Errorf("backends.%s.type: unknown type %q (known: %s)", name, bc.Type, strings.Join(BackendTypes(), ", "))
		}
		d := deps
		d.Log = deps.Log.With("backend", name)
		be, err := p.NewBackend(&bc.Options, d)
		if err != nil {
			return nil, fmt.Errorf("backends.%s.options: %w", name, err)
		}
		out[name] = stalling(be, name, bc.StallTimeout)
	}
	return out, nil
}

// AddRuntimes registers every protocol's runtime (Protocol.NewRuntime),
// keeping its state in the fabric's thread store: requests placed on this
// bridge may name them.
func (b *Bridge) AddRuntimes() {
	for _, p := range protocols.All {
		if p.NewRuntime != nil {
			b.AddRuntime(p.Name, p.NewRuntime(protocol.RuntimeDeps{Log: b.log.With("runtime", p.Name), Store: b.ThreadStore()}))
		}
	}
}
