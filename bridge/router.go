package bridge

import (
	"path"
	"sort"

	"github.com/interlingua-dev/interlingua/canonical"
)

// knower is implemented by backends that know their own target names; a
// route then serves only the targets the backend knows.
type knower interface{ Knows(target string) bool }

// Router maps target names to backends: routes in order, exact names and
// path.Match globs, first match wins.
type Router struct {
	routes   []Route
	backends []canonical.Backend // per route
}

// RouteWrapper wraps a route's backend (the XML action-stream decoder is
// one); it is applied to routes that turn it on.
type RouteWrapper func(rt Route, be canonical.Backend) canonical.Backend

// NewRouter returns a router over routes and the constructed backends;
// wrap, if not nil, is applied to each route's backend.
func NewRouter(routes []Route, backends map[string]canonical.Backend, wrap RouteWrapper) *Router {
	r := &Router{routes: routes, backends: make([]canonical.Backend, len(routes))}
	for i, rt := range routes {
		be := backends[rt.Backend]
		if be != nil && wrap != nil {
			be = wrap(rt, be)
		}
		r.backends[i] = be
	}
	return r
}

// Resolve returns the route and backend serving target.
func (r *Router) Resolve(target string) (Route, canonical.Backend, bool) {
	if target == "" {
		return Route{}, nil, false
	}
	for i, rt := range r.routes {
		if ok, _ := path.Match(rt.Target, target); !ok {
			continue
		}
		be := r.backends[i]
		if be == nil {
			continue
		}
		name := target
		if rt.Model != "" {
			name = rt.Model
		}
		if k, ok := be.(knower); ok && !k.Knows(name) {
			continue
		}
		return rt, be, true
	}
	return Route{}, nil, false
}

// wrappers returns the route backends the router built itself (wrapped by
// a RouteWrapper), which the server closes at shutdown.
func (r *Router) wrappers(plain map[string]canonical.Backend) []canonical.Backend {
	var out []canonical.Backend
	for i, rt := range r.routes {
		if be := r.backends[i]; be != nil && be != plain[rt.Backend] {
			out = append(out, be)
		}
	}
	return out
}

// Targets lists the exact (non-glob) targets that resolve, sorted.
func (r *Router) Targets() []canonical.TargetInfo {
	seen := map[string]bool{}
	var out []canonical.TargetInfo
	for _, rt := range r.routes {
		if isGlob(rt.Target) || seen[rt.Target] {
			continue
		}
		if got, _, ok := r.Resolve(rt.Target); ok && got.Target == rt.Target {
			seen[rt.Target] = true
			out = append(out, canonical.TargetInfo{Name: rt.Target, Backend: rt.Backend})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func isGlob(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}
