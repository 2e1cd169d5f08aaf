// Package runner is the conformance suite's runner: it loads the cases,
// builds the system under test for a mode, runs every case (or the
// frontend × backend matrix of them), compares each client-side
// transcript with the one derived from the case's response definition and
// reports the results (text, JUnit, Markdown, JSON).
//
// Modes:
//
//   - bridge: every frontend × every backend pair through one in-process
//     Interlingua instance. The backends' upstreams are the reference
//     peers (Triton, Glide, Evergreen, agent) and the in-process canonical
//     upstream, all driven by the case's response definition.
//   - cluster: the same across two instances joined by a NATS server: the
//     clients talk to one that hosts no backend, so every run is placed on
//     the other over NATS.
//   - server: one protocol's cases against any server, as that protocol's
//     client. The server must serve the cases' request targets (the
//     scripted targets echo, stream and demo-agent of `interlingua serve`)
//     with the request's fault parameters.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// The modes.
const (
	ModeBridge  = "bridge"
	ModeCluster = "cluster"
	ModeServer  = "server"
)

// Options configure a run of the suite.
type Options struct {
	// Mode is bridge (default), cluster or server.
	Mode string
	// Protocol is the frontend protocol of server mode.
	Protocol string
	// Target is the server's base URL in server mode.
	Target string
	// Headers are sent with every client request (server mode: the
	// credentials of a server under test).
	Headers http.Header
	// Model is the target (model) to use on a server that is not ours, in
	// server mode. With it set, the cases that need a cooperating server
	// (fault injection, a scripted answer) are skipped, and the others
	// compare the transcript's shape (outcome, text present), not its text:
	// a real model does not echo the prompt.
	Model string
	// Frontends and Backends restrict the matrix (default: all).
	Frontends, Backends []string
	// Run and Skip are patterns on case names (match.go).
	Run, Skip []string
	// KnownFailing are patterns of cases expected to fail: they still run;
	// a pass is reported as unexpected.
	KnownFailing []string
	// Trace records wire bytes and canonical events per case (and runs one
	// case at a time).
	Trace bool
	// Parallel bounds the cases run at once. Default 2 × GOMAXPROCS.
	Parallel int
	// CaseTimeout bounds one case. Default 60s.
	CaseTimeout time.Duration
	// NATSURL is the external NATS server of cluster mode; empty starts
	// one in-process.
	NATSURL string
	// Cases are the cases to run. Default: the embedded suite.
	Cases []*cases.Case
	// Logger receives the instances' logs. Default: discarded.
	Logger *slog.Logger
	// Progress, when set, gets a line per finished case.
	Progress io.Writer
	// backendOptions are added to the options of a protocol's backends in
	// bridge and cluster modes, by protocol (tests: the agent backends'
	// transport).
	backendOptions map[string]map[string]any
}

// Outcomes of a case.
const (
	Pass  = "pass"
	Fail  = "fail"
	Skip  = "skip"
	XFail = "known-failing"
	XPass = "unexpected-pass"
)

// Result is one case's outcome on one pair.
type Result struct {
	// Name is the hierarchical name, e.g.
	// bridge/frontend:triton/backend:glide/unicode-split.
	Name     string
	Frontend string
	Backend  string
	Case     string
	Features []string
	Outcome  string
	// Message says why the case failed or was skipped.
	Message  string
	Want     *cv1.Transcript
	Got      *cv1.Transcript
	Trace    string
	Duration time.Duration
}

// Failed reports whether the result fails the suite (a failure or an
// unexpected pass).
func (r *Result) Failed() bool { return r.Outcome == Fail || r.Outcome == XPass }

// Report is a whole run's results.
type Report struct {
	Mode    string
	Results []*Result
	// Cases are the cases that ran, in order.
	Cases    []*cases.Case
	Duration time.Duration
}

// Failed counts the results that fail the suite.
func (r *Report) Failed() int {
	n := 0
	for _, res := range r.Results {
		if res.Failed() {
			n++
		}
	}
	return n
}

// Count counts the results with an outcome.
func (r *Report) Count(outcome string) int {
	n := 0
	for _, res := range r.Results {
		if res.Outcome == outcome {
			n++
		}
	}
	return n
}

// job is one case on one pair.
type job struct {
	name     string
	frontend string
	backend  string
	c        *cases.Case
}

// Run runs the suite and returns its report; an error means the suite
// could not run (bad options, the system under test did not start).
func Run(ctx context.Context, opts Options) (*Report, error) {
	start := time.Now()
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	run, err := compilePatterns(opts.Run)
	if err != nil {
		return nil, fmt.Errorf("--run: %w", err)
	}
	skip, err := compilePatterns(opts.Skip)
	if err != nil {
		return nil, fmt.Errorf("--skip: %w", err)
	}
	known, err := compilePatterns(opts.KnownFailing)
	if err != nil {
		return nil, fmt.Errorf("--known-failing: %w", err)
	}
	jobs, err := plan(opts)
	if err != nil {
		return nil, err
	}
	var selected []job
	for _, j := range jobs {
		if (len(run) == 0 || run.any(j.name)) && !skip.any(j.name) {
			selected = append(selected, j)
		}
	}
	rep := &Report{Mode: opts.Mode}
	seenCase := map[string]bool{}
	for _, j := range selected {
		if !seenCase[j.c.GetName()] {
			seenCase[j.c.GetName()] = true
			rep.Cases = append(rep.Cases, j.c)
		}
	}
	if len(selected) == 0 {
		rep.Duration = time.Since(start)
		return rep, nil
	}
	var e env
	switch opts.Mode {
	case ModeServer:
		se := &serverEnv{url: strings.TrimRight(opts.Target, "/"), model: opts.Model}
		if err := se.reachable(ctx, opts.Headers); err != nil {
			return nil, err
		}
		e = se
	default:
		st, err := startStack(stackOptions{cluster: opts.Mode == ModeCluster, natsURL: opts.NATSURL, cases: rep.Cases, trace: opts.Trace, log: opts.Logger,
			backendOptions: opts.backendOptions})
		if err != nil {
			return nil, fmt.Errorf("starting the system under test: %w", err)
		}
		defer st.close()
		e = st
	}
	rep.Results = (&executor{env: e, opts: opts}).runAll(ctx, selected, known)
	rep.Duration = time.Since(start)
	return rep, nil
}

