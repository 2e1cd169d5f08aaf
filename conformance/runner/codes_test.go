package runner

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/internal/metrics"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// codeRunner answers every run with a refusal of code (before), or with
// some text and then a failure of code.
type codeRunner struct {
	code   canonical.Code
	before bool
}

func (r codeRunner) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	err := canonical.Errorf(r.code, "scripted %s", r.code)
	if r.before {
		return nil, err
	}
	b := canonical.NewBuilder()
	evs := b.Lifecycle(nil, canonical.StatusRunning)
	evs = b.Text(evs, "partial")
	evs = b.End(evs, canonical.StatusFailed, err)
	for _, ev := range evs {
		ev.RunId, ev.ThreadId = "r", "r"
	}
	return &sliceStream{evs: evs}, nil
}

func (codeRunner) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name, Backend: "b"}, true
}

func (codeRunner) Targets() []canonical.TargetInfo {
	return []canonical.TargetInfo{{Name: "t", Backend: "b"}}
}

type sliceStream struct{ evs []*canonical.Event }

func (s *sliceStream) Recv() (*canonical.Event, error) {
	if len(s.evs) == 0 {
		return nil, io.EOF
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, nil
}

func (s *sliceStream) Close() error { return nil }

// mountFrontend serves protocol p's frontend over r.
func mountFrontend(t *testing.T, p string, r canonical.Runner) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	var closers []func()
	proto := protocols.Get(p)
	if proto == nil || proto.Mount == nil {
		t.Fatalf("no frontend %q", p)
	}
	// Mounted as the server mounts it (protocol.Protocol.Mount), without
	// a NATS side: every frontend in the list, whatever its name.
	deps := protocol.FrontendDeps{Runner: r, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(),
		OnShutdown: func(f func()) { closers = append(closers, f) }, OnClose: func(f func()) { closers = append(closers, f) }}
	if err := proto.Mount(mux, deps); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(func() {
		for _, c := range closers {
			c()
		}
		srv.Close()
	})
	return srv
}

// Every canonical code, refused before the first event and failing after
// some text, through every frontend: what the protocol's client reads back
// is what its profile states (the error rows of the degradation table).
func TestErrorCodesThroughEveryFrontend(t *testing.T) {
	c := &cases.Case{Case: &cv1.Case{Name: "codes"}, Folder: cases.Common}
	for _, p := range frontendProtocols {
		for _, before := range []bool{true, false} {
			phase := map[bool]string{true: "before", false: "mid"}[before]
			t.Run(p+"/"+phase, func(t *testing.T) {
				if protocols.Get(p).NewRuntime != nil {
					// Its frontend runs through the bridge's runtime and
					// reads the replay log: a runner alone cannot serve it.
					// The matrix's error cases (refused-*, mid-stream
					// failures) check its codes through the whole stack.
					t.Skip("a frontend on the bridge's runtime and replay log")
				}
				for _, code := range canonical.AllCodes[1:] {
					srv := mountFrontend(t, p, codeRunner{code: code, before: before})
					cl, err := newClient(p, clientOptions{base: srv.URL, target: "t"})
					if err != nil {
						t.Fatal(err)
					}
					ideal := &cv1.Transcript{Status: transcript.Refused, Code: code.String()}
					if !before {
						ideal = &cv1.Transcript{Status: transcript.Failed, Code: code.String(),
							Blocks: []*cv1.Block{{Type: transcript.Text, Text: "partial"}}}
					}
					want := transcript.Normalize(profiles[p].Front(ideal, c))
					x := &executor{env: &serverEnv{url: srv.URL}}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					got, _, problems := x.once(ctx, cl, &canonical.Request{Target: "t",
						Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "hi")}}}, &cv1.ClientBehavior{}, nil, func() {})
					cancel()
					cl.close()
					if len(problems) > 0 {
						t.Errorf("%s: %v", code, problems)
					}
					if d := cmp.Diff(want, transcript.Normalize(got), protocmp.Transform()); d != "" {
						t.Errorf("%s %s: %s", code, phase, d)
					}
				}
			})
		}
	}
}
