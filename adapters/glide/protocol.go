package glide

import (
	"net/http"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is Glide as the program sees it: GET
// /v1/language/{router}/chatStream ({router} is a bridge target), backend
// type "glide", refusals as Glide's {name, message} error.
var Protocol = protocol.Protocol{
	Name:       "glide",
	Paths:      []string{"/v1/language/"},
	Mount:      mountFrontend,
	NewBackend: newConfiguredBackend,
	WriteRefusal: func(w http.ResponseWriter, _ *http.Request, ref protocol.Refusal) {
		protocol.WriteJSONRefusal(w, ref, map[string]string{"name": ref.Code.String(), "message": ref.Message})
	},
	Client:      newClient,
	Conformance: conformanceProfile,
	Load:        loadProfile,
}

// newClient is the backend pointed at our frontend's chatStream for the
// target (its router), sending cancels.
func newClient(c protocol.ClientConfig) (canonical.Backend, error) {
	u := "ws://" + strings.TrimPrefix(c.Base, "http://")
	if rest, ok := strings.CutPrefix(c.Base, "https://"); ok {
		u = "wss://" + rest
	}
	headers := map[string]string{}
	for k := range c.Headers {
		headers[k] = c.Headers.Get(k)
	}
	// One connection, as a Glide client multiplexes its requests on one
	// (the conformance suite's concurrent case checks that the frontend
	// serves them so); the backend's pool is for carrying load.
	be, err := NewBackend(BackendConfig{URL: u + "/v1/language/" + c.Target + "/chatStream", SendCancel: true, Headers: headers, Connections: 1})
	if err != nil {
		return nil, err
	}
	return be, nil
}

// mountFrontend: Shutdown closes idle connections with 1001 when the
// server's shutdown begins; busy ones close after their runs end
// (bridge.Drain cancels the rest at the shutdown timeout).
func mountFrontend(mux *http.ServeMux, d protocol.FrontendDeps) error {
	fe := NewFrontend(FrontendConfig{Runner: d.Runner, Logger: d.Log, SlowConsumers: d.Metrics.SlowConsumers.WithLabelValues("websocket")})
	fe.Mount(mux)
	if d.OnShutdown != nil {
		d.OnShutdown(fe.Shutdown)
	}
	if d.OnClose != nil {
		d.OnClose(fe.Close)
	}
	return nil
}

// newConfiguredBackend: options url (ws://host/v1/language/<router>/chatStream)
// and the limits of BackendConfig.
func newConfiguredBackend(opts *yaml.Node, d protocol.BackendDeps) (canonical.Backend, error) {
	var c BackendConfig
	if err := protocol.DecodeOptions(opts, &c); err != nil {
		return nil, err
	}
	c.Logger = d.Log
	return NewBackend(c)
}
