package xmlaction

import (
	"net/http"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is the XML action stream as the program sees it: the frontend
// POST /v1/xml/stream, refusals in the canonical error form, and the
// decoder of routes with xml: true, which read their backend's text as an
// XML action stream and execute its actions: tools through the
// allowlisted tool registry, agents as nested runs through the bridge.
var Protocol = protocol.Protocol{
	Name:  "xml",
	Paths: []string{"/v1/xml/"},
	Mount: func(mux *http.ServeMux, d protocol.FrontendDeps) error {
		NewFrontend(Config{Runner: d.Runner, Logger: d.Log}).Mount(mux)
		return nil
	},
	WrapRoute: func(be canonical.Backend, d protocol.BackendDeps) canonical.Backend {
		return Wrap(be, Config{Tools: d.Tools, Runner: d.Runner, Logger: d.Log})
	},
	WriteRefusal: protocol.WriteCanonicalRefusal,
	Client: func(c protocol.ClientConfig) (canonical.Backend, error) {
		return NewClient(c.Base, c.HTTPClient), nil
	},
	Conformance: conformanceProfile,
	Load:        loadProfile,
}
