package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// Options configure one pair's measurement. Zero values take the defaults
// noted.
type Options struct {
	// Frontend and Backend are protocol names (see Frontends, Backends).
	Frontend, Backend string
	// Streams is the number of concurrent streams. Default 1.
	Streams int
	// Deltas is the number of text deltas per stream. Default 1000.
	Deltas int
	// Rate paces the load at this many deltas per second across all
	// streams (each stream one delta every Streams/Rate seconds); 0 sends
	// as fast as the path allows.
	Rate float64
	// Spread, with Rate, starts the streams evenly over this time rather
	// than 1/Rate apart (100 streams at 10,000 deltas/s start within 10 ms:
	// each start then waits behind the others').
	Spread time.Duration
	// Rounds is the number of measured rounds per mode, alternating direct
	// and bridged. Default 3.
	Rounds int
	// Warmup is the number of unmeasured rounds per mode first
	// (connections, caches). Default 1; negative for none.
	Warmup int
	// DeltaText is each delta's text. Default "tok ".
	DeltaText string
	// Timeout bounds one round. Default 10m.
	Timeout time.Duration
	// Procs sets GOMAXPROCS for the run (0 leaves it).
	Procs int
	// CPUProfile, when set, receives a CPU profile of a bridged round run
	// after the measured ones and left out of the figures; MemProfile an
	// allocation profile of the whole run. Trace, when set, receives an
	// execution trace (runtime/trace) of that same extra round: where a
	// delta waited, not only where CPU went.
	CPUProfile, MemProfile, Trace string
	// Log receives the in-process bridge's records. Default discards.
	Log *slog.Logger
	// External runs the bridge as a child `interlingua serve` process
	// (configured with the pair's backend and routes) instead of in this
	// process, so its CPU, RSS and GC are the server's alone; the clients,
	// the peer and the no-op proxy stay here. Fabric experiments do not
	// apply. ServerProcs sets its GOMAXPROCS (0 leaves the default);
	// Binary is the executable (default this process's).
	External    bool
	ServerProcs int
	Binary      string
	// Fabric is an experiment on the instance's replay log
	// (FabricAsyncPersist, FabricSyncPersist, FabricNoReplay); empty
	// measures it as configured.
	Fabric string
	// Proxy adds a third path where there is a direct one: the same load
	// through a reverse proxy that translates nothing (see noopProxy), in
	// the same alternation, so the report can tell what any hop costs
	// here from what the instance adds to it.
	Proxy bool
}

