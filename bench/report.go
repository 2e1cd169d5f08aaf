package loadgen

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReportOptions configure the benchmark report (make bench).
type ReportOptions struct {
	// Path is the markdown file written (docs/benchmarks.md).
	Path string
	// Converters is a file of `go test -bench . -benchmem` output over
	// the adapters (and any other packages); empty leaves the section out.
	Converters string
	// ProfileDir keeps the CPU and allocation profiles taken. Default a
	// temporary folder.
	ProfileDir string
	// Quick runs a reduced matrix (a smoke test of the report itself).
	Quick bool
	// Progress receives a line per scenario. Default discards.
	Progress io.Writer
	// GCHeapFloor is the GC heap floor the process runs under (the
	// caller starts it), for the report to say; ≤ 0: none.
	GCHeapFloor int64
}

// scenario is one load measurement of the matrix.
type scenario struct {
	group string
	opts  Options
	res   *Result
	err   error
	prof  string // CPU profile of a bridged round after the measured ones
}

// target is one line of the targets table.
type target struct {
	what, goal, got string
	ok              bool
	measured        bool
	profiles        []string // profiles whose top entries explain a miss
	// floor is the same figure for a hop that does no work, in the same
	// run: the no-op proxy (Options.Proxy), or NATS alone (Cluster).
	floor string
}

