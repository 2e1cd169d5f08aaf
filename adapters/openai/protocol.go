package openai

import (
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is OpenAI Chat Completions as the program sees it: the
// frontend on /v1/chat/completions and /v1/models, backend type "openai"
// (any OpenAI-compatible server), refusals in OpenAI's error form.
var Protocol = protocol.Protocol{
	Name:            "openai",
	Paths:           []string{"/v1/chat/", "/v1/models"},
	Mount:           mountFrontend,
	FrontendOptions: func() any { return new(FrontendConfig) },
	NewBackend:      newConfiguredBackend,
	WriteRefusal:    writeRefusal,
	Client:          newClient,
	Conformance:     conformanceProfile,
	Load:            loadProfile,
}

// mountFrontend mounts the frontend with its frontends.openai options.
func mountFrontend(mux *http.ServeMux, d protocol.FrontendDeps) error {
	var cfg FrontendConfig
	if err := protocol.DecodeOptions(d.Options, &cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.Runner, cfg.Logger = d.Runner, d.Log.With("protocol", "openai")
	NewFrontend(cfg).Mount(mux)
	return nil
}

// newConfiguredBackend is a client of an upstream Chat Completions server.
func newConfiguredBackend(opts *yaml.Node, d protocol.BackendDeps) (canonical.Backend, error) {
	var c BackendConfig
	if err := protocol.DecodeOptions(opts, &c); err != nil {
		return nil, err
	}
	c.Logger = d.Log.With("protocol", "openai")
	return NewBackend(c)
}

// clientParameters are the scripted targets' fault-injection parameters
// (adapters/scripted), which the client sends as extra members and our
// frontend keeps as parameters, so the conformance cases' server mode can
// ask for them.
var clientParameters = []string{"delay_ms", "fail_after", "fail_code", "fail_message", "hang", "split_rune", "deltas", "delta_text"}

// newClient is the backend pointed at our frontend.
func newClient(c protocol.ClientConfig) (canonical.Backend, error) {
	be, err := NewBackend(BackendConfig{BaseURL: c.Base + "/v1", HTTPClient: c.HTTPClient, PassParameters: clientParameters})
	if err != nil {
		return nil, err
	}
	return be, nil
}

// writeRefusal answers a request the server refused before the frontend
// saw it, in OpenAI's error form with the server's status (a missing or
// wrong key as OpenAI's invalid_api_key).
func writeRefusal(w http.ResponseWriter, _ *http.Request, ref protocol.Refusal) {
	e := &apiError{status: ref.Status, msg: ref.Message, code: ref.Code.String()}
	if ref.Code == canonical.CodeUnauthenticated {
		e.code = "invalid_api_key"
	}
	e.write(w)
}
