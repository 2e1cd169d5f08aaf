package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	agentpeer "github.com/interlingua-dev/interlingua/conformance/peers/agent"
	evergreenpeer "github.com/interlingua-dev/interlingua/conformance/peers/evergreen"
	glidepeer "github.com/interlingua-dev/interlingua/conformance/peers/glide"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
)

// The backend protocols a stack serves, by the prefix of their targets.
const (
	backendCanonical = "canonical"
	backendTriton    = "triton"
	backendGlide     = "glide"
	backendEvergreen = "evergreen"
	backendAgent     = "agent"
)

// pairTarget is the target that routes case c to backend protocol be.
func pairTarget(be, c string) string { return be + "." + c }

// caseState is what one case's upstream reports while the suite runs.
type caseState struct {
	cancelled chan struct{} // a canonical run was cancelled (buffered)
	mu        sync.Mutex
	trace     *trace // the running case's trace, nil when not tracing
}

func newCaseState() *caseState {
	return &caseState{cancelled: make(chan struct{}, 64)}
}

func (s *caseState) currentTrace() *trace {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trace
}

func (s *caseState) setTrace(t *trace) {
	s.mu.Lock()
	s.trace = t
	s.mu.Unlock()
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// stack is the system under test of bridge and cluster modes: one or two
// Interlingua instances, the in-process canonical upstream on its own
// bridge (reached over NATS, like any backend another instance hosts),
// the reference peers, and relays.
type stack struct {
	log      *slog.Logger
	dir      string
	cancel   context.CancelFunc
	servers  []*bridge.Server
	serveErr []chan error
	// client is the instance clients talk to; it hosts no backend in
	// cluster mode.
	client *bridge.Server

	nats         *server.Server // cluster mode's NATS server
	driverFabric *bridge.Fabric // cluster mode: the driver's own connection
	driverBridge *bridge.Bridge

	tritonPeer    *tritonpeer.Server
	glidePeer     *glidepeer.Peer
	evergreenPeer *evergreenpeer.Peer
	agentPeer     *agentpeer.Peer
	peerSrv       []*http.Server
	peerWG        sync.WaitGroup
	relays        []*relay

	states  map[string]*caseState // by case name
	byName  map[string]*cases.Case
	traceOn bool
}

// stackOptions configure a stack.
type stackOptions struct {
	cluster bool
	natsURL string // cluster mode: an external NATS server; empty starts one
	cases   []*cases.Case
	trace   bool
	log     *slog.Logger
	// agentTransport is the agent backends' transport: sse (default) or
	// websocket.
	agentTransport string
}

// startStack starts everything; close stops it.
func startStack(opts stackOptions) (st *stack, err error) {
	dir, err := os.MkdirTemp("", "interlingua-conformance-")
	if err != nil {
		return nil, err
	}
	s := &stack{log: opts.log, dir: dir, states: map[string]*caseState{}, byName: map[string]*cases.Case{}, traceOn: opts.trace}
	defer func() {
		if err != nil {
			s.close()
			st = nil
		}
	}()
	for _, c := range opts.cases {
		s.states[c.GetName()] = newCaseState()
		s.byName[c.GetName()] = c
	}

	// Reference peers, one script per case.
	var models []tritonpeer.Model
	routers := map[string]glidepeer.Router{}
	for _, c := range opts.cases {
		r, prompt := c.GetResponse(), c.GetRequest().GetPrompt()
		models = append(models, driver.TritonModel(c.GetName(), r, prompt))
		latch := "hang-" + c.GetName()
		routers[c.GetName()] = driver.GlideRouter(latch, r, prompt)
	}
	s.tritonPeer = tritonpeer.New(models...)
	s.glidePeer = glidepeer.New(glidepeer.Config{Routers: routers})
	tritonAddr, err := s.servePeer(s.tritonPeer)
	if err != nil {
		return s, err
	}
	glideAddr, err := s.servePeer(s.glidePeer)
	if err != nil {
		return s, err
	}
	evergreenScripts := map[string]evergreenpeer.Script{}
	for _, c := range opts.cases {
		evergreenScripts[c.GetName()] = driver.EvergreenScript(c.GetResponse(), c.GetRequest().GetPrompt())
	}
	s.evergreenPeer = evergreenpeer.New(evergreenScripts)
	path, h := s.evergreenPeer.Handler()
	mux := http.NewServeMux()
	mux.Handle(path, h)
	evergreenAddr, err := s.servePeer(mux)
	if err != nil {
		return s, err
	}
	agentScripts := map[string]agentpeer.Script{}
	for _, c := range opts.cases {
		agentScripts[c.GetName()] = driver.AgentScript(c.GetResponse(), c.GetRequest().GetPrompt())
	}
	if s.agentPeer, err = agentpeer.NewWithConfig(agentpeer.Config{Scripts: agentScripts}); err != nil {
		return s, err
	}
	agentAddr, err := s.servePeer(s.agentPeer.Handler())
	if err != nil {
		return s, err
	}
	agentURL := "http://" + s.upstreamAddr(agentAddr)
	agentTransport := opts.agentTransport
	if agentTransport == "" {
		agentTransport = "sse"
	}

	cfg := bridge.DefaultConfig()
	cfg.Backends = map[string]bridge.BackendConfig{}
	cfg.Routes = nil
	addBackend := func(name, typ string, options map[string]any) error {
		var n yaml.Node
		if options != nil {
			if err := n.Encode(options); err != nil {
				return err
			}
		}
		cfg.Backends[name] = bridge.BackendConfig{Type: typ, Options: n}
		return nil
	}
	// The canonical upstream is hosted by the driver's bridge; the
	// instances know its backend by name only (a scripted stand-in, never
	// run: they host every backend but it).
	if err := addBackend(backendCanonical, "scripted", nil); err != nil {
		return s, err
	}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: backendCanonical + ".*", Backend: backendCanonical, Model: "echo"})
	if err := addBackend(backendTriton, "triton", map[string]any{"url": "http://" + s.upstreamAddr(tritonAddr)}); err != nil {
		return s, err
	}
	if err := addBackend(backendEvergreen, "evergreen", map[string]any{"url": "http://" + s.upstreamAddr(evergreenAddr),
		"outputs": []string{"response", "reasoning", "tool_calls"}}); err != nil {
		return s, err
	}
	for _, c := range opts.cases {
		n := c.GetName()
		cfg.Routes = append(cfg.Routes,
			bridge.Route{Target: pairTarget(backendTriton, n), Backend: backendTriton, Model: n},
			bridge.Route{Target: pairTarget(backendEvergreen, n), Backend: backendEvergreen, Model: n},
			bridge.Route{Target: pairTarget(backendGlide, n), Backend: pairTarget(backendGlide, n)},
			bridge.Route{Target: pairTarget(backendAgent, n), Backend: pairTarget(backendAgent, n)},
		)
		url := "ws://" + s.upstreamAddr(glideAddr) + "/v1/language/" + n + "/chatStream"
		if err := addBackend(pairTarget(backendGlide, n), "glide", map[string]any{"url": url}); err != nil {
			return s, err
		}
		// The case is the upstream's assistant; every run is a thread of
		// its own (the bridge's thread id).
		if err := addBackend(pairTarget(backendAgent, n), "agent",
			map[string]any{"url": agentURL, "assistant_id": n, "transport": agentTransport}); err != nil {
			return s, err
		}
	}
	var hosted []string
	for name := range cfg.Backends {
		if name != backendCanonical {
			hosted = append(hosted, name)
		}
	}
	sort.Strings(hosted)
	cfg.Listen = "127.0.0.1:0"
	cfg.ShutdownTimeout = 2 * time.Second
	// Owners are never killed here: a generous owner timeout keeps a
	// loaded machine's late heartbeats from failing runs.
	cfg.NATS.OwnerTimeout = 30 * time.Second

	if opts.cluster {
		url := opts.natsURL
		if url == "" {
			if s.nats, err = startNATS(filepath.Join(dir, "nats")); err != nil {
				return s, err
			}
			url = s.nats.ClientURL()
		}
		cfg.NATS.URL = url
		b := cfg
		b.HostBackends = hosted
		b.DataDir = filepath.Join(dir, "b")
		if err := s.startServer(b); err != nil {
			return s, err
		}
		a := cfg
		a.HostBackends = []string{"none"}
		a.DataDir = filepath.Join(dir, "a")
		if err := s.startServer(a); err != nil {
			return s, err
		}
		s.client = s.servers[1]
		if s.driverFabric, err = bridge.StartFabric(context.Background(), natsDefaults(cfg.NATS), filepath.Join(dir, "driver"), s.log); err != nil {
			return s, err
		}
		return s, s.startDriver(s.driverFabric, natsDefaults(cfg.NATS))
	}
	cfg.HostBackends = hosted
	cfg.DataDir = filepath.Join(dir, "a")
	if err := s.startServer(cfg); err != nil {
		return s, err
	}
	s.client = s.servers[0]
	return s, s.startDriver(s.client.Fabric(), natsDefaults(cfg.NATS))
}