// WriteReport runs the converter analysis, the standard load matrix, the
// idle and cluster measurements, and writes the markdown report.
func WriteReport(ctx context.Context, o ReportOptions) error {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.ProfileDir == "" {
		d, err := os.MkdirTemp("", "interlingua-bench-profiles-")
		if err != nil {
			return err
		}
		o.ProfileDir = d
	}
	if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
		return err
	}
	started := time.Now().UTC()
	load0 := loadAvg()
	var body bytes.Buffer
	var targets []target

	// Converters.
	var convs []benchLine
	if o.Converters != "" {
		data, err := os.ReadFile(o.Converters)
		if err != nil {
			return err
		}
		convs = parseBench(data)
	}
	fmt.Fprintln(o.Progress, "bench: machine baseline")
	rtt := loopbackRTT(2000, time.Millisecond)

	// The load matrix.
	scale := func(full, quick int) int {
		if o.Quick {
			return quick
		}
		return full
	}
	var sc []*scenario
	add := func(group string, opt Options) *scenario {
		s := &scenario{group: group, opts: opt}
		sc = append(sc, s)
		return s
	}
	ratio := map[string]*scenario{}
	paced := map[string]*scenario{}
	peers := []string{"triton", "evergreen", "glide", "agent"}
	// Throughput is compared in the steady state: streams long enough
	// that their start (connection, request, the first socket buffers
	// filling) is a small part of the round. At 1,000 deltas a round
	// lasted 30 to 60 ms, most of it the streams' TTFD. The agent
	// protocol stays under its thread buffer (10,000 events; see below).
	// Five rounds a path: on this shared machine one round's ratio swings
	// by ±0.1.
	ratioDeltas := map[string]int{"triton": 20_000, "evergreen": 10_000, "glide": 10_000, "agent": 5000}
	for _, p := range peers {
		ratio[p] = add("ratio", Options{Frontend: p, Backend: p, Streams: 16, Deltas: scale(ratioDeltas[p], 200), Rounds: 5, Proxy: true})
	}
	for _, p := range peers {
		paced[p] = add("paced", Options{Frontend: p, Backend: p, Streams: 100, Deltas: scale(200, 50), Rate: 10_000, Proxy: true})
	}
	// The same load with the starts spread over 200 ms (500 a second)
	// rather than 100 within 10 ms: a run's time to first delta with the
	// others streaming, not waiting behind their starts.
	spread := map[string]*scenario{}
	for _, p := range peers {
		spread[p] = add("spread", Options{Frontend: p, Backend: p, Streams: 100, Deltas: scale(200, 50), Rate: 10_000, Spread: 200 * time.Millisecond, Proxy: true})
	}
	start := map[string]*scenario{}
	for _, p := range peers {
		start[p] = add("start", Options{Frontend: p, Backend: p, Streams: 100, Deltas: 1, Rounds: 5, Proxy: true})
	}
	one := add("one", Options{Frontend: "triton", Backend: "scripted", Streams: 1, Deltas: scale(1_000_000, 100_000), External: true, ServerProcs: 1, Rounds: 2})
	oneIn := add("one", Options{Frontend: "triton", Backend: "scripted", Streams: 1, Deltas: scale(1_000_000, 100_000), Procs: 1})
	add("one", Options{Frontend: "triton", Backend: "scripted", Streams: 1, Deltas: scale(1_000_000, 100_000), Procs: 2})
	for _, exp := range []string{"", FabricSyncPersist, FabricNoReplay} {
		add("fabric", Options{Frontend: "triton", Backend: "scripted", Streams: 4, Deltas: scale(100_000, 10_000), Fabric: exp})
	}
	for _, fe := range Frontends {
		add("scripted", Options{Frontend: fe, Backend: "scripted", Streams: 8, Deltas: scale(20_000, 2000)})
	}
	// An unpaced agent-protocol run outruns an SSE reader by more than the
	// thread buffer (10,000 events) at 20,000 deltas: the reader is cut
	// off (the slow-consumer rule). A shorter run shows the figures.
	add("scripted", Options{Frontend: "agent", Backend: "scripted", Streams: 8, Deltas: scale(5000, 2000)})
	add("scripted", Options{Frontend: "triton", Backend: "xml", Streams: 8, Deltas: scale(20_000, 2000)})
	for _, pr := range [][2]string{{"triton", "glide"}, {"glide", "triton"}, {"evergreen", "triton"}, {"triton", "evergreen"},
		{"agent", "triton"}, {"triton", "agent"}, {"xml", "glide"}, {"native", "evergreen"}} {
		add("cross", Options{Frontend: pr[0], Backend: pr[1], Streams: 8, Deltas: scale(2000, 200)})
	}
	active := add("active", Options{Frontend: "triton", Backend: "scripted", Streams: 1000, Deltas: scale(100, 20), Rounds: 2})
	add("active", Options{Frontend: "glide", Backend: "scripted", Streams: 1000, Deltas: scale(100, 20), Rounds: 2})

	for i, s := range sc {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.prof = filepath.Join(o.ProfileDir, fmt.Sprintf("%02d-%s-%s-%s.cpu.prof", i, s.group, s.opts.Frontend, s.opts.Backend))
		s.opts.CPUProfile = s.prof
		fmt.Fprintf(o.Progress, "bench: %s:%s %d×%d rate %v procs %d\n", s.opts.Frontend, s.opts.Backend, s.opts.Streams, s.opts.Deltas, s.opts.Rate, s.opts.Procs)
		s.res, s.err = Run(ctx, s.opts)
		if s.err != nil {
			fmt.Fprintf(o.Progress, "bench: %v\n", s.err)
		}
	}
	fmt.Fprintln(o.Progress, "bench: idle connections")
	idle, idleErr := Idle(ctx, IdleOptions{Conns: scale(10_000, 1000), ActiveStreams: 1000, ActiveDeltas: scale(100, 20)})
	fmt.Fprintln(o.Progress, "bench: cluster")
	cluster, clusterErr := Cluster(ctx, ClusterOptions{Deltas: scale(50_000, 5000), Rounds: 3})

	// Targets.
	targets = append(targets, converterTargets(convs)...)
	for _, p := range peers {
		s := paced[p]
		name := fmt.Sprintf("%s→%s at 10k deltas/s (100 streams)", p, p)
		ttfd := sideTarget(s, "added TTFD p99, "+name, "≤ 1 ms", func(r *Result) (*float64, *float64) { return r.AddedTTFDP99us, r.ProxyAddedTTFDP99us }, 1000)
		// A run's time to first delta is mostly the wait behind the other
		// runs starting: what a start costs says why, and its profile where.
		if st := start[p]; st.res != nil && st.res.Direct != nil {
			ttfd.got += fmt.Sprintf(" (a run start: +%s µs of CPU)", trim(st.res.Bridged.CPUSecPerMDelta-st.res.Direct.CPUSecPerMDelta))
			ttfd.profiles = []string{st.prof}
		}
		targets = append(targets,
			sideTarget(s, "added latency per delta p50, "+name, "≤ 50 µs", func(r *Result) (*float64, *float64) { return r.AddedDeltaP50us, r.ProxyAddedDeltaP50us }, 50),
			sideTarget(s, "added latency per delta p99, "+name, "≤ 250 µs", func(r *Result) (*float64, *float64) { return r.AddedDeltaP99us, r.ProxyAddedDeltaP99us }, 250),
			ttfd,
			sideTarget(spread[p], "added TTFD p99, "+name+", starts spread over 200 ms", "≤ 1 ms", func(r *Result) (*float64, *float64) { return r.AddedTTFDP99us, r.ProxyAddedTTFDP99us }, 1000))
	}
	{
		t := target{what: "one stream, Triton SSE frontend ← scripted, server process on one core (GOMAXPROCS 1; client in another process)", goal: "≥ 300,000 deltas/s"}
		if one.res != nil {
			v := one.res.Bridged.DeltasPerSec
			t.got, t.ok, t.measured = fmt.Sprintf("%s deltas/s (server CPU %.1f µs per delta)", num(v), one.res.Bridged.CPUSecPerMDelta), v >= 300_000, true
		} else {
			t.got = errText(one.err)
		}
		t.profiles = []string{oneIn.prof} // the child is not profiled: the same code in this process
		targets = append(targets, t)
	}
	for _, p := range []string{"triton", "evergreen"} {
		s := ratio[p]
		t := target{what: fmt.Sprintf("%s→%s throughput vs direct (%d streams × %s deltas, unpaced)", p, p, s.opts.Streams, num(float64(s.opts.Deltas))), goal: "≥ 0.80"}
		if s.res != nil && s.res.ThroughputRatio != nil {
			t.got, t.ok, t.measured = fmt.Sprintf("%.2f", *s.res.ThroughputRatio), *s.res.ThroughputRatio >= 0.8, true
			if pr := s.res.ProxyThroughputRatio; pr != nil {
				t.floor = fmt.Sprintf("%.2f", *pr)
			}
		} else {
			t.got = errText(s.err)
		}
		t.profiles = []string{s.prof}
		targets = append(targets, t)
	}
	{
		t := target{what: fmt.Sprintf("%d idle streaming connections (SSE + WebSocket), server RSS", scale(10_000, 1000)), goal: "≤ 1 GiB"}
		if idle != nil {
			t.got = mib(idle.IdleRSS) + " MiB"
			t.ok, t.measured = idle.IdleRSS <= 1<<30 && idle.Failed == 0, true
			if idle.Failed > 0 {
				t.got += fmt.Sprintf(" (%d failed to open)", idle.Failed)
			}
		} else {
			t.got = errText(idleErr)
		}
		targets = append(targets, t)
		t = target{what: "1,000 concurrently active streams (Triton and Glide frontends ← scripted; and alongside the idle connections)", goal: "no errors"}
		errs, ok := 0, active.res != nil
		for _, s := range sc {
			if s.group == "active" {
				if s.res == nil {
					ok = false
					continue
				}
				errs += s.res.Bridged.Errors
			}
		}
		if idle != nil && idle.Active != nil {
			errs += idle.Active.Errors
		}
		t.got, t.ok, t.measured = fmt.Sprintf("%d errors", errs), ok && errs == 0, ok
		targets = append(targets, t)
	}
	{
		t := target{what: "two instances over NATS: events/s from another instance", goal: "≥ 200,000 events/s"}
		t2 := target{what: "two instances over NATS: added p99 (paced)", goal: "≤ 200 µs"}
		if cluster != nil {
			v := cluster.AcrossNATS.EventsPerSec
			t.got, t.ok, t.measured = num(v)+" events/s", v >= 200_000, true
			if cluster.AddedP99us != nil {
				t2.got, t2.ok, t2.measured = trim(*cluster.AddedP99us)+" µs", *cluster.AddedP99us <= 200, true
			}
			if n := cluster.NATSAlone; n != nil {
				t2.floor = trim(n.P99us) + " µs (NATS alone)"
			}
		} else {
			t.got, t2.got = errText(clusterErr), errText(clusterErr)
		}
		targets = append(targets, t, t2)
	}

	// The document.
	w := &body
	fmt.Fprintln(w, "# Benchmarks")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Generated by `interlingua bench --report` (`make bench`) on %s; do not edit by hand.\n\n", started.Format("2006-01-02 15:04 MST"))
	writeMachine(w, load0, rtt, o.GCHeapFloor)
	fmt.Fprintln(w, "## Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, targetsText)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | goal | measured | hop alone, same load | |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, t := range targets {
		mark := "**MISSED**"
		switch {
		case !t.measured:
			mark = "not measured"
		case t.ok:
			mark = "met"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", t.what, t.goal, t.got, cmp.Or(t.floor, "–"), mark)
	}
	fmt.Fprintln(w)
	writeConverters(w, convs)
	fmt.Fprintln(w, "## Load: frontend:backend pairs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, methodText)
	groups := []struct{ id, title, text string }{
		{"ratio", "Bridge vs direct, unpaced", "Same protocol on both sides, so the client can call the peer directly: the ratio is what the hop costs in throughput. Unpaced, so latency figures here are queueing, not service time."},
		{"paced", "Added latency at 10,000 deltas/s", "100 streams, each paced by the peer at one delta per 10 ms (100 deltas/s, a fast LLM). The peer stamps each delta as it writes it; latency is stamp to client parse. The peers pace with Go timers, which a mostly idle process fires at the netpoller's millisecond granularity, so the streams' deltas leave in bunches of about ten every millisecond, as a batching model server's decode steps do; latency includes the wait behind the rest of a bunch at each hop."},
		{"spread", "Added latency at 10,000 deltas/s, starts spread over 200 ms", "The paced load above with the 100 streams started 2 ms apart (500 starts a second) instead of 0.1 ms apart: a run's time to first delta while the others stream, rather than behind 99 other starts."},
		{"start", "What a run start costs", "100 streams of one delta each, started together, five rounds a path. With one delta a stream, CPU s / M deltas reads as µs of CPU per run (process-wide: client, peer and, bridged, the instance). A run's time to first delta is mostly its wait behind the runs starting with it: 100 starts on 2 cores wait on the order of 100 × the CPU of a start ÷ 2, so an added TTFD p99 of 1 ms at this concurrency needs the instance to start a run in about 20 µs of CPU."},
		{"one", "One stream, as fast as possible", "Triton SSE frontend from the scripted backend. First with the server as a child `interlingua serve` limited to one core (GOMAXPROCS 1) and the client in the bench process; then in process, where with GOMAXPROCS 1 the raw SSE client shares the core with the server."},
		{"fabric", "What the replay log costs", "The same load with the instance's JetStream replay stream as configured (persist_mode async by default: written in batches), recreated with persist_mode sync (one write per event, JetStream's default), and deleted (events still published to NATS, not stored). Experiments only: the bridge's configuration is not changed."},
		{"scripted", "Every frontend from the scripted backend", "No direct path; delta latency is the interval between deltas at the client. The agent protocol runs twice: at 20,000 deltas per stream an unpaced run gets more than its thread's event buffer (10,000) ahead of the SSE reader, which is then cut off with a resume-gap error, as the design's slow-consumer rule says; at 5,000 it is not."},
		{"cross", "Cross-protocol pairs", "Different protocols on the two sides, so there is no direct path; latency is from the peer's send stamp."},
		{"active", "1,000 concurrently active streams", ""},
	}
	for _, g := range groups {
		fmt.Fprintf(w, "### %s\n\n", g.title)
		if g.text != "" {
			fmt.Fprintln(w, g.text)
			fmt.Fprintln(w)
		}
		for _, s := range sc {
			if s.group != g.id {
				continue
			}
			if s.err != nil {
				fmt.Fprintf(w, "#### %s:%s\n\nFailed: %s\n\n", s.opts.Frontend, s.opts.Backend, s.err)
				continue
			}
			var b bytes.Buffer
			WriteMarkdown(&b, s.res)
			w.Write(bytes.Replace(b.Bytes(), []byte("### "), []byte("#### "), 1))
		}
	}
	fmt.Fprintln(w, "## Idle connections")
	fmt.Fprintln(w)
	if idle != nil {
		var b bytes.Buffer
		WriteIdleMarkdown(&b, idle)
		w.Write(bytes.Replace(b.Bytes(), []byte("### "), []byte("#### "), 1))
	} else {
		fmt.Fprintf(w, "Failed: %v\n\n", idleErr)
	}
	fmt.Fprintln(w, "## Two instances")
	fmt.Fprintln(w)
	if cluster != nil {
		var b bytes.Buffer
		WriteClusterMarkdown(&b, cluster)
		w.Write(bytes.Replace(b.Bytes(), []byte("### "), []byte("#### "), 1))
	} else {
		fmt.Fprintf(w, "Failed: %v\n\n", clusterErr)
	}

	// Profiles of the misses.
	fmt.Fprintln(w, "## Profiles of missed targets")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "CPU profiles of one more bridged round of each load scenario, run after the measured rounds and left out of their figures (the whole process: clients, peers and bridge), and allocation profiles of the converter benchmarks, are kept in `%s`. Top entries by flat time:\n\n", o.ProfileDir)
	seen := map[string]bool{}
	for _, t := range targets {
		if t.ok || !t.measured {
			continue
		}
		for _, p := range t.profiles {
			if p == "" || seen[p] {
				continue
			}
			seen[p] = true
			top := pprofTop(p, "")
			if top == "" {
				continue
			}
			fmt.Fprintf(w, "#### %s\n\n`%s`\n\n```\n%s```\n\n", t.what, filepath.Base(p), top)
		}
	}
	for _, p := range converterProfiles(ctx, convs, o.ProfileDir, o.Progress) {
		fmt.Fprintf(w, "#### converter allocations: %s\n\n```\n%s```\n\n", p.name, p.top)
	}
	fmt.Fprintf(w, "Load average at the start %.2f %.2f %.2f, at the end %.2f %.2f %.2f.\n",
		load0[0], load0[1], load0[2], loadAvg()[0], loadAvg()[1], loadAvg()[2])
	return os.WriteFile(o.Path, body.Bytes(), 0o644)
}

