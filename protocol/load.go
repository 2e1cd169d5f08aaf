package protocol

import (
	"log/slog"
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/metrics"
)

// LoadUpstream is a Load.NewUpstream for a protocol without an independent
// reference peer: its frontend (mount, with opts as its frontends.<name>
// block) in front of the load harness's paced producer
// (load.FrontendUpstream), over h2c too when h2c; backend returns the
// options of a backend of the protocol reaching the frontend at base.
func LoadUpstream(mount func(*http.ServeMux, FrontendDeps) error, opts map[string]any, h2c bool, backend func(base string) map[string]any) func(load.Script) (*load.Upstream, error) {
	return func(sc load.Script) (*load.Upstream, error) {
		var node *yaml.Node
		if opts != nil {
			n, err := OptionsNode(opts)
			if err != nil {
				return nil, err
			}
			node = &n
		}
		return load.FrontendUpstream(sc, h2c, func(mux *http.ServeMux, r canonical.Runner, h *load.Hooks) error {
			deps := FrontendDeps{Runner: r, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(),
				OnShutdown: h.OnShutdown, OnClose: h.OnClose, Options: node}
			if sc.Bridge == nil {
				return mount(mux, deps)
			}
			b, err := sc.Bridge(r)
			if err != nil {
				return err
			}
			deps.Runner, deps.Observer, deps.Store, deps.CheckThread, deps.CancelRun = b.Runner, b.Observer, b.Store, b.CheckThread, b.CancelRun
			if err := mount(mux, deps); err != nil {
				b.Close()
				return err
			}
			h.OnClose(b.Close) // after the frontend's own close hooks
			return nil
		}, backend)
	}
}

// OptionsNode turns a map into a config options node (a backend's or a
// frontend's block), as a config file would hold it.
func OptionsNode(m map[string]any) (yaml.Node, error) {
	data, err := yaml.Marshal(m)
	if err != nil {
		return yaml.Node{}, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return yaml.Node{}, err
	}
	return *doc.Content[0], nil
}
