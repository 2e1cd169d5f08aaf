package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/interlingua-dev/interlingua/protocols"
)

// The report's information: the machine, the converter benchmarks and
// every load's detail, below the verdicts.

// activeFrontends are the frontends of the 1,000-stream loads: the
// reference one, then those that cap their connections (Load.MaxStreams)
// and take 1,000.
func activeFrontends() []string {
	out := []string{referenceFrontend().Name}
	for _, fe := range Frontends {
		if n := frontendLoad(fe).MaxStreams; n >= 1000 && fe != out[0] {
			out = append(out, fe)
		}
	}
	return out
}

// titles joins the protocols' Load titles ("A and B").
func titles(names []string) string {
	var t []string
	for _, n := range names {
		t = append(t, protocols.Get(n).Load.Title)
	}
	if len(t) < 2 {
		return strings.Join(t, "")
	}
	return strings.Join(t[:len(t)-1], ", ") + " and " + t[len(t)-1]
}

// loadGroups are the sections of the load matrix, in the order written,
// each with what its figures mean.
var loadGroups = []struct{ id, title, text string }{
	{"ratio", "Bridge vs direct, unpaced", "Same protocol on both sides, so the client can call the peer directly: the ratio is what the hop costs in throughput. Unpaced, so latency figures here are queueing, not service time. Each table is the run whose bridged ÷ hop throughput ratio is the median of the report's runs."},
	{"paced", "Added latency at 10,000 deltas/s", "100 streams, each paced by the peer at one delta per 10 ms (100 deltas/s, a fast LLM). The peer stamps each delta as it writes it; latency is stamp to client parse. The peers pace with Go timers, which a mostly idle process fires at the netpoller's millisecond granularity, so the streams' deltas leave in bunches of about ten every millisecond, as a batching model server's decode steps do; latency includes the wait behind the rest of a bunch at each hop. Each table is the run whose bridged added p99 is the median of the report's runs."},
	{"spread", "Added latency at 10,000 deltas/s, starts spread over 200 ms", "The paced load above with the 100 streams started 2 ms apart (500 starts a second) instead of 0.1 ms apart: a run's time to first delta while the others stream, rather than behind 99 other starts."},
	{"start", "What a run start costs", "100 streams of one delta each, started together, five rounds a path. With one delta a stream, CPU s / M deltas reads as µs of CPU per run (process-wide: client, peer and, bridged, the instance). A run's time to first delta is mostly its wait behind the runs starting with it: 100 starts on 2 cores wait on the order of 100 × the CPU of a start ÷ 2, so an added TTFD p99 of 1 ms at this concurrency needs the instance to start a run in about 20 µs of CPU."},
	{"one", "One stream, as fast as possible", "The reference frontend (%[1]s) from the scripted backend. First with the server as a child `interlingua serve` limited to one core (GOMAXPROCS 1) and the client in the bench process; then in process, where with GOMAXPROCS 1 the raw client shares the core with the server."},
	{"fabric", "What the replay log costs", "The same load with the instance's JetStream replay stream as configured (persist_mode async by default: written in batches), recreated with persist_mode sync (one write per event, JetStream's default), and deleted (events still published to NATS, not stored). Experiments only: the bridge's configuration is not changed."},
	{"nopeer", "Every frontend from the scripted backend", "No direct path; delta latency is the interval between deltas at the client. A frontend that buffers a bounded number of events per run (%[2]s) runs twice: at 20,000 deltas per stream an unpaced run gets more than that buffer ahead of the reader, which is then cut off with an error, as the design's slow-consumer rule says; at its shorter length (Load.MaxUnpacedDeltas) it is not."},
	{"cross", "Cross-protocol pairs", "Different protocols on the two sides, so there is no direct path; latency is from the peer's send stamp. Each line is the run whose CPU per delta is the median of the report's runs; process-wide figures."},
	{"active", "1,000 concurrently active streams", ""},
}