const methodText = `Each table compares the same load sent straight to the upstream peer ("direct") and through an in-process
Interlingua instance ("bridged": frontend, bridge with its embedded NATS and JetStream replay log, backend), in
alternating rounds within one process. Process-wide figures (CPU, allocations, RSS) include the clients and the
peers, so the bridge's cost is the bridged-minus-direct difference. Latency per delta is measured from the
peer's send stamp to the client's parse; TTFD from the client's request to its first delta.

Where the two sides speak the same protocol, a third path joins the alternation: the peer behind a reverse
proxy that translates nothing ("no-op proxy": the standard library's net/http/httputil.ReverseProxy, HTTP/1.1
with WebSocket upgrades, or h2c for Evergreen's gRPC, writing each chunk on as soon as it is read). It does
what any hop must (accept the connection, open one upstream, and per delta a socket read, a socket write and
the wake-ups between them) and nothing else, so "proxy vs direct" is what a hop costs on this machine, and
bridged minus proxy is what translating, the replay log and the rest of the instance add to it.`

// targetsText says what the targets table's floor column is.
const targetsText = `"hop alone, same load" is the same figure, measured in the same run, for a hop that does no work: a
reverse proxy that translates nothing in front of the peer (see "Load" below), or, for two instances, NATS
alone (see "Two instances"). It is what a hop costs on this machine before any translation.`

