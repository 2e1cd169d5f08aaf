package bridge

import (
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/canonical"
)

func init() {
	registerFrontend("agent", func(mux *http.ServeMux, d FrontendDeps) error {
		cfg := agent.Config{Runner: d.Runner, CheckThread: d.CheckThread, Logger: d.Log.With("protocol", "agent")}
		if d.Fabric != nil {
			cfg.KV = d.Fabric.Threads()
			cfg.Cluster = &agent.Cluster{Conn: d.Fabric.Conn(), Prefix: d.Fabric.Prefix(), Publish: d.Fabric.Publish}
		}
		f, err := agent.NewFrontend(cfg)
		if err != nil {
			return err
		}
		f.Mount(mux)
		if d.OnShutdown != nil {
			d.OnShutdown(f.Shutdown)
		}
		return nil
	})
	// Backend type "agent": a client of an upstream agent-protocol server.
	// Options: url (required), assistant_id, transport (sse | websocket),
	// headers, timeout, max_event_bytes, max_pending_events.
	registerBackend("agent", func(opts *yaml.Node, d BackendDeps) (canonical.Backend, error) {
		var c agent.BackendConfig
		if err := DecodeOptions(opts, &c); err != nil {
			return nil, err
		}
		c.Logger = d.Log.With("protocol", "agent")
		return agent.NewBackend(c)
	})
}
