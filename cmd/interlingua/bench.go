package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/interlingua-dev/interlingua/bench"
	"github.com/interlingua-dev/interlingua/internal/json"
)

const benchUsage = `Usage:
  interlingua bench --pair FRONTEND:BACKEND --streams N --deltas M [--rate R [--spread D]] [--json]
  interlingua bench --idle N [--json]
  interlingua bench --cluster --streams N --deltas M [--json]
  interlingua bench --report FILE [--converters FILE] [--rounds N] [--quick]

--pair drives N concurrent streaming runs of M text deltas through an
in-process instance (frontend protocol FRONTEND, backend protocol BACKEND)
and, alternating round by round, the same load straight at BACKEND's
reference peer (when FRONTEND = BACKEND), and reports both side by side.
FRONTEND: %s.
BACKEND: %s
(those with an upstream peer have a direct path). Output: a markdown
table, or with --json one object with pair,
streams, deltas, direct (null without a direct path), bridged (each
deltas_per_sec, ttfd_p50_us, ttfd_p99_us, delta_p50_us, delta_p99_us,
rss_bytes, ...), throughput_ratio, added_delta_p50_us, added_delta_p99_us.
With --proxy (FRONTEND = BACKEND) a third path joins the alternation: the
peer behind a reverse proxy that translates nothing (net/http/httputil),
reported as proxy and proxy_added_*: what any hop costs on this machine.

--idle opens N idle streaming connections (half SSE, half WebSocket) to a
child "interlingua serve" and reports its RSS. --cluster measures two
instances joined by NATS. --report runs the standard matrix and writes
the benchmark report (make bench).

Flags:
`