func errText(err error) string {
	if err == nil {
		return "not run"
	}
	return "failed: " + err.Error()
}

// sideTarget is a bridged-minus-direct figure's target; f returns it and
// the same figure of the no-op proxy (nil without one).
func sideTarget(s *scenario, what, goal string, f func(*Result) (bridged, proxy *float64), limit float64) target {
	t := target{what: what, goal: goal, profiles: []string{s.prof}}
	if s.res == nil {
		t.got = errText(s.err)
		return t
	}
	v, pv := f(s.res)
	if v != nil {
		t.got, t.ok, t.measured = trim(*v)+" µs", *v <= limit, true
	}
	if pv != nil {
		t.floor = trim(*pv) + " µs"
	}
	if s.res.Bridged.Errors > 0 || (s.res.Direct != nil && s.res.Direct.Errors > 0) {
		t.ok = false
		t.got += " (with errors)"
	}
	return t
}

// writeMachine describes where the figures come from.
func writeMachine(w io.Writer, load [3]float64, rtt [3]float64, gcFloor int64) {
	cpu, mem := "", ""
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		l, _, _ := strings.Cut(string(data), "\n")
		mem = strings.Join(strings.Fields(strings.TrimPrefix(l, "MemTotal:")), " ")
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Fprintln(w, "## Machine")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "- CPU: %s, %d logical CPUs (GOMAXPROCS %d); memory %s; Linux %s\n", cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), mem, strings.TrimSpace(string(kernel)))
	fmt.Fprintf(w, "- Go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if rev := gitRevision(); rev != "" {
		fmt.Fprintf(w, "- Source: %s\n", rev)
	}
	gogc := cmp.Or(os.Getenv("GOGC"), "100")
	if gcFloor > 0 && gogc != "off" { // GOGC=off disables the floor (gcfloor.Start)
		fmt.Fprintf(w, "- GC: GOGC %s with a heap floor of %d MiB (gc_heap_floor, as \"interlingua serve\" runs by default): the collector does not start a cycle below it. The clients, peers, proxy and instances of every path share this process, so each path runs under it.\n", gogc, gcFloor>>20)
	} else {
		fmt.Fprintf(w, "- GC: GOGC %s, no heap floor.\n", gogc)
	}
	fmt.Fprintf(w, "- Load average when the run started: %.2f %.2f %.2f. The machine is shared: other work running at the same time inflates latency and lowers throughput; both paths of a comparison are measured in alternating rounds so they see the same conditions, and each table gives the load average around it.\n", load[0], load[1], load[2])
	fmt.Fprintf(w, "- Environment floor: a 64-byte TCP round trip on loopback between two goroutines, one every millisecond (the receiving side idle in between, as a paced stream's is): p50 %s µs, p99 %s µs, %s µs of CPU per round trip (two socket writes, two reads, the wake-ups, and the sleep's timer). Every hop a delta takes pays a write, a read and a wake-up like these.\n\n", trim(rtt[0]), trim(rtt[1]), trim(rtt[2]))
}

