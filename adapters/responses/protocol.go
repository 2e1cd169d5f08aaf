package responses

import (
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is the OpenAI Responses API as the program sees it: the
// frontend on /v1/responses (stored responses in the bridge's thread
// store), backend type "responses", refusals in OpenAI's error form.
var Protocol = protocol.Protocol{
	Name:         "responses",
	Paths:        []string{"/v1/responses"},
	Mount:        mountFrontend,
	NewBackend:   newConfiguredBackend,
	WriteRefusal: writeRefusal,
	Client:       newClient,
	Conformance:  conformanceProfile,
	Load:         loadProfile,
}

// mountFrontend mounts the frontend with the instance's thread store (the
// daemon always has one: its fabric's JetStream bucket, embedded NATS by
// default).
func mountFrontend(mux *http.ServeMux, d protocol.FrontendDeps) error {
	var cfg FrontendConfig
	if err := protocol.DecodeOptions(d.Options, &cfg); err != nil {
		return err
	}
	cfg.Runner, cfg.CheckThread, cfg.CancelThread, cfg.Observer = d.Runner, d.CheckThread, d.CancelThread, d.Observer
	cfg.Logger = d.Log.With("protocol", "responses")
	if d.Store != nil {
		cfg.Store = d.Store
	}
	f := NewFrontend(cfg)
	f.Mount(mux)
	if d.OnClose != nil {
		d.OnClose(f.Close) // background runs are cancelled and recorded
	}
	return nil
}

// newConfiguredBackend is a client of an upstream Responses server.
func newConfiguredBackend(opts *yaml.Node, d protocol.BackendDeps) (canonical.Backend, error) {
	var c BackendConfig
	if err := protocol.DecodeOptions(opts, &c); err != nil {
		return nil, err
	}
	c.Logger = d.Log.With("protocol", "responses")
	return NewBackend(c)
}

// newClient is the backend pointed at our frontend.
func newClient(c protocol.ClientConfig) (canonical.Backend, error) {
	be, err := NewBackend(BackendConfig{BaseURL: c.Base + "/v1", HTTPClient: c.HTTPClient})
	if err != nil {
		return nil, err
	}
	return be, nil
}

// writeRefusal answers a refused request in OpenAI's error form (a
// missing key as OpenAI's invalid_api_key).
func writeRefusal(w http.ResponseWriter, _ *http.Request, ref protocol.Refusal) {
	e := &apiError{status: ref.Status, msg: ref.Message}
	if ref.Code == canonical.CodeUnauthenticated {
		e.code = "invalid_api_key"
		w.Header().Set("WWW-Authenticate", `Bearer realm="interlingua"`)
	}
	e.write(w)
}
