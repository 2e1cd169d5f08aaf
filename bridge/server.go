package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/metrics"
	"github.com/interlingua-dev/interlingua/internal/tracing"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// cancelGrace is how long cancelled runs get to deliver their cancelled
// event after the shutdown timeout.
const cancelGrace = 5 * time.Second

// Server is one Interlingua instance: the fabric, the bridge, and one HTTP
// listener (HTTP/1.1 and h2c) with every frontend mounted on it.
type Server struct {
	cfg    Config
	log    *slog.Logger
	fabric *Fabric
	bridge *Bridge
	tools  *ToolRegistry
	http   *http.Server
	ln     net.Listener

	backends map[string]canonical.Backend
	closers  []func()
	certs    *certReloader // nil: plaintext (h2c)
}

// serverMetrics adds the server's gauges, read at scrape time from the
// fabric and the bridge, to the bridge's metrics and returns them: one
// registry per server, so a second server in the process reports its own.
func (s *Server) serverMetrics() *metrics.Metrics {
	m, fabric := s.bridge.metrics, s.fabric
	m.GaugeFunc("interlingua_nats_connected", "1 while the NATS connection is up.", func() float64 {
		if fabric.Ready() {
			return 1
		}
		return 0
	})
	m.GaugeFunc("interlingua_nats_published_messages", "Messages handed to NATS.", func() float64 { return float64(fabric.Published()) })
	m.CounterFunc("interlingua_nats_published_bytes_total", "Bytes of events published to NATS.", func() float64 { return float64(fabric.PublishedBytes()) })
	m.GaugeFunc("interlingua_nats_dropped_events", "Events that could not be published (queue or reconnect buffer full).", func() float64 { return float64(fabric.Dropped()) })
	m.GaugeFunc("interlingua_runs_in_flight", "Local runs in flight.", func() float64 { return float64(s.bridge.Running()) })
	return m
}

// lazyRunner lets backends built before the bridge (the XML executor's
// nested runs) call it once it exists.
type lazyRunner struct{ canonical.Runner }

// NewServer starts the fabric, builds backends and frontends and binds the
// listener. cfg must have had Defaults applied and be valid.
func NewServer(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	auth, err := newAuthenticator(cfg.Auth)
	if err != nil {
		return nil, err
	}
	switch {
	case auth != nil:
		log.Info("auth on", "keys", len(cfg.Auth.Keys))
	case isLoopback(cfg.Listen):
		log.Warn("auth off: no API keys configured; accepted only because the listener is loopback", "listen", cfg.Listen)
	default:
		return nil, fmt.Errorf("auth is off but listen %s is not loopback: configure auth.keys or --api-key", cfg.Listen)
	}
	certs, err := newCertReloader(cfg.TLS)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	fabric, err := StartFabric(ctx, cfg.NATS, cfg.DataDir, log)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, fabric: fabric, certs: certs}
	s.tools = NewToolRegistry(cfg.Tools, fabric.Conn(), cfg.NATS.SubjectPrefix, log)
	s.tools.warnUnserved(fabric.Alone(), 300*time.Millisecond)
	lazy := &lazyRunner{}
	backendDeps := protocol.BackendDeps{Log: log, Tools: s.tools, Runner: lazy}
	backends, err := buildBackends(cfg, backendDeps)
	if err != nil {
		fabric.Close()
		return nil, err
	}
	s.bridge = NewBridge(NewRouter(cfg.Routes, backends, routeWrapper(backendDeps)), fabric, log)
	lazy.Runner = s.bridge
	s.bridge.AddRuntimes()
	if err := s.bridge.StartCluster(cfg.HostBackends, cfg.NATS); err != nil {
		fabric.Close()
		return nil, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.HandleFunc("GET /v1/targets", s.serveTargets)
	mux.Handle("GET /metrics", s.serverMetrics().Handler())
	handler := s.inspectorHandler(cfg, mux, auth, log)
	handler = newOriginPolicy(cfg.Listen, cfg.AllowedOrigins).middleware(handler)
	handler = writeDeadline(handler, cfg.WriteTimeout, s.bridge.metrics.SlowConsumers.WithLabelValues("http"))
	handler = tracing.Middleware(bodyTimeout(handler, cfg.BodyTimeout))
	var httpVersions http.Protocols
	httpVersions.SetHTTP1(true)
	httpVersions.SetHTTP2(true)
	httpVersions.SetUnencryptedHTTP2(true)
	s.http = &http.Server{
		Handler:           handler,
		Protocols:         &httpVersions,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute, // keep-alive connections with no request
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if certs != nil {
		s.http.TLSConfig = certs.config()
	}
	s.http.RegisterOnShutdown(s.bridge.inspect.Close) // the inspector's live streams end (nil-safe)
	s.backends = backends
	deps := protocol.FrontendDeps{Log: log, Metrics: s.bridge.metrics, Runner: s.bridge, Observer: s.bridge, CheckThread: s.bridge.CheckThread, CancelThread: s.bridge.CancelThread, CancelRun: s.bridge.CancelRun, Tools: s.tools,
		Store: fabric.ThreadStore(), Ready: func() bool { return !s.bridge.Draining() && fabric.Ready() },
		OnShutdown: s.http.RegisterOnShutdown, OnClose: func(f func()) { s.closers = append(s.closers, f) }}
	for _, p := range protocols.All {
		if p.Mount == nil {
			continue
		}
		d := deps
		d.Runner = frontendRunner{Bridge: s.bridge, name: p.Name}
		if n, ok := cfg.Frontends[p.Name]; ok {
			d.Options = &n
		}
		if err := p.Mount(mux, d); err != nil {
			s.bridge.StopCluster()
			fabric.Close()
			return nil, fmt.Errorf("frontends.%s: %w", p.Name, err)
		}
	}
	s.ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		s.bridge.StopCluster()
		fabric.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return s, nil
}

// ReloadTLS reads the listener's certificate files again (SIGHUP); the old
// certificate stays if they do not load.
func (s *Server) ReloadTLS() error {
	if s.certs == nil {
		return nil
	}
	if err := s.certs.Reload(); err != nil {
		return err
	}
	s.log.Info("tls certificate reloaded", "cert_file", s.cfg.TLS.CertFile)
	return nil
}

// Addr is the bound listener address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Bridge returns the instance's bridge (its canonical.Runner).
func (s *Server) Bridge() *Bridge { return s.bridge }

// Fabric returns the instance's NATS fabric.
func (s *Server) Fabric() *Fabric { return s.fabric }

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	switch {
	case s.bridge.Draining():
		http.Error(w, "draining", http.StatusServiceUnavailable)
	case !s.fabric.Ready():
		http.Error(w, "nats not connected", http.StatusServiceUnavailable)
	default:
		_, _ = w.Write([]byte("ready\n"))
	}
}