func gitRevision() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	// The report being rewritten is not a change to the code measured.
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ":/", ":(top,exclude)docs/benchmarks.md").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		rev += " with uncommitted changes"
	}
	return "commit " + rev
}

// benchLine is one parsed `go test -bench` result.
type benchLine struct {
	pkg, name         string
	nsOp, bOp, allocs float64
	hasMem            bool
	extra             []string // other metrics, "value unit"
}

var benchRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func parseBench(data []byte) []benchLine {
	var out []benchLine
	pkg := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := sc.Text()
		if p, ok := strings.CutPrefix(l, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(p), "github.com/interlingua-dev/interlingua/")
			continue
		}
		m := benchRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		b := benchLine{pkg: pkg, name: m[1]}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				b.nsOp = v
			case "B/op":
				b.bOp, b.hasMem = v, true
			case "allocs/op":
				b.allocs = v
			default:
				b.extra = append(b.extra, f[i]+" "+f[i+1])
			}
		}
		out = append(out, b)
	}
	return out
}

// converterPkgs are the adapters whose per-delta benchmarks the converter
// target applies to.
var converterPkgs = []string{"adapters/triton", "adapters/evergreen", "adapters/glide", "adapters/xmlaction", "adapters/agent"}

func isConverter(b benchLine) bool {
	return slices.Contains(converterPkgs, b.pkg) && strings.Contains(b.name, "Delta")
}