// defaults fills the options left zero.
func (opts *Options) defaults() error {
	if opts.Mode == "" {
		opts.Mode = ModeBridge
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 2 * runtime.GOMAXPROCS(0)
	}
	if opts.Trace {
		opts.Parallel = 1
	}
	if opts.CaseTimeout <= 0 {
		opts.CaseTimeout = 60 * time.Second
	}
	if opts.Cases == nil {
		cs, err := cases.Load()
		if err != nil {
			return err
		}
		opts.Cases = cs
	}
	return nil
}

// runAll runs the jobs, opts.Parallel at a time, and returns their
// results in the jobs' order; known marks the known-failing ones.
func (x *executor) runAll(ctx context.Context, selected []job, known patterns) []*Result {
	opts := x.opts
	results := make([]*Result, len(selected))
	sem := make(chan struct{}, opts.Parallel)
	var wg sync.WaitGroup
	var progress sync.Mutex
	for i, j := range selected {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res := x.run(ctx, j)
			if known.any(j.name) {
				switch res.Outcome {
				case Fail:
					res.Outcome = XFail
				case Pass:
					res.Outcome, res.Message = XPass, "listed as known-failing, but passed"
				}
			}
			results[i] = res
			if opts.Progress != nil {
				progress.Lock()
				fmt.Fprintf(opts.Progress, "%-15s %s (%s)\n", res.Outcome, res.Name, res.Duration.Round(time.Millisecond))
				if res.Failed() && res.Message != "" {
					fmt.Fprintf(opts.Progress, "                %s\n", res.Message)
				}
				progress.Unlock()
			}
		}()
	}
	wg.Wait()
	return results
}

// plan lists the jobs of a mode.
func plan(opts Options) ([]job, error) {
	var out []job
	switch opts.Mode {
	case ModeServer:
		if opts.Target == "" {
			return nil, errors.New("server mode needs --target URL")
		}
		p := profiles[opts.Protocol]
		if p == nil || p.Front == nil {
			return nil, fmt.Errorf("--protocol %q: not a frontend protocol (known: %s)", opts.Protocol, strings.Join(frontendProtocols, ", "))
		}
		for _, c := range opts.Cases {
			if applies(c, opts.Protocol, "") {
				out = append(out, job{name: ModeServer + "/frontend:" + opts.Protocol + "/" + c.GetName(), frontend: opts.Protocol, backend: "server", c: c})
			}
		}
		return out, nil
	case ModeBridge, ModeCluster:
	default:
		return nil, fmt.Errorf("--mode %q: not bridge, cluster or server", opts.Mode)
	}
	fes := opts.Frontends
	if len(fes) == 0 {
		fes = frontendProtocols
	}
	bes := opts.Backends
	if len(bes) == 0 {
		bes = backendProtocols
	}
	for _, f := range fes {
		if p := profiles[f]; p == nil || p.Front == nil {
			return nil, fmt.Errorf("frontend %q: unknown (known: %s)", f, strings.Join(frontendProtocols, ", "))
		}
	}
	for _, b := range bes {
		if p := profiles[b]; p == nil || p.Back == nil {
			return nil, fmt.Errorf("backend %q: unknown (known: %s)", b, strings.Join(backendProtocols, ", "))
		}
	}
	for _, f := range fes {
		for _, b := range bes {
			for _, c := range opts.Cases {
				if applies(c, f, b) {
					out = append(out, job{name: fmt.Sprintf("%s/frontend:%s/backend:%s/%s", opts.Mode, f, b, c.GetName()), frontend: f, backend: b, c: c})
				}
			}
		}
	}
	return out, nil
}

// applies reports whether case c runs on a pair (backend "" in server
// mode): common cases everywhere, a protocol's own cases on its frontend,
// each restricted by the case's frontends and backends lists.
func applies(c *cases.Case, fe, be string) bool {
	if c.Folder != cases.Common && c.Folder != fe {
		return false
	}
	if len(c.GetFrontends()) > 0 && !slices.Contains(c.GetFrontends(), fe) {
		return false
	}
	if be != "" && len(c.GetBackends()) > 0 && !slices.Contains(c.GetBackends(), be) {
		return false
	}
	if be == "" && c.GetRequest().GetTarget() == "" {
		return false // server mode needs a target the server serves
	}
	return true
}

// Pairs lists the frontend × backend pairs of a report, sorted.
func (r *Report) Pairs() [][2]string {
	seen := map[[2]string]bool{}
	var out [][2]string
	for _, res := range r.Results {
		k := [2]string{res.Frontend, res.Backend}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] < out[j][1]
	})
	return out
}

var _ = canonical.CodeOK
