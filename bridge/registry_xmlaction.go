package bridge

import (
	"net/http"

	"github.com/interlingua-dev/interlingua/adapters/xmlaction"
	"github.com/interlingua-dev/interlingua/canonical"
)

func init() {
	registerFrontend("xml", func(mux *http.ServeMux, d FrontendDeps) error {
		xmlaction.NewFrontend(xmlaction.Config{Runner: d.Runner, Logger: d.Log}).Mount(mux)
		return nil
	})
	// Routes with xml: true decode their backend's text as an XML action
	// stream and execute its actions: tools through the allowlisted tool
	// registry, agents as nested runs through the bridge.
	xmlDecoder = func(be canonical.Backend, d BackendDeps) canonical.Backend {
		return xmlaction.Wrap(be, xmlaction.Config{Tools: d.Tools, Runner: d.Runner, Logger: d.Log})
	}
}