func (o *Options) defaults() {
	o.Streams = max(o.Streams, 1)
	if o.Deltas <= 0 {
		o.Deltas = 1000
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if o.Warmup == 0 {
		o.Warmup = 1
	}
	if o.DeltaText == "" {
		o.DeltaText = "tok "
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Side is one path's figures, over all its measured rounds.
type Side struct {
	DeltasPerSec float64 `json:"deltas_per_sec"`
	TTFDP50us    float64 `json:"ttfd_p50_us"`
	TTFDP99us    float64 `json:"ttfd_p99_us"`
	DeltaP50us   float64 `json:"delta_p50_us"`
	DeltaP99us   float64 `json:"delta_p99_us"`
	// RSSBytes is the peak VmRSS sampled during the rounds.
	RSSBytes int64 `json:"rss_bytes"`
	// RSSPerStreamBytes is the peak above the round's starting RSS, per
	// concurrent stream.
	RSSPerStreamBytes int64   `json:"rss_per_stream_bytes"`
	CPUSecPerMDelta   float64 `json:"cpu_sec_per_mdelta"`
	AllocsPerDelta    float64 `json:"allocs_per_delta"`
	BytesPerDelta     float64 `json:"bytes_per_delta"`
	Deltas            int64   `json:"deltas_received"`
	Seconds           float64 `json:"seconds"`
	Errors            int     `json:"errors"`
	FirstError        string  `json:"first_error,omitempty"`
}

// Result is one pair's measurement.
type Result struct {
	Pair    string  `json:"pair"`
	Streams int     `json:"streams"`
	Deltas  int     `json:"deltas"`
	Rate    float64 `json:"rate"`
	// SpreadMS is the time the stream starts were spread over (Spread).
	SpreadMS float64 `json:"spread_ms,omitempty"`
	Rounds   int     `json:"rounds"`
	Procs    int     `json:"procs"`
	// LatencyFrom says what delta latency is measured from: "upstream"
	// (the peer's send stamp) or "previous-delta" (scripted: the interval
	// between deltas at the client).
	LatencyFrom string `json:"latency_from"`
	Direct      *Side  `json:"direct"`
	Bridged     *Side  `json:"bridged"`
	// Proxy is the no-op reverse proxy's path (Options.Proxy), and the
	// Proxy… figures compare it with direct as the Added… ones compare
	// bridged.
	Proxy                  *Side    `json:"proxy,omitempty"`
	ProxyThroughputRatio   *float64 `json:"proxy_throughput_ratio,omitempty"`
	ProxyAddedDeltaP50us   *float64 `json:"proxy_added_delta_p50_us,omitempty"`
	ProxyAddedDeltaP99us   *float64 `json:"proxy_added_delta_p99_us,omitempty"`
	ProxyAddedTTFDP99us    *float64 `json:"proxy_added_ttfd_p99_us,omitempty"`
	ProxyAddedCPUPerMDelta *float64 `json:"proxy_added_cpu_sec_per_mdelta,omitempty"`
	// ThroughputRatio is bridged/direct deltas per second.
	ThroughputRatio   *float64 `json:"throughput_ratio"`
	AddedDeltaP50us   *float64 `json:"added_delta_p50_us"`
	AddedDeltaP99us   *float64 `json:"added_delta_p99_us"`
	AddedTTFDP50us    *float64 `json:"added_ttfd_p50_us"`
	AddedTTFDP99us    *float64 `json:"added_ttfd_p99_us"`
	AddedCPUPerMDelta *float64 `json:"added_cpu_sec_per_mdelta"`
	// FabricPublished and FabricDropped are the in-process instance's
	// events handed to NATS and events it could not publish (its bounded
	// queue was full), over the whole run.
	FabricPublished uint64     `json:"fabric_published"`
	FabricDropped   uint64     `json:"fabric_dropped"`
	LoadBefore      [3]float64 `json:"loadavg_before"`
	LoadAfter       [3]float64 `json:"loadavg_after"`
	Notes           []string   `json:"notes,omitempty"`
}

// mode is one path: a client and what it asks.
type mode struct {
	name   string
	cl     load.Client
	book   *load.StampBook
	prompt func(key string) string
	acc    *sideAcc
	pid    int // the process whose RSS and CPU the path's figures are; 0 is this one
}

// sideAcc accumulates a mode's measured rounds.
type sideAcc struct {
	deltas    int64
	wall      time.Duration
	cpu       time.Duration
	mem       memCounters
	peakRSS   int64
	perStream int64
	ttfd, lat []int64
	errors    int
	firstErr  string
}

// Run measures one pair.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.Procs))
	}
	res := &Result{Pair: o.Frontend + ":" + o.Backend, Streams: o.Streams, Deltas: o.Deltas, Rate: o.Rate,
		Rounds: o.Rounds, Procs: runtime.GOMAXPROCS(0), LatencyFrom: "upstream"}
	if o.Rate > 0 && o.Spread > 0 {
		res.SpreadMS = float64(o.Spread) / float64(time.Millisecond)
	}
	var cleanup cleanups
	defer cleanup.run()
	be, err := newBackendSide(o, res, &cleanup)
	if err != nil {
		return nil, err
	}
	base, pid, err := startServer(ctx, o, be, res, &cleanup)
	if err != nil {
		return nil, err
	}
	p, err := newPaths(o, be, base, pid, &cleanup)
	if err != nil {
		return nil, err
	}
	res.LoadBefore = loadAvg()
	h := &harness{o: o}
	if err := h.measure(ctx, p); err != nil {
		return nil, err
	}
	res.LoadAfter = loadAvg()
	// The profile is of one more bridged round, left out of the figures:
	// the profiler's signals and stack walks cost the round it samples.
	if (o.CPUProfile != "" || o.Trace != "") && !o.External {
		if err := h.round(ctx, p.bridged, false, true); err != nil {
			return nil, err
		}
	}
	if o.MemProfile != "" {
		if err := writeHeapProfile(o.MemProfile); err != nil {
			return nil, err
		}
	}
	p.figures(o, res)
	return res, nil
}

func (o *Options) validate() error {
	if !slices.Contains(Frontends, o.Frontend) {
		return fmt.Errorf("frontend %q: known frontends are %s", o.Frontend, strings.Join(Frontends, ", "))
	}
	if !slices.Contains(Backends, o.Backend) {
		return fmt.Errorf("backend %q: known backends are %s", o.Backend, strings.Join(Backends, ", "))
	}
	if n := frontendLoad(o.Frontend).MaxStreams; n > 0 && o.Streams > n {
		return fmt.Errorf("%s frontend: at most %d streams (its client holds one connection per stream, and the frontend takes no more)", o.Frontend, n)
	}
	return nil
}

// cleanups are deferred closes run in reverse order, as defers would be,
// for a setup split over several functions.
type cleanups []func()

func (c *cleanups) add(f func()) { *c = append(*c, f) }

func (c *cleanups) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// backendSide is the instance's configuration for a pair and what its
// clients ask: an upstream peer (up non-nil) or the scripted backend.
type backendSide struct {
	cfg    bridge.Config
	target string
	params map[string]any
	prompt func(key string) string
	up     *load.Upstream
}

func newBackendSide(o Options, res *Result, cleanup *cleanups) (*backendSide, error) {
	be := &backendSide{cfg: bridge.DefaultConfig(), target: benchTarget, prompt: func(string) string { return benchTarget }}
	var interval time.Duration
	if o.Rate > 0 {
		interval = time.Duration(float64(o.Streams) / o.Rate * float64(time.Second))
	}
	bp := protocols.Get(o.Backend)
	if bp.Load == nil || bp.Load.NewUpstream == nil {
		return be, be.scripted(o, res, interval, bp.WrapRoute != nil)
	}
	sc := load.Script{Target: benchTarget, Deltas: o.Deltas, Text: o.DeltaText, Interval: interval, Streams: o.Streams}
	if bp.NewRuntime != nil {
		sc.Bridge = upstreamBridge(benchTarget)
	}
	up, err := bp.Load.NewUpstream(sc)
	if err != nil {
		return nil, err
	}
	cleanup.add(up.Close)
	opts, err := protocol.OptionsNode(up.Backend)
	if err != nil {
		return nil, err
	}
	be.up = up
	be.cfg.Backends["up"] = bridge.BackendConfig{Type: bp.Name, Options: opts}
	res.Notes = append(res.Notes, up.Notes...)
	be.cfg.Routes = append(be.cfg.Routes, bridge.Route{Target: benchTarget, Backend: "up"})
	be.prompt = func(key string) string { return key }
	return be, nil
}

// scripted routes the bench targets to the scripted backend (through the
// route wrapper, the XML decoder, when wrap), which streams what the
// request's parameters (or, from a frontend whose requests carry none,
// its prompt) ask for.
func (be *backendSide) scripted(o Options, res *Result, interval time.Duration, wrap bool) error {
	res.LatencyFrom = "previous-delta"
	be.cfg.Backends[scriptBackend] = bridge.BackendConfig{Type: scriptedProtocol().Name}
	be.cfg.Routes = append(be.cfg.Routes,
		bridge.Route{Target: benchTarget, Backend: scriptBackend, Model: "stream", XML: wrap},
		bridge.Route{Target: benchTarget + "-echo", Backend: scriptBackend, Model: "echo", XML: wrap})
	if frontendLoad(o.Frontend).Echo {
		// The frontend carries no parameters: the echo target streams
		// the prompt back a word per delta.
		if interval > 0 {
			return fmt.Errorf("%s frontend with the scripted backend cannot be paced: its requests carry no parameters (delay_ms)", o.Frontend)
		}
		be.target = benchTarget + "-echo"
		words := strings.TrimSuffix(strings.Repeat(strings.TrimSpace(o.DeltaText)+" ", o.Deltas), " ")
		be.prompt = func(string) string { return words }
		return nil
	}
	be.params = map[string]any{"deltas": o.Deltas, "delta_text": o.DeltaText}
	if interval > 0 {
		ms := interval.Round(time.Millisecond)
		if ms <= 0 {
			ms = time.Millisecond
		}
		if ms != interval {
			res.Notes = append(res.Notes, fmt.Sprintf("the scripted backend paces in whole milliseconds (delay_ms): interval %v rounded to %v", interval, ms))
		}
		be.params["delay_ms"] = int(ms / time.Millisecond)
	}
	return nil
}

// startServer starts the instance measured, in this process or as a child
// `interlingua serve` (External), and returns its base URL and the process
// to measure (0: this one). The fabric counters go into res on cleanup.
func startServer(ctx context.Context, o Options, be *backendSide, res *Result, cleanup *cleanups) (base string, pid int, err error) {
	if !o.External {
		inst, err := StartInstance(ctx, be.cfg, o.Log)
		if err != nil {
			return "", 0, err
		}
		cleanup.add(inst.Close)
		if err := inst.applyFabric(ctx, o.Fabric); err != nil {
			return "", 0, fmt.Errorf("fabric experiment: %w", err)
		}
		if o.Fabric != "" {
			res.Notes = append(res.Notes, "fabric experiment "+o.Fabric+" (not the default configuration)")
		}
		cleanup.add(func() { res.FabricPublished, res.FabricDropped = inst.Fabric().Published(), inst.Fabric().Dropped() })
		return inst.URL, 0, nil
	}
	// The child serves the pair's backends and routes, as the in-process
	// instance would: its own default configuration plus the peer.
	config, err := yaml.Marshal(struct {
		Backends map[string]bridge.BackendConfig `yaml:"backends"`
		Routes   []bridge.Route                  `yaml:"routes"`
	}{be.cfg.Backends, be.cfg.Routes})
	if err != nil {
		return "", 0, err
	}
	bin := o.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return "", 0, err
		}
	}
	var env []string
	if o.ServerProcs > 0 {
		env = append(env, fmt.Sprintf("GOMAXPROCS=%d", o.ServerProcs))
	}
	ch, err := startChild(ctx, bin, config, env...)
	if err != nil {
		return "", 0, err
	}
	cleanup.add(ch.stop)
	cleanup.add(func() {
		m := ch.scrape()
		res.FabricPublished, res.FabricDropped = uint64(m["interlingua_nats_published_messages"]), uint64(m["interlingua_nats_dropped_events"])
	})
	res.Notes = append(res.Notes, fmt.Sprintf("server in a child process (GOMAXPROCS %s): the bridged path's CPU and RSS figures are the server's (the other paths' are this process's: clients and peer), allocations not measured",
		cmpText(o.ServerProcs, "default")))
	return "http://" + ch.addr, ch.pid, nil
}