func natsDefaults(n bridge.NATSConfig) bridge.NATSConfig {
	c := bridge.Config{NATS: n}
	c.Defaults()
	return c.NATS
}

// upstreamAddr returns addr, or a relay in front of it when tracing.
func (s *stack) upstreamAddr(addr string) string {
	if !s.traceOn {
		return addr
	}
	r, err := s.newRelay(addr, "upstream")
	if err != nil {
		return addr
	}
	return r.addr()
}

// newRelay starts a relay the stack owns; its recorder writes to the
// trace of whichever case is running (tracing runs one case at a time).
func (s *stack) newRelay(target, side string) (*relay, error) {
	var rec *recorder
	if s.traceOn {
		rec = &recorder{side: side, current: s.currentTrace}
	}
	r, err := newRelay(target, rec, throttle{})
	if err != nil {
		return nil, err
	}
	s.relays = append(s.relays, r)
	return r, nil
}

// currentTrace is the trace of the case being traced.
func (s *stack) currentTrace() *trace {
	for _, st := range s.states {
		if t := st.currentTrace(); t != nil {
			return t
		}
	}
	return nil
}

func (s *stack) servePeer(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true) // gRPC (the Evergreen peer)
	s.peerSrv = append(s.peerSrv, srv)
	s.peerWG.Add(1)
	go func() {
		defer s.peerWG.Done()
		_ = srv.Serve(ln)
	}()
	return ln.Addr().String(), nil
}

