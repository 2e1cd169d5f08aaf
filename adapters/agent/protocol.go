package agent

import (
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is the agent protocol as the program sees it: the frontend on
// /threads/, backend type "agent", refusals as the protocol's error frame.
var Protocol = protocol.Protocol{
	Name:       "agent",
	Paths:      []string{"/threads/"},
	Mount:      mountFrontend,
	NewBackend: newConfiguredBackend,
	NewRuntime: func(d protocol.RuntimeDeps) canonical.Runtime {
		return NewRuntime(d.Store, d.Log, RuntimeConfig{})
	},
	WriteRefusal: writeRefusal,
	Client:       newClient,
	Conformance:  conformanceProfile,
	Load:         loadProfile,
}

// newClient is the backend pointed at our frontend, the target as its
// assistant.
func newClient(c protocol.ClientConfig) (canonical.Backend, error) {
	be, err := NewBackend(BackendConfig{URL: c.Base, AssistantID: c.Target, HTTPClient: c.HTTPClient})
	if err != nil {
		return nil, err
	}
	return be, nil
}

func mountFrontend(mux *http.ServeMux, d protocol.FrontendDeps) error {
	if d.Store == nil || d.Observer == nil {
		return canonical.Errorf(canonical.CodeFailedPrecondition, "agent: the frontend needs the bridge's thread store and replay log")
	}
	cfg := Config{Runner: d.Runner, Observer: d.Observer, Store: d.Store, CheckThread: d.CheckThread, CancelRun: d.CancelRun,
		Logger: d.Log.With("protocol", "agent")}
	cfg.WebSocket.SlowConsumers = d.Metrics.SlowConsumers.WithLabelValues("websocket")
	cfg.SlowSSE = d.Metrics.SlowConsumers.WithLabelValues("http")
	f, err := NewFrontend(cfg)
	if err != nil {
		return err
	}
	if d.OnClose != nil {
		d.OnClose(f.Close)
	}
	f.Mount(mux)
	if d.OnShutdown != nil {
		d.OnShutdown(f.Shutdown)
	}
	return nil
}

// newConfiguredBackend: a client of an upstream agent-protocol server.
// Options: url (required), assistant_id, transport (sse | websocket),
// headers, timeout, max_event_bytes, max_pending_events, keep_streams,
// keep_stream_idle.
func newConfiguredBackend(opts *yaml.Node, d protocol.BackendDeps) (canonical.Backend, error) {
	var c BackendConfig
	if err := protocol.DecodeOptions(opts, &c); err != nil {
		return nil, err
	}
	c.Logger = d.Log.With("protocol", "agent")
	return NewBackend(c)
}

// writeRefusal writes the protocol's error frame; its ErrorCode has no
// unauthenticated, so a missing key reads as permission_denied.
func writeRefusal(w http.ResponseWriter, _ *http.Request, ref protocol.Refusal) {
	name := ref.Code.String()
	if ref.Code == canonical.CodeUnauthenticated {
		name = canonical.CodePermissionDenied.String()
	}
	protocol.WriteJSONRefusal(w, ref, map[string]any{"type": "error", "id": nil, "error": name, "message": ref.Message})
}
