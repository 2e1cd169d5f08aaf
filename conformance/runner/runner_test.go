package runner

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/adapters/native"
	"github.com/interlingua-dev/interlingua/adapters/triton"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func failures(t *testing.T, rep *Report) {
	t.Helper()
	for _, r := range rep.Results {
		if r.Failed() {
			t.Errorf("%s %s: %s", r.Outcome, r.Name, r.Message)
		}
	}
}

// heavyCases move megabytes; under the race detector they are left to
// `make conformance`, which runs the whole matrix without it.
var heavyCases = []string{"**/large-output", "**/slow-client"}

// The bridge matrix: every frontend × every backend, every case.
func TestBridgeMatrix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := Options{Mode: ModeBridge}
	if raceEnabled {
		opts.Skip = heavyCases
	}
	rep, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	failures(t, rep)
	if got, want := len(rep.Pairs()), len(frontendProtocols)*len(backendProtocols); got != want {
		t.Fatalf("%d pairs ran, want %d", got, want)
	}
	if rep.Count(Pass) < 200 {
		t.Fatalf("only %d cases passed", rep.Count(Pass))
	}
}

// The matrix across two instances and a NATS server: every backend, two
// frontends (the rest repeat the bridge matrix; `interlingua conformance
// --mode cluster` runs them all).
func TestClusterMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the cluster matrix repeats the bridge matrix over NATS")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := Options{Mode: ModeCluster, Frontends: []string{"native", "glide"}}
	if raceEnabled {
		opts.Skip = heavyCases
	}
	rep, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	failures(t, rep)
	if rep.Count(Pass) < 80 {
		t.Fatalf("only %d cases passed", rep.Count(Pass))
	}
}

// Server mode passes our own frontends, pointed at an instance with the
// default (scripted) targets, as `interlingua serve` runs them.
func TestServerModeOwnFrontends(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	for _, p := range frontendProtocols {
		t.Run(p, func(t *testing.T) {
			rep, err := Run(context.Background(), Options{Mode: ModeServer, Protocol: p, Target: inst.URL})
			if err != nil {
				t.Fatal(err)
			}
			failures(t, rep)
			if rep.Count(Pass) < 4 {
				t.Fatalf("only %d cases passed", rep.Count(Pass))
			}
		})
	}
}

// flipRunner breaks a frontend on purpose: it changes one field of the
// events its runs produce.
type flipRunner struct {
	canonical.Runner
	flip func(*canonical.Event)
}

func (f flipRunner) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	s, err := f.Runner.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	return flipStream{s, f.flip}, nil
}

type flipStream struct {
	canonical.Stream
	flip func(*canonical.Event)
}

func (f flipStream) Recv() (*canonical.Event, error) {
	ev, err := f.Stream.Recv()
	if err == nil {
		f.flip(ev)
	}
	return ev, err
}

