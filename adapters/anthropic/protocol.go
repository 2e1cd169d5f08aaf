package anthropic

import (
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is Anthropic's Messages API as the program sees it: the
// frontend at /v1/messages, backend type "anthropic", refusals as
// {"type":"error","error":{"type","message"}}.
var Protocol = protocol.Protocol{
	Name:  "anthropic",
	Paths: []string{"/v1/messages"},
	Mount: func(mux *http.ServeMux, d protocol.FrontendDeps) error {
		NewFrontend(FrontendConfig{Runner: d.Runner, Logger: d.Log.With("protocol", "anthropic")}).Mount(mux)
		return nil
	},
	NewBackend: func(opts *yaml.Node, d protocol.BackendDeps) (canonical.Backend, error) {
		var c BackendConfig
		if err := protocol.DecodeOptions(opts, &c); err != nil {
			return nil, err
		}
		c.Logger = d.Log.With("protocol", "anthropic")
		return NewBackend(c)
	},
	WriteRefusal: writeRefusal,
	// The client is the backend pointed at our frontend.
	Client: func(c protocol.ClientConfig) (canonical.Backend, error) {
		return NewBackend(BackendConfig{BaseURL: c.Base, HTTPClient: c.HTTPClient})
	},
	Conformance: conformanceProfile,
	Load:        loadProfile,
}

// writeRefusal answers a request the server refused before the frontend
// saw it, in Anthropic's error form with the server's status.
func writeRefusal(w http.ResponseWriter, _ *http.Request, ref protocol.Refusal) {
	t, _ := errorTypeOf(ref.Code)
	if ref.Status == http.StatusUnsupportedMediaType {
		t = errInvalidRequest
	}
	if ref.Code == canonical.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="interlingua"`)
	}
	writeError(w, ref.Status, t, ref.Message, newRequestID())
}
