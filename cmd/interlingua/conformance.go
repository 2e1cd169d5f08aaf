package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/interlingua-dev/interlingua/conformance/runner"
)

// listFlag collects a repeatable (or comma-separated) flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

const conformanceUsage = `Usage: interlingua conformance [flags]

Runs the conformance suite (conformance/cases, embedded in this binary).

Modes:
  --mode bridge    every frontend x every backend pair through an in-process
                   instance; upstreams are the reference peers, driven by each
                   case's response definition (the default)
  --mode cluster   the same across two instances and a NATS server: clients
                   talk to an instance that hosts no backend
  --mode server    one protocol's cases against any server, as its client:
                   --protocol P --target URL [--header 'K: V'] [--model M].
                   Without --model the server must be a cooperating one: it
                   serves the cases' targets (echo, stream, demo-agent, as
                   'interlingua serve' does by default) with their fault
                   parameters. With --model NAME any server of the protocol
                   is tested with that model: the cases needing fault
                   injection or a scripted answer are skipped (with the
                   reason, shown by -v and in reports), and the others check
                   the outcome and that text came, not what it says. A
                   server that does not answer at all fails.

Case names are hierarchical: bridge/frontend:triton/backend:evergreen/unicode-split,
server/frontend:triton/text-stream. Patterns: * within a segment, ** across
segments; a pattern matches the names below it too.

Exit status: 0 when every case passed (known-failing ones may fail), 1 when
one failed or a known-failing one passed, 2 when it could not run (bad usage,
a server that does not answer).

Flags:
`

func conformanceMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		mode      = fs.String("mode", "bridge", "`mode`: bridge, cluster or server")
		protocol  = fs.String("protocol", "", "server mode: the frontend `protocol` to test ("+strings.Join(runner.FrontendProtocols(), ", ")+")")
		target    = fs.String("target", "", "server mode: the server's base `URL`, e.g. http://127.0.0.1:8080")
		known     = fs.String("known-failing", "", "`file` of case patterns expected to fail (one per line, # comments); they still run, and a pass is reported")
		trace     = fs.Bool("trace", false, "record wire bytes on both sides and the canonical events of each case, with relative timestamps (runs one case at a time); shown for failures, for every case with -v")
		report    = fs.String("report", "", "write a report to stdout: `format` junit, markdown (matrix, coverage, degradations), matrix (the table alone) or json (default: a line per failure and a summary)")
		verbose   = fs.Bool("v", false, "print every case's outcome as it finishes")
		parallel  = fs.Int("parallel", 0, "cases run at once (default 2 x GOMAXPROCS)")
		timeout   = fs.Duration("case-timeout", 60*time.Second, "bound on one case")
		natsURL   = fs.String("nats-url", "", "cluster mode: an external NATS `url` (JetStream on); empty starts one in-process")
		logLevel  = fs.String("log-level", "", "instances' log `level` to stderr (debug, info, warn, error); default discards")
		runs      listFlag
		skips     listFlag
		frontends listFlag
		backends  listFlag
		headers   listFlag
	)
	fs.Var(&runs, "run", "run only cases matching `pattern` (repeatable, comma-separated)")
	fs.Var(&skips, "skip", "skip cases matching `pattern` (repeatable, comma-separated)")
	fs.Var(&frontends, "frontend", "bridge/cluster: only these frontend `protocols` (repeatable, comma-separated)")
	fs.Var(&headers, "header", "server mode: a header `'K: V'` sent with every request (repeatable), e.g. 'Authorization: Bearer $KEY'")
	model := fs.String("model", "", "server mode: the `model` (target) to use on a server that is not ours; cases needing a cooperating server are skipped")
	fs.Var(&backends, "backend", "bridge/cluster: only these backend `protocols` (repeatable, comma-separated)")
	fs.Usage = func() {
		fmt.Fprint(stderr, conformanceUsage)
		fs.PrintDefaults()
	}
	if status, ok := parseFlags(fs, args, stderr); !ok {
		return status
	}
	switch *report {
	case "", "junit", "markdown", "matrix", "json":
	default:
		fmt.Fprintf(stderr, "interlingua conformance: --report %q: not junit, markdown, matrix or json\n", *report)
		return 2
	}
	hdr, err := parseHeaders(headers)
	if err != nil {
		fmt.Fprintln(stderr, "interlingua conformance:", err)
		return 2
	}
	opts := runner.Options{
		Mode: *mode, Protocol: *protocol, Target: *target, Headers: hdr, Model: *model, Run: runs, Skip: skips,
		Frontends: split(frontends), Backends: split(backends),
		Trace: *trace, Parallel: *parallel, CaseTimeout: *timeout, NATSURL: *natsURL,
	}
	if *mode == runner.ModeServer && (*protocol == "" || *target == "") {
		fmt.Fprintln(stderr, "interlingua conformance: --mode server needs --protocol and --target")
		return 2
	}
	if *known != "" {
		f, err := os.Open(*known)
		if err != nil {
			fmt.Fprintln(stderr, "interlingua conformance:", err)
			return 2
		}
		opts.KnownFailing, err = runner.ReadPatterns(f)
		f.Close()
		if err != nil {
			fmt.Fprintln(stderr, "interlingua conformance:", err)
			return 2
		}
	}
	if *logLevel != "" {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
			fmt.Fprintf(stderr, "interlingua conformance: --log-level %q: %v\n", *logLevel, err)
			return 2
		}
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	}
	if *verbose {
		opts.Progress = stderr
	}
	return runConformance(opts, *report, *trace && *verbose, stdout, stderr)
}

// parseHeaders reads --header values, each "Name: value".
func parseHeaders(vals []string) (http.Header, error) {
	h := http.Header{}
	for _, v := range vals {
		name, value, ok := strings.Cut(v, ":")
		if name = strings.TrimSpace(name); !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("--header %q: want 'Name: value'", v)
		}
		h.Add(name, strings.TrimSpace(value))
	}
	return h, nil
}

// runConformance runs the suite and writes its report in the format
// asked: 0 when every case passed, 1 when one failed, 2 when it could not
// run.
func runConformance(opts runner.Options, report string, traces bool, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rep, err := runner.Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "interlingua conformance:", err)
		return 2
	}
	switch report {
	case "junit":
		err = runner.WriteJUnit(stdout, rep)
	case "markdown":
		err = runner.WriteMarkdown(stdout, rep)
	case "matrix":
		err = runner.WriteMatrix(stdout, rep)
	case "json":
		err = runner.WriteJSON(stdout, rep)
	default:
		err = runner.WriteText(stdout, rep, traces)
	}
	if err != nil {
		fmt.Fprintln(stderr, "interlingua conformance:", err)
		return 2
	}
	if report != "" {
		// The report is on stdout; the summary goes to stderr.
		_ = runner.WriteSummary(stderr, rep)
	}
	if rep.Failed() > 0 {
		return 1
	}
	return 0
}

func split(l []string) []string {
	var out []string
	for _, v := range l {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