// paths are the modes a pair is measured through: always bridged; direct
// to the peer and the no-op proxy where there is a direct path.
type paths struct {
	bridged, direct, proxy *mode
	all                    []*mode // in the order each round runs them
}

func newPaths(o Options, be *backendSide, base string, pid int, cleanup *cleanups) (*paths, error) {
	fl := frontendLoad(o.Frontend)
	bcl, err := fl.NewClient(load.ClientSpec{Base: base, Target: be.target, Params: be.params, Streams: o.Streams, Mode: "bridged"})
	if err != nil {
		return nil, err
	}
	cleanup.add(bcl.Close)
	var book *load.StampBook
	if be.up != nil {
		book = be.up.Book
	}
	p := &paths{bridged: &mode{name: "bridged", cl: bcl, book: book, prompt: be.prompt, acc: &sideAcc{}, pid: pid}}
	p.all = []*mode{p.bridged}
	if be.up == nil || o.Frontend != o.Backend {
		return p, nil
	}
	dcl, err := fl.NewClient(load.ClientSpec{Base: be.up.Base, Target: benchTarget, Streams: o.Streams, Mode: "direct"})
	if err != nil {
		return nil, err
	}
	cleanup.add(dcl.Close)
	p.direct = &mode{name: "direct", cl: dcl, book: book, prompt: be.prompt, acc: &sideAcc{}}
	p.all = []*mode{p.direct, p.bridged}
	if !o.Proxy {
		return p, nil
	}
	px, err := newNoopProxy(be.up.Base, be.up.H2C, o.Streams)
	if err != nil {
		return nil, err
	}
	cleanup.add(px.close)
	pcl, err := fl.NewClient(load.ClientSpec{Base: px.base, Target: benchTarget, Streams: o.Streams, Mode: "proxy"})
	if err != nil {
		return nil, err
	}
	cleanup.add(pcl.Close)
	p.proxy = &mode{name: "proxy", cl: pcl, book: book, prompt: be.prompt, acc: &sideAcc{}}
	p.all = []*mode{p.direct, p.proxy, p.bridged}
	return p, nil
}

