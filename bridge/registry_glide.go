package bridge

import (
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/adapters/glide"
	"github.com/interlingua-dev/interlingua/canonical"
)

func init() {
	// GET /v1/language/{router}/chatStream: {router} is a bridge target.
	// Shutdown closes idle connections with 1001 when the server's shutdown
	// begins; busy ones close after their runs end (bridge.Drain cancels
	// the rest at the shutdown timeout).
	registerFrontend("glide", func(mux *http.ServeMux, d FrontendDeps) error {
		fe := glide.NewFrontend(glide.FrontendConfig{Runner: d.Runner, Logger: d.Log})
		fe.Mount(mux)
		if d.OnShutdown != nil {
			d.OnShutdown(fe.Shutdown)
		}
		if d.OnClose != nil {
			d.OnClose(fe.Close)
		}
		return nil
	})
	// type: glide, options: url (ws://host/v1/language/<router>/chatStream)
	// and the limits of glide.BackendConfig.
	registerBackend("glide", func(opts *yaml.Node, d BackendDeps) (canonical.Backend, error) {
		var c glide.BackendConfig
		if err := DecodeOptions(opts, &c); err != nil {
			return nil, err
		}
		c.Logger = d.Log
		return glide.NewBackend(c)
	})
}