// startupFacts are what the "serving" line tells an operator: where it
// listens, the frontends and their paths, the routes, and which NATS.
func (s *Server) startupFacts() []any {
	var fronts []string
	for _, p := range protocols.All {
		if p.Mount != nil {
			fronts = append(fronts, p.Name+" "+strings.Join(p.Paths, ","))
		}
	}
	var routes []string
	for _, rt := range s.cfg.Routes {
		routes = append(routes, rt.Target+"->"+rt.Backend)
	}
	natsMode := "external " + redact(s.cfg.NATS.URL)
	switch {
	case s.fabric.Alone():
		natsMode = "embedded, in process only (no other instance can join)"
	case s.cfg.NATS.URL == "":
		natsMode = "embedded, listening on " + s.fabric.EmbeddedURL()
	}
	return []any{"listen", s.Addr(), "frontends", strings.Join(fronts, "; "), "routes", strings.Join(routes, " "),
		"nats", natsMode, "data_dir", s.cfg.DataDir}
}

// targetList is GET /v1/targets' body.
type targetList struct {
	Targets []targetEntry `json:"targets"`
}

type targetEntry struct {
	Name    string `json:"name"`
	Backend string `json:"backend"`
	Type    string `json:"type"` // the backend's adapter: triton, agent, scripted...
}

// serveTargets lists the targets a client may name (exact routes; glob
// routes take names no list can hold), with their backend and its type,
// as far as the caller's API key may use them.
func (s *Server) serveTargets(w http.ResponseWriter, r *http.Request) {
	p := canonical.PrincipalFrom(r.Context())
	list := targetList{Targets: []targetEntry{}}
	for _, t := range s.bridge.Targets() {
		if p.Allows(t.Name) {
			list.Targets = append(list.Targets, targetEntry{Name: t.Name, Backend: t.Backend, Type: s.cfg.Backends[t.Backend].Type})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.MarshalWrite(w, list)
}

// Serve serves until ctx is done, then shuts down gracefully: it stops
// accepting, lets running runs finish up to ShutdownTimeout, cancels the
// rest (each ends with a cancelled event), waits for handlers, closes the
// fabric, and returns nil.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		if s.certs != nil {
			errc <- s.http.ServeTLS(s.ln, "", "")
			return
		}
		errc <- s.http.Serve(s.ln)
	}()
	s.log.Info("serving", s.startupFacts()...)
	select {
	case err := <-errc:
		s.bridge.StopCluster()
		s.fabric.Close()
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	drainCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- s.http.Shutdown(drainCtx) }()
	s.bridge.StopAccepting()
	s.bridge.Drain(drainCtx, cancelGrace)
	// Runs are over; handlers finish writing their last events.
	graceCtx, cancel2 := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel2()
	if err := <-shutdownErr; errors.Is(err, context.DeadlineExceeded) {
		if err := s.http.Shutdown(graceCtx); err != nil {
			s.log.Warn("connections still open at exit", "err", err)
		}
	}
	_ = s.http.Close()
	<-errc
	s.closeFrontendsAndBackends(cancelGrace)
	s.bridge.StopCluster()
	s.fabric.Close()
	s.log.Info("stopped")
	return nil
}

// closeFrontendsAndBackends runs the frontends' close hooks (they flush
// and close hijacked connections), waiting up to grace, then closes the
// backends that hold connections of their own.
func (s *Server) closeFrontendsAndBackends(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for _, f := range s.closers {
			wg.Go(f)
		}
		wg.Wait()
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("frontends still closing after grace", "grace", grace)
	}
	// Route wrappers (the XML executor) first: they sit in front of the
	// backends and may still be finishing fire-and-forget actions.
	for _, be := range s.bridge.router.wrappers(s.backends) {
		if c, ok := be.(io.Closer); ok {
			if err := c.Close(); err != nil {
				s.log.Warn("closing route wrapper", "err", err)
			}
		}
	}
	for name, be := range s.backends {
		if c, ok := be.(io.Closer); ok {
			if err := c.Close(); err != nil {
				s.log.Warn("closing backend", "backend", name, "err", err)
			}
		}
	}
}

// NewLogger builds the daemon's logger from its config.
func NewLogger(cfg LogConfig, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