// writeLoad writes the load matrix's tables, then the idle and cluster
// measurements.
func (m *measurements) writeLoad(w io.Writer) {
	fmt.Fprintln(w, "## Load: frontend:backend pairs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, methodText)
	for _, g := range loadGroups {
		fmt.Fprintf(w, "### %s\n\n", g.title)
		if g.text != "" {
			fmt.Fprintln(w, groupText(g.text))
			fmt.Fprintln(w)
		}
		if g.id == "cross" {
			writeCrossDetail(w, m.matrix.all)
			continue
		}
		for _, s := range m.matrix.all {
			if s.group != g.id {
				continue
			}
			if s.res == nil {
				fmt.Fprintf(w, "#### %s:%s\n\n%s\n\n", s.opts.Frontend, s.opts.Backend, errText(s.err))
				continue
			}
			writeSubsection(w, func(b io.Writer) { WriteMarkdown(b, s.res) })
		}
	}
	fmt.Fprintln(w, "## Idle connections")
	fmt.Fprintln(w)
	if m.idle != nil {
		writeSubsection(w, func(b io.Writer) { WriteIdleMarkdown(b, m.idle) })
	} else {
		fmt.Fprintf(w, "Failed: %v\n\n", m.idleErr)
	}
	fmt.Fprintln(w, "## Two instances")
	fmt.Fprintln(w)
	if m.cluster != nil {
		writeSubsection(w, func(b io.Writer) { WriteClusterMarkdown(b, m.cluster) })
	} else {
		fmt.Fprintf(w, "Failed: %v\n\n", m.clusterErr)
	}
}

// groupText fills a group's text with the reference frontend's title (%[1]s)
// and the titles of the frontends with a bounded buffer per run (%[2]s).
func groupText(text string) string {
	if !strings.Contains(text, "%[") {
		return text
	}
	var bounded []string
	for _, fe := range Frontends {
		if frontendLoad(fe).MaxUnpacedDeltas > 0 {
			bounded = append(bounded, fe)
		}
	}
	return fmt.Sprintf(text, referenceFrontend().Load.Title, cmp.Or(titles(bounded), "none"))
}

// writeSubsection writes a table written for a level-3 heading one level
// down, under the report's section.
func writeSubsection(w io.Writer, write func(io.Writer)) {
	var b bytes.Buffer
	write(&b)
	w.Write(bytes.Replace(b.Bytes(), []byte("### "), []byte("#### "), 1))
}

const methodText = `Each table compares the same load sent straight to the upstream peer ("direct") and through an in-process
Interlingua instance ("bridged": frontend, bridge with its embedded NATS and JetStream replay log, backend), in
alternating rounds within one process. Process-wide figures (CPU, allocations, RSS) include the clients and the
peers, so the bridge's cost is the bridged-minus-direct difference. Latency per delta is measured from the
peer's send stamp to the client's parse; TTFD from the client's request to its first delta.

Where the two sides speak the same protocol, a third path joins the alternation: the peer behind a reverse
proxy that translates nothing ("no-op proxy": the standard library's net/http/httputil.ReverseProxy, HTTP/1.1
with WebSocket upgrades, or h2c for gRPC, writing each chunk on as soon as it is read). It does
what any hop must (accept the connection, open one upstream, and per delta a socket read, a socket write and
the wake-ups between them) and nothing else, so "proxy vs direct" is what a hop costs on this machine, and
bridged minus proxy is what translating, the replay log and the rest of the instance add to it.`

func errText(err error) string {
	if err == nil {
		return "not run"
	}
	return "failed: " + err.Error()
}

// writeMachine describes where the figures come from.
func writeMachine(w io.Writer, load [3]float64, rtt [3]float64) {
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
	fmt.Fprintf(w, "- GC: GOGC %s, GOMEMLIMIT %s.\n", cmp.Or(os.Getenv("GOGC"), "100"), cmp.Or(os.Getenv("GOMEMLIMIT"), "none"))
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

func writeConverters(w io.Writer, convs []benchLine) {
	fmt.Fprintln(w, "## Converters")
	fmt.Fprintln(w)
	if len(convs) == 0 {
		fmt.Fprintln(w, "Not run: `make bench` passes the output of `go test -bench . -benchmem` over the adapters with --converters.")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintln(w, "`go test -run '^$' -bench . -benchmem`, for information: a converter's cost shows in the ratios above, where it is paid beside everything else a delta costs.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| package | benchmark | ns/op | B/op | allocs/op | other |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|")
	for _, b := range convs {
		mem, allocs := "", ""
		if b.hasMem {
			mem, allocs = num(b.bOp), fmt.Sprint(b.allocs)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", b.pkg, strings.TrimPrefix(b.name, "Benchmark"), trim(b.nsOp), mem, allocs, strings.Join(b.extra, ", "))
	}
	fmt.Fprintln(w)
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

// writeCrossDetail writes the cross-protocol pairs' figures as one table.
func writeCrossDetail(w io.Writer, all []*scenario) {
	fmt.Fprintln(w, "| pair | streams × deltas | deltas/s | TTFD p99 (µs) | delta latency p99 (µs) | CPU s / M deltas | heap allocs / delta | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range all {
		if s.group != "cross" {
			continue
		}
		pair := s.opts.Frontend + ":" + s.opts.Backend
		if s.res == nil {
			fmt.Fprintf(w, "| %s | %d × %d | %s | | | | | |\n", pair, s.opts.Streams, s.opts.Deltas, errText(s.err))
			continue
		}
		b := s.res.Bridged
		fmt.Fprintf(w, "| %s | %d × %d | %s | %s | %s | %.2f | %.1f | %d |\n", pair, s.opts.Streams, s.opts.Deltas,
			num(b.DeltasPerSec), trim(b.TTFDP99us), trim(b.DeltaP99us), b.CPUSecPerMDelta, b.AllocsPerDelta, b.Errors)
	}
	fmt.Fprintln(w)
}