// benchMain runs `interlingua bench`.
func benchMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		pair       = fs.String("pair", "", "`FRONTEND:BACKEND` protocol pair")
		streams    = fs.Int("streams", 1, "concurrent `streams`")
		deltas     = fs.Int("deltas", 1000, "text `deltas` per stream")
		rate       = fs.Float64("rate", 0, "pace the load at `R` deltas/s across all streams (0: unpaced)")
		spread     = fs.Duration("spread", 0, "with --rate, start the streams evenly over `D` (default: 1/R apart)")
		rounds     = fs.Int("rounds", 3, "measured `rounds` per path, alternating direct and bridged (with --report: interleaved runs of each load a verdict reads, whose medians it reports)")
		warmup     = fs.Int("warmup", 1, "unmeasured warm-up `rounds` per path (-1: none)")
		text       = fs.String("delta-text", "tok ", "`text` of each delta")
		procs      = fs.Int("procs", 0, "GOMAXPROCS for the run (0: unchanged)")
		timeout    = fs.Duration("timeout", 10*time.Minute, "bound on one round")
		asJSON     = fs.Bool("json", false, "print one JSON object instead of a markdown table")
		cpuProf    = fs.String("cpuprofile", "", "write a CPU profile of one more bridged round, left out of the figures (with --cluster: of the last saturated round), to `file`")
		memProf    = fs.String("memprofile", "", "write an allocation profile of the run to `file`")
		traceOut   = fs.String("trace", "", "write an execution trace (go tool trace) of one more bridged round, left out of the figures, to `file`")
		idle       = fs.Int("idle", 0, "open `N` idle streaming connections to a child interlingua serve")
		cluster    = fs.Bool("cluster", false, "measure two instances over NATS")
		report     = fs.String("report", "", "run the standard matrix and write the report to `file`")
		converters = fs.String("converters", "", "with --report: `file` holding go test -bench -benchmem output of the converters")
		quick      = fs.Bool("quick", false, "with --report: a reduced matrix (smoke test)")
		external   = fs.Bool("external", false, "run the server as a child \"interlingua serve\" so its CPU, RSS and GC are its own (the clients, peer and proxy stay in this process)")
		serverPros = fs.Int("server-procs", 0, "with --external: the server's `GOMAXPROCS`")
		serverBin  = fs.String("server-binary", "", "with --external: the `executable` the server runs (default this one): two builds' servers measured under the same clients, peer and proxy")
		fabricExp  = fs.String("fabric-experiment", "", "measure with the replay log changed: sync-persist, async-persist or no-replay (not the configuration as given)")
		proxy      = fs.Bool("proxy", false, "with a direct path: also measure the load through a reverse proxy that translates nothing (net/http/httputil), what any hop costs here")
		profDir    = fs.String("profile-dir", "", "with --report: keep the profiles in `folder` (default a temporary folder)")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, benchUsage, strings.Join(bench.Frontends, ", "), strings.Join(bench.Backends, ", "))
		fs.PrintDefaults()
	}
	if status, ok := parseFlags(fs, args, stderr); !ok {
		return status
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var (
		out any
		md  func(io.Writer)
		err error
	)
	switch {
	case *report != "":
		ro := bench.ReportOptions{Path: *report, Converters: *converters, Quick: *quick, ProfileDir: *profDir, Progress: stderr}
		if flagGiven(fs, "rounds") { // the report's interleaved runs (default 3)
			ro.Rounds = *rounds
		}
		err = bench.WriteReport(ctx, ro)
		if err == nil {
			fmt.Fprintln(stdout, "wrote", *report)
			return 0
		}
	case *idle > 0:
		var r *bench.IdleResult
		r, err = bench.Idle(ctx, bench.IdleOptions{Conns: *idle})
		out, md = r, func(w io.Writer) { bench.WriteIdleMarkdown(w, r) }
	case *cluster:
		co := bench.ClusterOptions{Rounds: *rounds, CPUProfile: *cpuProf}
		// Sizes only when given: the defaults are the cluster's own.
		if flagGiven(fs, "streams") {
			co.Streams = *streams
		}
		if flagGiven(fs, "deltas") {
			co.Deltas = *deltas
		}
		var r *bench.ClusterResult
		r, err = bench.Cluster(ctx, co)
		out, md = r, func(w io.Writer) { bench.WriteClusterMarkdown(w, r) }
	case *pair != "":
		fe, be, ok := strings.Cut(*pair, ":")
		if !ok {
			fmt.Fprintf(stderr, "interlingua bench: --pair %q: want FRONTEND:BACKEND\n", *pair)
			return 2
		}
		var r *bench.Result
		r, err = bench.Run(ctx, bench.Options{Frontend: fe, Backend: be, Streams: *streams, Deltas: *deltas,
			Rate: *rate, Spread: *spread, Rounds: *rounds, Warmup: *warmup, DeltaText: *text, Procs: *procs, Timeout: *timeout,
			CPUProfile: *cpuProf, MemProfile: *memProf, Trace: *traceOut, Fabric: *fabricExp, Proxy: *proxy,
			External: *external, ServerProcs: *serverPros, Binary: *serverBin})
		out, md = r, func(w io.Writer) { bench.WriteMarkdown(w, r) }
	default:
		fs.Usage()
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "interlingua bench:", err)
		return 1
	}
	return writeBenchResult(stdout, stderr, *asJSON, out, md)
}

// writeBenchResult prints a measurement as one indented JSON object, or as
// markdown through md.
func writeBenchResult(stdout, stderr io.Writer, asJSON bool, out any, md func(io.Writer)) int {
	if !asJSON {
		md(stdout)
		return 0
	}
	b, err := json.Marshal(out, benchJSON)
	if err == nil {
		_, err = stdout.Write(append(b, '\n'))
	}
	if err != nil {
		fmt.Fprintln(stderr, "interlingua bench:", err)
		return 1
	}
	return 0
}

// benchJSON prints --json output as encoding/json's Encoder with
// SetIndent("", "  ") did, which the scripts reading it were written
// against: bench's omitempty tags leave out zeros (spread_ms), a nil slice
// is null, <, >, &, U+2028 and U+2029 are escaped, and invalid UTF-8 in an
// error's text is replaced, not a failure to print the figures.
var benchJSON = json.JoinOptions(json.WithIndent("  "), json.OmitEmptyWithLegacySemantics(true),
	json.FormatNilSliceAsNull(true), json.EscapeForHTML(true), json.EscapeForJS(true), json.AllowInvalidUTF8(true))

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
