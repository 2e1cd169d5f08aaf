package bridge

import (
	"net/http"

	"github.com/nats-io/nats.go"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/canonical"
)

func init() {
	registerFrontend("agent", func(mux *http.ServeMux, d FrontendDeps) error {
		cfg := agent.Config{Runner: d.Runner, CheckThread: d.CheckThread, Logger: d.Log.With("protocol", "agent")}
		cfg.WebSocket.SlowConsumers = d.Metrics.SlowConsumers.WithLabelValues("websocket")
		var mirror *nats.Conn
		if d.Fabric != nil {
			cfg.Store, cfg.Alone = d.Fabric.ThreadStore(), d.Fabric.Alone()
		}
		if d.Fabric != nil && !d.Fabric.Alone() {
			// Thread events mirrored between instances travel on a
			// connection of their own that never receives what it
			// publishes: a lone instance gets none of them back. An
			// instance that can have no peers mirrors nothing: each event
			// would cost a NATS message nobody reads, and each command on
			// an idle thread two round trips asking for an owner elsewhere.
			var err error
			if mirror, err = d.Fabric.Dial("interlingua-agent", nats.NoEcho()); err != nil {
				return err
			}
			cfg.Cluster = &agent.Cluster{Conn: mirror, Prefix: d.Fabric.Prefix(),
				Heartbeat: d.Fabric.cfg.Heartbeat, OwnerTimeout: d.Fabric.cfg.OwnerTimeout}
		}
		f, err := agent.NewFrontend(cfg)
		if err != nil {
			if mirror != nil {
				mirror.Close()
			}
			return err
		}
		if d.OnClose != nil {
			d.OnClose(func() {
				f.Close()
				if mirror != nil {
					mirror.Close()
				}
			})
		}
		f.Mount(mux)
		if d.OnShutdown != nil {
			d.OnShutdown(f.Shutdown)
		}
		return nil
	})
	// Backend type "agent": a client of an upstream agent-protocol server.
	// Options: url (required), assistant_id, transport (sse | websocket),
	// headers, timeout, max_event_bytes, max_pending_events, keep_streams,
	// keep_stream_idle.
	registerBackend("agent", func(opts *yaml.Node, d BackendDeps) (canonical.Backend, error) {
		var c agent.BackendConfig
		if err := DecodeOptions(opts, &c); err != nil {
			return nil, err
		}
		c.Logger = d.Log.With("protocol", "agent")
		return agent.NewBackend(c)
	})
}