// A deliberately broken adapter makes the named cases fail, and only
// them: a frontend whose runner flips one field of one kind of event.
func TestBrokenAdapterFailsNamedCases(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	for _, tc := range []struct {
		name     string
		protocol string
		mount    func(mux *http.ServeMux, r canonical.Runner)
		flip     func(*canonical.Event)
		want     []string // the cases that must fail
	}{
		{
			name: "failure code", protocol: "native",
			mount: func(mux *http.ServeMux, r canonical.Runner) {
				native.NewFrontend(native.Config{Runner: r, Observer: inst.Bridge()}).Mount(mux)
			},
			flip: func(ev *canonical.Event) {
				if e := ev.GetLifecycle().GetError(); e != nil && e.GetCode() != uint32(canonical.CodeCanceled) {
					e.Code = uint32(canonical.CodeUnknown)
				}
			},
			want: []string{"error-before-first-event", "error-mid-stream"},
		},
		{
			name: "reasoning typed as text", protocol: "native",
			mount: func(mux *http.ServeMux, r canonical.Runner) {
				native.NewFrontend(native.Config{Runner: r, Observer: inst.Bridge()}).Mount(mux)
			},
			flip: func(ev *canonical.Event) {
				if bs := ev.GetBlockStart(); bs.GetType() == canonical.BlockReasoning {
					bs.Type = canonical.BlockText
				}
			},
			want: []string{"agent-turn"},
		},
		{
			name: "failure code before the first response", protocol: "triton",
			mount: func(mux *http.ServeMux, r canonical.Runner) {
				triton.NewFrontend(triton.FrontendConfig{Runner: r}).Mount(mux)
			},
			flip: func(ev *canonical.Event) {
				if e := ev.GetLifecycle().GetError(); e != nil && e.GetCode() == uint32(canonical.CodeUnavailable) {
					e.Code = uint32(canonical.CodeDataLoss)
				}
			},
			want: []string{"error-before-first-event"},
		},
		{
			name: "a text delta's last byte", protocol: "triton",
			mount: func(mux *http.ServeMux, r canonical.Runner) {
				triton.NewFrontend(triton.FrontendConfig{Runner: r}).Mount(mux)
			},
			flip: func(ev *canonical.Event) {
				if d := ev.GetBlockDelta(); d != nil && strings.HasSuffix(d.GetText(), "!") {
					d.Text = strings.TrimSuffix(d.GetText(), "!") + "?"
				}
			},
			want: []string{"unicode-split"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			tc.mount(mux, flipRunner{inst.Bridge(), tc.flip})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			rep, err := Run(context.Background(), Options{Mode: ModeServer, Protocol: tc.protocol, Target: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, r := range rep.Results {
				if r.Failed() {
					failed = append(failed, r.Case)
				}
			}
			slices.Sort(failed)
			if !slices.Equal(failed, tc.want) {
				t.Fatalf("failed cases %v, want %v", failed, tc.want)
			}
		})
	}
}

// Known-failing cases still run: a failure is expected, a pass reported.
func TestKnownFailing(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	mux := http.NewServeMux()
	native.NewFrontend(native.Config{Runner: flipRunner{inst.Bridge(), func(ev *canonical.Event) {
		if d := ev.GetBlockDelta(); d != nil {
			d.Text = strings.ToUpper(d.GetText())
		}
	}}}).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	rep, err := Run(context.Background(), Options{Mode: ModeServer, Protocol: "native", Target: srv.URL,
		Run:          []string{"server/frontend:native/text-stream", "server/frontend:native/empty-output"},
		KnownFailing: []string{"**/text-stream", "**/empty-output"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rep.Results {
		got[r.Case] = r.Outcome
	}
	if got["text-stream"] != XFail || got["empty-output"] != XPass || len(got) != 2 {
		t.Fatalf("outcomes %v, want text-stream known-failing and empty-output an unexpected pass", got)
	}
	if rep.Failed() != 1 {
		t.Fatalf("%d results fail the suite, want 1 (the unexpected pass)", rep.Failed())
	}
}

func TestPatterns(t *testing.T) {
	name := "bridge/frontend:triton/backend:evergreen/unicode-split"
	for _, tc := range []struct {
		pattern string
		match   bool
	}{
		{name, true},
		{"bridge", true},
		{"bridge/frontend:triton", true},
		{"bridge/frontend:tri", false},
		{"bridge/frontend:*/backend:evergreen", true},
		{"bridge/*/unicode-split", false},
		{"bridge/**/unicode-split", true},
		{"**/unicode-*", true},
		{"bridge/frontend:triton/backend:evergreen/unicode-spli?", true},
		{"cluster/**", false},
	} {
		p, err := compilePattern(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if p.match(name) != tc.match {
			t.Errorf("%q matches %s: %v, want %v", tc.pattern, name, !tc.match, tc.match)
		}
	}
	ps, err := ReadPatterns(strings.NewReader("# comment\n\n  bridge/**/a  \nserver\n"))
	if err != nil || !slices.Equal(ps, []string{"bridge/**/a", "server"}) {
		t.Fatalf("ReadPatterns: %v, %v", ps, err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Mode: "nope"},
		{Mode: ModeServer, Protocol: "triton"},
		{Mode: ModeServer, Protocol: "nope", Target: "http://x"},
		{Frontends: []string{"nope"}},
		{Backends: []string{"native"}},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// golden compares got with testdata/name, rewritten under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if string(want) != string(got) {
		t.Fatalf("%s differs from the golden file (run with -update to accept):\n%s", name, got)
	}
}
