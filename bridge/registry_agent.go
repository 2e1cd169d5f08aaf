package bridge

import (
	"net/http"

	"github.com/interlingua-dev/interlingua/adapters/agent"
)

func init() {
	registerFrontend("agent", func(mux *http.ServeMux, d FrontendDeps) error {
		cfg := agent.Config{Runner: d.Runner, Logger: d.Log.With("protocol", "agent")}
		if d.Fabric != nil {
			cfg.KV = d.Fabric.Threads()
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
}