func converterTargets(convs []benchLine) []target {
	if len(convs) == 0 {
		return []target{{what: "every converter per text delta, each way", goal: "≤ 1 µs and ≤ 2 allocs", got: "converter benchmarks not run (make bench runs them)"}}
	}
	var out []target
	for _, b := range convs {
		if !isConverter(b) {
			continue
		}
		out = append(out, target{
			what: fmt.Sprintf("converter %s %s", strings.TrimPrefix(b.pkg, "adapters/"), strings.TrimPrefix(b.name, "Benchmark")),
			goal: "≤ 1 µs, ≤ 2 allocs", got: fmt.Sprintf("%s ns, %g allocs", trim(b.nsOp), b.allocs),
			ok: b.nsOp <= 1000 && b.allocs <= 2, measured: true,
		})
	}
	for _, p := range converterPkgs {
		for _, dir := range []struct {
			name  string
			verbs []string
		}{{"decode", []string{"Decode", "Assemble"}}, {"encode", []string{"Encode", "Render"}}} {
			has := false
			for _, b := range convs {
				if b.pkg != p || !isConverter(b) {
					continue
				}
				for _, v := range dir.verbs {
					has = has || strings.HasPrefix(b.name, "Benchmark"+v)
				}
			}
			if !has {
				out = append(out, target{what: "converter " + strings.TrimPrefix(p, "adapters/") + " " + dir.name, goal: "≤ 1 µs, ≤ 2 allocs",
					got: "no per-delta benchmark (Benchmark" + dir.verbs[0] + "*Delta*) in the package"})
			}
		}
	}
	return out
}

