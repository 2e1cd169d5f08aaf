package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/protocols"
)

// backendCanonical is the backend of the in-process canonical upstream;
// the other backends a stack serves are the protocols' reference peers,
// by the protocol's name. Each is the prefix of its targets.
const backendCanonical = "canonical"

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

	peers   map[string]*profile.Peer // by protocol
	peerSrv []*http.Server
	peerWG  sync.WaitGroup
	relays  []*relay

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
	// backendOptions are added to the options of a protocol's backends,
	// by protocol (tests: the agent backends' transport).
	backendOptions map[string]map[string]any
}

// startPeers starts the reference peer of every protocol that has one and
// configures the backends and routes reaching it: a case's target is
// pairTarget(protocol, case).
func (s *stack) startPeers(cfg *bridge.Config, opts stackOptions) error {
	s.peers = map[string]*profile.Peer{}
	for _, p := range protocols.All {
		if p.Conformance == nil || p.Conformance.NewPeer == nil {
			continue
		}
		peer, err := p.Conformance.NewPeer(opts.cases)
		if err != nil {
			return fmt.Errorf("%s peer: %w", p.Name, err)
		}
		s.peers[p.Name] = peer
		addr, err := s.servePeer(peer.Handler)
		if err != nil {
			return err
		}
		addr = s.upstreamAddr(addr)
		backend := func(name, caseName string) error {
			o := peer.Backend(addr, caseName)
			maps.Copy(o, opts.backendOptions[p.Name])
			var n yaml.Node
			if err := n.Encode(o); err != nil {
				return err
			}
			cfg.Backends[name] = bridge.BackendConfig{Type: p.Name, Options: n}
			return nil
		}
		if !peer.PerCase {
			if err := backend(p.Name, ""); err != nil {
				return err
			}
		}
		for _, c := range opts.cases {
			n, target := c.GetName(), pairTarget(p.Name, c.GetName())
			if !peer.PerCase {
				cfg.Routes = append(cfg.Routes, bridge.Route{Target: target, Backend: p.Name, Model: n})
				continue
			}
			if err := backend(target, n); err != nil {
				return err
			}
			cfg.Routes = append(cfg.Routes, bridge.Route{Target: target, Backend: target})
		}
	}
	return nil
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

	cfg := bridge.DefaultConfig()
	cfg.Backends = map[string]bridge.BackendConfig{}
	cfg.Routes = nil
	// The canonical upstream is hosted by the driver's bridge; the
	// instances know its backend by name only (a scripted stand-in, never
	// run: they host every backend but it).
	cfg.Backends[backendCanonical] = bridge.BackendConfig{Type: "scripted"}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: backendCanonical + ".*", Backend: backendCanonical, Model: "echo"})
	if err := s.startPeers(&cfg, opts); err != nil {
		return s, err
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
	s.driverBridge.AddRuntimes() // runs placed here may name a protocol's runtime
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
		s.driverBridge.Stop(time.Second, 3*time.Second)
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
	for _, p := range s.peers {
		if p.Close != nil {
			p.Close() // hanging requests and event streams: their client is gone
		}
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
