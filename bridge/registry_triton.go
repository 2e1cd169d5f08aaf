package bridge

import (
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/adapters/triton"
	"github.com/interlingua-dev/interlingua/canonical"
)

func init() {
	registerFrontend("triton", func(mux *http.ServeMux, d FrontendDeps) error {
		draining, _ := d.Runner.(interface{ Draining() bool })
		triton.NewFrontend(triton.FrontendConfig{
			Runner: d.Runner,
			Logger: d.Log.With("protocol", "triton"),
			Ready: func() bool {
				if draining != nil && draining.Draining() {
					return false
				}
				return d.Fabric == nil || d.Fabric.Ready()
			},
		}).Mount(mux)
		return nil
	})
	registerBackend("triton", func(opts *yaml.Node, d BackendDeps) (canonical.Backend, error) {
		var c triton.BackendConfig
		if err := DecodeOptions(opts, &c); err != nil {
			return nil, err
		}
		c.Logger = d.Log.With("protocol", "triton")
		return triton.NewBackend(c)
	})
}
