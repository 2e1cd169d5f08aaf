package bridge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/nats-io/nats.go"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/metrics"
)

// BackendDeps is what a backend constructor may use.
type BackendDeps struct {
	Name   string
	Log    *slog.Logger
	Tools  canonical.Tools
	Runner canonical.Runner
	NATS   *nats.Conn
}

// BackendFactory builds a backend from its config options.
type BackendFactory func(opts *yaml.Node, deps BackendDeps) (canonical.Backend, error)

// FrontendDeps is what a frontend may use.
type FrontendDeps struct {
	Log    *slog.Logger
	Runner canonical.Runner
	// Observer serves a thread's events on any instance, from the replay
	// log then live (agent-protocol subscribers, reconnects).
	Observer canonical.Observer
	// CheckThread claims a thread for the caller's API key, or refuses
	// (not found) another key's thread; frontends that keep thread state
	// of their own call it before serving a thread.
	CheckThread func(ctx context.Context, thread string) error
	Tools       canonical.Tools
	Fabric      *Fabric
	// OnShutdown registers a function called when shutdown begins (e.g. to
	// close idle WebSockets with 1001); see http.Server.RegisterOnShutdown.
	OnShutdown func(func())
	// Options is the frontend's block under frontends.<name> in the config
	// (nil when absent), for DecodeOptions.
	Options *yaml.Node
	// OnClose registers a function called after runs have drained, which
	// the server waits for (bounded) before it exits: hijacked connections
	// flush their last frames and close there.
	OnClose func(func())
	// Metrics are the server's; a frontend that counts protocol events
	// (slow-consumer cut-offs) takes its counters from here.
	Metrics *metrics.Metrics
}

// backendTypes is the registry of backend adapters and frontends the
// registry of frontend adapters, filled by the registry_<protocol>.go files:
// adding a protocol is one such file.
var (
	backendTypes = map[string]BackendFactory{}
	frontends    []frontend
)

type frontend struct {
	Name  string
	Mount func(mux *http.ServeMux, d FrontendDeps) error
}

// xmlDecoder, when registered, wraps the backends of routes with xml: true.
var xmlDecoder func(be canonical.Backend, d BackendDeps) canonical.Backend

// routeWrapper applies the per-route wrappers (the XML decoder).
func routeWrapper(d BackendDeps) RouteWrapper {
	return func(rt Route, be canonical.Backend) canonical.Backend {
		if rt.XML && xmlDecoder != nil {
			return xmlDecoder(be, d)
		}
		return be
	}
}

// registerBackend adds a backend type; called from init.
func registerBackend(typ string, f BackendFactory) { backendTypes[typ] = f }

// registerFrontend adds a frontend; called from init. Frontends mount in
// file-name order.
func registerFrontend(name string, mount func(mux *http.ServeMux, d FrontendDeps) error) {
	frontends = append(frontends, frontend{Name: name, Mount: mount})
}

// BackendTypes lists the registered backend types.
func BackendTypes() []string {
	var t []string
	for k := range backendTypes {
		t = append(t, k)
	}
	sort.Strings(t)
	return t
}

// FrontendNames lists the registered frontends.
func FrontendNames() []string {
	var n []string
	for _, f := range frontends {
		n = append(n, f.Name)
	}
	return n
}

func knownFrontend(name string) bool {
	for _, f := range frontends {
		if f.Name == name {
			return true
		}
	}
	return false
}

// DecodeOptions decodes a backend's options node into an adapter Config,
// refusing unknown keys (with their line).
func DecodeOptions(opts *yaml.Node, into any) error {
	if opts == nil || opts.Kind == 0 {
		return nil
	}
	data, err := yaml.Marshal(opts)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("options (from line %d): %s", opts.Line, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

// buildBackends constructs every configured backend.
func buildBackends(cfg Config, deps BackendDeps) (map[string]canonical.Backend, error) {
	out := map[string]canonical.Backend{}
	names := make([]string, 0, len(cfg.Backends))
	for n := range cfg.Backends {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		bc := cfg.Backends[name]
		f, ok := backendTypes[bc.Type]
		if !ok {
			return nil, fmt.Errorf("backends.%s.type: unknown type %q (known: %s)", name, bc.Type, strings.Join(BackendTypes(), ", "))
		}
		d := deps
		d.Name = name
		d.Log = deps.Log.With("backend", name)
		be, err := f(&bc.Options, d)
		if err != nil {
			return nil, fmt.Errorf("backends.%s: %w", name, err)
		}
		out[name] = be
	}
	return out, nil
}
