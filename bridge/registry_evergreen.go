package bridge

import (
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/adapters/evergreen"
	"github.com/interlingua-dev/interlingua/canonical"
)

func init() {
	registerFrontend("evergreen", func(mux *http.ServeMux, d FrontendDeps) error {
		var c evergreen.FrontendConfig
		if err := DecodeOptions(d.Options, &c); err != nil {
			return err
		}
		c.Runner, c.Logger = d.Runner, d.Log.With("protocol", "evergreen")
		c.WebSocket.SlowConsumers = d.Metrics.SlowConsumers.WithLabelValues("websocket")
		fe, err := evergreen.NewFrontend(c)
		if err != nil {
			return err
		}
		fe.Mount(mux)
		if d.OnShutdown != nil {
			d.OnShutdown(fe.Shutdown)
		}
		return nil
	})
	registerBackend("evergreen", func(opts *yaml.Node, d BackendDeps) (canonical.Backend, error) {
		var c evergreen.BackendConfig
		if err := DecodeOptions(opts, &c); err != nil {
			return nil, err
		}
		c.Logger = d.Log.With("protocol", "evergreen")
		return evergreen.NewBackend(c)
	})
}
