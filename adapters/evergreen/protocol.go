package evergreen

import (
	"net/http"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is Evergreen as the program sees it: the gRPC/Connect service
// and its WebSocket, backend type "evergreen", refusals as a gRPC status or
// Connect's JSON error.
var Protocol = protocol.Protocol{
	Name:  "evergreen",
	Paths: []string{"/evergreen.v2."},
	// gRPC, gRPC-Web and Connect streaming requests carry their framing
	// in the Content-Type, whatever the path.
	ContentTypes:    []string{"application/grpc", "application/connect+"},
	Mount:           mountFrontend,
	FrontendOptions: func() any { return new(FrontendConfig) },
	NewBackend:      newConfiguredBackend,
	WriteRefusal:    writeRefusal,
	Client:          newClient,
	Conformance:     conformanceProfile,
	Load:            loadProfile,
}

// newClient is the backend pointed at our frontend, asking for every
// output it reads back as canonical events.
func newClient(c protocol.ClientConfig) (canonical.Backend, error) {
	be, err := NewBackend(BackendConfig{URL: c.Base, HTTPClient: c.HTTPClient,
		Outputs: []string{OutputResponse, OutputReasoning, OutputToolCalls}})
	if err != nil {
		return nil, err
	}
	return be, nil
}

func mountFrontend(mux *http.ServeMux, d protocol.FrontendDeps) error {
	var c FrontendConfig
	if err := protocol.DecodeOptions(d.Options, &c); err != nil {
		return err
	}
	c.Runner, c.Logger = d.Runner, d.Log.With("protocol", "evergreen")
	c.WebSocket.SlowConsumers = d.Metrics.SlowConsumers.WithLabelValues("websocket")
	fe, err := NewFrontend(c)
	if err != nil {
		return err
	}
	fe.Mount(mux)
	if d.OnShutdown != nil {
		d.OnShutdown(fe.Shutdown)
	}
	return nil
}

func newConfiguredBackend(opts *yaml.Node, d protocol.BackendDeps) (canonical.Backend, error) {
	var c BackendConfig
	if err := protocol.DecodeOptions(opts, &c); err != nil {
		return nil, err
	}
	c.Logger = d.Log.With("protocol", "evergreen")
	return NewBackend(c)
}

// writeRefusal: a gRPC status in the headers (a trailers-only response)
// for gRPC and gRPC-Web, Connect's JSON error otherwise.
func writeRefusal(w http.ResponseWriter, r *http.Request, ref protocol.Refusal) {
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/grpc") {
		h := w.Header()
		h.Set("Content-Type", ct)
		h.Set("Grpc-Status", strconv.Itoa(int(ref.Code)))
		h.Set("Grpc-Message", ref.Message)
		w.WriteHeader(http.StatusOK)
		return
	}
	protocol.WriteJSON(w, ref.Status, map[string]string{"code": ref.Code.String(), "message": ref.Message})
}
