package native

import (
	"net/http"

	"github.com/interlingua-dev/interlingua/canonical"
	nativeclient "github.com/interlingua-dev/interlingua/conformance/clients/native"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is the native protocol as the program sees it: the canonical
// events over HTTP under /v1/, refusals in the canonical error form. It
// has no backend: a backend speaking it would be a bridge of our own,
// which the fabric reaches over NATS.
var Protocol = protocol.Protocol{
	Name:  "native",
	Paths: []string{"/v1/"},
	Mount: func(mux *http.ServeMux, d protocol.FrontendDeps) error {
		NewFrontend(Config{Runner: d.Runner, Observer: d.Observer, Logger: d.Log}).Mount(mux)
		return nil
	},
	WriteRefusal: protocol.WriteCanonicalRefusal,
	Client: func(c protocol.ClientConfig) (canonical.Backend, error) {
		return nativeclient.New(c.Base, c.HTTPClient), nil
	},
	Conformance: conformanceProfile,
	Load:        loadProfile,
}