func writeConverters(w io.Writer, convs []benchLine) {
	fmt.Fprintln(w, "## Converters")
	fmt.Fprintln(w)
	if len(convs) == 0 {
		fmt.Fprintln(w, "Not run: `make bench` passes the output of `go test -bench . -benchmem` over the adapters with --converters.")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintln(w, "`go test -run '^$' -bench . -benchmem`; per-delta benchmarks of the adapters (names with Delta) are held to ≤ 1 µs and ≤ 2 allocations per text delta; the others are listed for reference.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| package | benchmark | ns/op | B/op | allocs/op | other | target |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|---|")
	for _, b := range convs {
		mark := ""
		if isConverter(b) {
			mark = "met"
			if b.nsOp > 1000 || b.allocs > 2 {
				mark = "**MISSED**"
			}
		}
		mem, allocs := "", ""
		if b.hasMem {
			mem, allocs = num(b.bOp), fmt.Sprint(b.allocs)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", b.pkg, strings.TrimPrefix(b.name, "Benchmark"), trim(b.nsOp), mem, allocs, strings.Join(b.extra, ", "), mark)
	}
	fmt.Fprintln(w)
}

type convProfile struct{ name, top string }

// converterProfiles re-runs each missed converter benchmark with an
// allocation and CPU profile and returns the top entries (needs the go
// command and the source tree, as make bench has).
func converterProfiles(ctx context.Context, convs []benchLine, dir string, progress io.Writer) []convProfile {
	if _, err := exec.LookPath("go"); err != nil {
		return nil
	}
	var out []convProfile
	for _, b := range convs {
		if !isConverter(b) || (b.nsOp <= 1000 && b.allocs <= 2) {
			continue
		}
		if _, err := os.Stat(b.pkg); err != nil {
			continue
		}
		base := filepath.Join(dir, strings.ReplaceAll(b.pkg, "/", "-")+"-"+b.name)
		fmt.Fprintf(progress, "bench: profiling %s %s\n", b.pkg, b.name)
		cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^"+b.name+"$", "-benchmem", "-benchtime", "1s",
			"-cpuprofile", base+".cpu.prof", "-memprofile", base+".mem.prof", "-o", base+".test", "./"+b.pkg)
		if outb, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(progress, "bench: %v: %s\n", err, outb)
			continue
		}
		top := pprofTop(base+".mem.prof", "alloc_objects") + "\n" + pprofTop(base+".cpu.prof", "")
		out = append(out, convProfile{name: b.pkg + " " + b.name + " (allocations by count, then CPU)", top: top})
	}
	return out
}

// pprofTop is `go tool pprof -top` of a profile, its first entries.
func pprofTop(path, index string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	args := []string{"tool", "pprof", "-top", "-nodecount=14"}
	if index != "" {
		args = append(args, "-sample_index="+index)
	}
	out, err := exec.Command("go", append(args, path)...).Output()
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Time:") || l == "" {
			continue
		}
		if len(l) > 160 {
			l = l[:160] + "…"
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
