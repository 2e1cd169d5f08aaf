package triton

import (
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is Triton (KServe v2) as the program sees it: the frontend
// under /v2/, backend type "triton", refusals as {"error": message}.
var Protocol = protocol.Protocol{
	Name:  "triton",
	Paths: []string{"/v2/"},
	Mount: func(mux *http.ServeMux, d protocol.FrontendDeps) error {
		NewFrontend(FrontendConfig{Runner: d.Runner, Logger: d.Log.With("protocol", "triton"), Ready: d.Ready}).Mount(mux)
		return nil
	},
	NewBackend: func(opts *yaml.Node, d protocol.BackendDeps) (canonical.Backend, error) {
		var c BackendConfig
		if err := protocol.DecodeOptions(opts, &c); err != nil {
			return nil, err
		}
		c.Logger = d.Log.With("protocol", "triton")
		return NewBackend(c)
	},
	WriteRefusal: func(w http.ResponseWriter, _ *http.Request, ref protocol.Refusal) {
		protocol.WriteJSONRefusal(w, ref, map[string]string{"error": ref.Message})
	},
	// The client is the backend pointed at our frontend.
	Client: func(c protocol.ClientConfig) (canonical.Backend, error) {
		be, err := NewBackend(BackendConfig{URL: c.Base, HTTPClient: c.HTTPClient})
		if err != nil {
			return nil, err
		}
		return be, nil
	},
	Conformance: conformanceProfile,
	Load:        loadProfile,
}