// measure runs the warm-up and measured rounds, alternating the paths.
func (h *harness) measure(ctx context.Context, p *paths) error {
	for w := 0; w < h.o.Warmup; w++ {
		for _, m := range p.all {
			if err := h.round(ctx, m, false, false); err != nil {
				return err
			}
		}
	}
	for r := 0; r < h.o.Rounds; r++ {
		for _, m := range p.all {
			if err := h.round(ctx, m, true, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// figures fills res with each path's figures and their differences.
func (p *paths) figures(o Options, res *Result) {
	res.Bridged = p.bridged.acc.side(o.Streams)
	if o.External { // the counters are this process's, not the server's
		res.Bridged.AllocsPerDelta, res.Bridged.BytesPerDelta = 0, 0
	}
	if p.direct != nil {
		res.Direct = p.direct.acc.side(o.Streams)
		d, b := res.Direct, res.Bridged
		res.ThroughputRatio = ptr(b.DeltasPerSec / d.DeltasPerSec)
		res.AddedDeltaP50us = ptr(b.DeltaP50us - d.DeltaP50us)
		res.AddedDeltaP99us = ptr(b.DeltaP99us - d.DeltaP99us)
		res.AddedTTFDP50us = ptr(b.TTFDP50us - d.TTFDP50us)
		res.AddedTTFDP99us = ptr(b.TTFDP99us - d.TTFDP99us)
		res.AddedCPUPerMDelta = ptr(b.CPUSecPerMDelta - d.CPUSecPerMDelta)
	}
	if p.proxy != nil {
		d, px := res.Direct, p.proxy.acc.side(o.Streams)
		res.Proxy = px
		res.ProxyThroughputRatio = ptr(px.DeltasPerSec / d.DeltasPerSec)
		res.ProxyAddedDeltaP50us = ptr(px.DeltaP50us - d.DeltaP50us)
		res.ProxyAddedDeltaP99us = ptr(px.DeltaP99us - d.DeltaP99us)
		res.ProxyAddedTTFDP99us = ptr(px.TTFDP99us - d.TTFDP99us)
		res.ProxyAddedCPUPerMDelta = ptr(px.CPUSecPerMDelta - d.CPUSecPerMDelta)
	}
}

func cmpText(n int, def string) string {
	if n <= 0 {
		return def
	}
	return fmt.Sprint(n)
}

func ptr(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	f = math.Round(f*100) / 100
	return &f
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	return startWriting(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace writes an execution trace of the process into path until
// stop is called.
func startTrace(path string) (stop func(), err error) {
	return startWriting(path, trace.Start, trace.Stop)
}

// startWriting creates path and starts a runtime writer (a profile, a
// trace) into it; stop stops the writer and closes the file.
func startWriting(path string, start func(io.Writer) error, end func()) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { end(); f.Close() }, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	// A heap profile's in-use figures lag a collection behind: two now
	// make them the run's live heap at its end.
	runtime.GC()
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type harness struct {
	o   Options
	seq int // rounds run, for unique stream keys
}

// round runs Streams concurrent streams once through m.
func (h *harness) round(ctx context.Context, m *mode, measured, profile bool) error {
	o := h.o
	h.seq++
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rs := h.newRoundStreams(m)
	if profile {
		stop, err := h.startProfiles()
		if err != nil {
			return err
		}
		defer stop()
	}
	var sampler *rssSampler
	if measured {
		// A collection, not debug.FreeOSMemory: memory handed back to the
		// OS faults in again on first use and would inflate TTFD.
		runtime.GC()
		sampler = sampleRSS(m.pid)
	}
	baseRSS, _ := procStatus(m.pid)
	var mem0 memCounters
	var cpu0 time.Duration
	var t0 int64
	h.runStreams(ctx, m, rs, func() { mem0, cpu0, t0 = readMem(), cpuTime(m.pid), now() })
	cpu1, mem1 := cpuTime(m.pid), readMem()
	var peak int64
	if sampler != nil {
		peak = sampler.finish()
	}
	t1 := slices.Max(rs.ends)
	rs.settleUpstream(m)
	if !measured {
		return rs.warmupErr(m.name)
	}
	a := m.acc
	a.wall += time.Duration(t1 - t0)
	a.cpu += cpu1 - cpu0
	a.mem.mallocs += mem1.mallocs - mem0.mallocs
	a.mem.bytes += mem1.bytes - mem0.bytes
	a.peakRSS = max(a.peakRSS, peak)
	a.perStream = max(a.perStream, (peak-baseRSS)/int64(o.Streams))
	for i := range rs.recs {
		a.addStream(&rs.recs[i], rs.sts[i], rs.errs[i], o.Deltas)
	}
	return nil
}

// roundStreams are one round's streams, by index: what each asks, what
// its client and (with an upstream peer) the peer recorded, how it ended.
type roundStreams struct {
	recs    []load.Recorder
	sts     []*load.Stamps // nil without an upstream peer
	keys    []string
	prompts []string
	errs    []error
	ends    []int64
}

func (h *harness) newRoundStreams(m *mode) *roundStreams {
	n := h.o.Streams
	rs := &roundStreams{recs: make([]load.Recorder, n), sts: make([]*load.Stamps, n), keys: make([]string, n),
		prompts: make([]string, n), errs: make([]error, n), ends: make([]int64, n)}
	for i := range rs.recs {
		rs.recs[i].Recv = make([]int64, 0, h.o.Deltas)
		rs.keys[i] = fmt.Sprintf("k%d-%s-%d", h.seq, m.name, i)
		rs.prompts[i] = m.prompt(rs.keys[i])
		if m.book != nil {
			rs.sts[i] = m.book.Open(rs.keys[i])
		}
	}
	return rs
}

// startProfiles starts the CPU profile and the execution trace asked for.
func (h *harness) startProfiles() (stop func(), err error) {
	var stops cleanups
	if h.o.CPUProfile != "" {
		s, err := startCPUProfile(h.o.CPUProfile)
		if err != nil {
			return nil, err
		}
		stops.add(s)
	}
	if h.o.Trace != "" {
		s, err := startTrace(h.o.Trace)
		if err != nil {
			stops.run()
			return nil, err
		}
		stops.add(s)
	}
	return stops.run, nil
}

// runStreams starts every stream at once (paced: spread over one interval
// or Spread) and waits for all of them to end. begin runs with the
// goroutines created, just before they are let go, so the figures it
// starts leave their creation out.
func (h *harness) runStreams(ctx context.Context, m *mode, rs *roundStreams, begin func()) {
	o, n := h.o, h.o.Streams
	var stagger time.Duration
	switch {
	case o.Rate > 0 && o.Spread > 0:
		stagger = o.Spread / time.Duration(n)
	case o.Rate > 0:
		stagger = time.Duration(float64(time.Second) / o.Rate)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if stagger > 0 { // paced: arrivals spread over one interval
				t := time.NewTimer(time.Duration(i) * stagger)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
			}
			rs.errs[i] = m.cl.Stream(ctx, i, rs.prompts[i], &rs.recs[i])
			rs.ends[i] = now()
		}()
	}
	begin()
	close(start)
	wg.Wait()
}

// settleUpstream waits for the upstream's stamps, complete once each
// stream's last frame is out, and fails the streams whose upstream did not
// finish.
func (rs *roundStreams) settleUpstream(m *mode) {
	finished := awaitUpstream(rs.sts, upstreamWait)
	for i, st := range rs.sts {
		if st == nil {
			continue
		}
		if !finished[i] && rs.errs[i] == nil {
			rs.errs[i] = errors.New("upstream did not finish the stream")
		}
		m.book.Forget(rs.keys[i])
	}
}

// warmupErr fails a warm-up in which no stream worked (a setup error);
// single failures (a slow consumer cut off) show in the measured rounds.
func (rs *roundStreams) warmupErr(name string) error {
	var first error
	failed := 0
	for _, err := range rs.errs {
		if err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	if failed == len(rs.errs) {
		return fmt.Errorf("%s warm-up: %w", name, first)
	}
	return nil
}

// addStream counts one measured stream: its deltas, its time to first
// delta, each delta's latency (from the upstream's stamp, or without one
// the interval since the previous delta), and its error, including a
// count that is not the one asked for or stamps that do not pair up.
func (a *sideAcc) addStream(r *load.Recorder, st *load.Stamps, err error, deltas int) {
	var sent []int64
	if st != nil {
		sent = st.Times()
	}
	if err == nil && len(r.Recv) != deltas {
		err = fmt.Errorf("stream ended after %d of %d deltas", len(r.Recv), deltas)
	}
	if err == nil && st != nil {
		// The upstream's stamps must pair up with the client's deltas,
		// or latency would be measured against the wrong frames.
		if len(sent) != len(r.Recv) {
			err = fmt.Errorf("upstream stamped %d deltas, client received %d", len(sent), len(r.Recv))
		}
		for j := range r.Recv {
			if err == nil && r.Recv[j] < sent[j] {
				err = fmt.Errorf("delta %d arrived before the upstream sent it: the client read another stream's events", j)
			}
		}
	}
	if err != nil {
		a.errors++
		if a.firstErr == "" {
			a.firstErr = err.Error()
		}
	}
	a.deltas += int64(len(r.Recv))
	if len(r.Recv) == 0 {
		return
	}
	a.ttfd = append(a.ttfd, r.Recv[0]-r.Start)
	if st != nil && len(sent) > 0 {
		k := min(len(sent), len(r.Recv))
		for j := 0; j < k; j++ {
			a.lat = append(a.lat, r.Recv[j]-sent[j])
		}
		return
	}
	for j := 1; j < len(r.Recv); j++ {
		a.lat = append(a.lat, r.Recv[j]-r.Recv[j-1])
	}
}

func (a *sideAcc) side(streams int) *Side {
	us := func(ns int64) float64 { return math.Round(float64(ns)/10) / 100 }
	ttfd, lat := sortedCopy(a.ttfd), sortedCopy(a.lat)
	s := &Side{
		TTFDP50us: us(percentile(ttfd, 50)), TTFDP99us: us(percentile(ttfd, 99)),
		DeltaP50us: us(percentile(lat, 50)), DeltaP99us: us(percentile(lat, 99)),
		RSSBytes: a.peakRSS, RSSPerStreamBytes: a.perStream,
		Deltas: a.deltas, Seconds: math.Round(a.wall.Seconds()*1000) / 1000,
		Errors: a.errors, FirstError: a.firstErr,
	}
	if a.wall > 0 {
		s.DeltasPerSec = math.Round(float64(a.deltas) / a.wall.Seconds())
	}
	if a.deltas > 0 {
		s.CPUSecPerMDelta = math.Round(a.cpu.Seconds()/float64(a.deltas)*1e6*1000) / 1000
		s.AllocsPerDelta = math.Round(float64(a.mem.mallocs)/float64(a.deltas)*100) / 100
		s.BytesPerDelta = math.Round(float64(a.mem.bytes) / float64(a.deltas))
	}
	return s
}

// upstreamWait is how long a round waits, after its clients are done, for
// the upstream streams to finish writing.
const upstreamWait = 5 * time.Second

// awaitUpstream reports which of the upstream streams (nil: none) finished
// within d, one deadline for all: a wait of d per stream made a round whose
// upstream streams never started (their clients failed first) take d each,
// 2 hours for 1,500 streams.
func awaitUpstream(sts []*load.Stamps, d time.Duration) []bool {
	finished := make([]bool, len(sts))
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	expired := false
	for i, st := range sts {
		if st == nil {
			continue
		}
		select {
		case <-st.Done():
			finished[i] = true
			continue
		default:
		}
		if expired {
			continue
		}
		select {
		case <-st.Done():
			finished[i] = true
		case <-deadline.C:
			expired = true
		}
	}
	return finished
}

// upstreamBridge is a bridge of the harness's around an upstream's
// producer (load.Script.Bridge), on an embedded NATS server of its own,
// routing target to it and running every protocol's runtime: the
// upstream of a backend protocol whose frontend runs through the bridge.
func upstreamBridge(target string) func(r canonical.Runner) (*load.Bridged, error) {
	return func(r canonical.Runner) (*load.Bridged, error) {
		dir, err := os.MkdirTemp("", "interlingua-bench-upstream-")
		if err != nil {
			return nil, err
		}
		cfg := bridge.DefaultConfig()
		cfg.DataDir = dir
		cfg.Defaults()
		log := slog.New(slog.DiscardHandler)
		f, err := bridge.StartFabric(context.Background(), cfg.NATS, dir, log)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		b := bridge.NewBridge(bridge.NewRouter([]bridge.Route{{Target: target, Backend: "producer"}},
			map[string]canonical.Backend{"producer": runnerBackend{r}}, nil), f, log)
		b.AddRuntimes()
		if err := b.StartCluster(nil, cfg.NATS); err != nil {
			f.Close()
			_ = os.RemoveAll(dir)
			return nil, err
		}
		return &load.Bridged{Runner: b, Observer: b, Store: b.ThreadStore(), CheckThread: b.CheckThread, CancelRun: b.CancelRun,
			Close: func() {
				b.Stop(5*time.Second, time.Second)
				f.Close()
				_ = os.RemoveAll(dir)
			}}, nil
	}
}

// runnerBackend is a Runner as a backend.
type runnerBackend struct{ canonical.Runner }

func (rb runnerBackend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	return rb.Run(ctx, req)
}