func (s *stack) startServer(cfg bridge.Config) error {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := bridge.NewServer(ctx, cfg, s.log)
	if err != nil {
		cancel()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	prev := s.cancel
	s.cancel = func() {
		cancel()
		if prev != nil {
			prev()
		}
	}
	s.servers = append(s.servers, srv)
	s.serveErr = append(s.serveErr, done)
	return waitReady("http://" + srv.Addr())
}

// startDriver hosts the canonical upstream on a bridge of its own, joined
// to the fabric: runs routed to it are placed on it over NATS.
func (s *stack) startDriver(f *bridge.Fabric, nc bridge.NATSConfig) error {
	be := &driver.Backend{Lookup: s.script}
	router := bridge.NewRouter([]bridge.Route{{Target: backendCanonical + ".*", Backend: backendCanonical}},
		map[string]canonical.Backend{backendCanonical: be}, nil)
	s.driverBridge = bridge.NewBridge(router, f, s.log)
	return s.driverBridge.StartCluster([]string{backendCanonical}, nc)
}

// script returns the canonical upstream's script for a target.
func (s *stack) script(target string) (*driver.Script, bool) {
	name, ok := strings.CutPrefix(target, backendCanonical+".")
	if !ok {
		return nil, false
	}
	st := s.states[name]
	c := s.caseByName(name)
	if st == nil || c == nil {
		return nil, false
	}
	return &driver.Script{
		Response:  c.GetResponse(),
		Cancelled: func() { signal(st.cancelled) },
		Emitted: func(ev *canonical.Event) {
			st.currentTrace().event("upstream", ev)
		},
	}, true
}

func (s *stack) caseByName(name string) *cases.Case { return s.byName[name] }

func waitReady(base string) error {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond) // polling readiness of a server we started
	}
	return fmt.Errorf("%s/readyz not 200 within 15s", base)
}

func startNATS(dir string) (*server.Server, error) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: dir, NoLog: true, NoSigs: true, ServerName: "conformance",
		// As README's cluster section asks of a deployment (the embedded
		// server's): an agent state snapshot can exceed NATS's 1 MiB default.
		MaxPayload: 8 << 20})
	if err != nil {
		return nil, err
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("nats-server not ready within 10s")
	}
	return ns, nil
}

// close stops everything and waits for it.
func (s *stack) close() {
	if s.driverBridge != nil {
		// Runs a frontend failed to cancel would hang forever: cancel
		// what is left, then stop.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.driverBridge.Drain(ctx, 3*time.Second)
		cancel()
		s.driverBridge.StopCluster()
	}
	if s.cancel != nil {
		s.cancel()
	}
	for i := len(s.serveErr) - 1; i >= 0; i-- {
		if err := <-s.serveErr[i]; err != nil {
			s.log.Warn("instance stopped with an error", "err", err)
		}
	}
	if s.driverFabric != nil {
		s.driverFabric.Close()
	}
	if s.glidePeer != nil {
		s.glidePeer.Close() // ends hanging requests: their client is gone
	}
	if s.agentPeer != nil {
		s.agentPeer.Close() // ends its runs and event streams
	}
	for _, srv := range s.peerSrv {
		_ = srv.Close()
	}
	s.peerWG.Wait()
	for _, r := range s.relays {
		r.close()
	}
	if s.nats != nil {
		s.nats.Shutdown()
		s.nats.WaitForShutdown()
	}
	_ = os.RemoveAll(s.dir)
}
