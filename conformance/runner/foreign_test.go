package runner

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// Server mode tests someone else's server (issue 32 #5): --header carries
// its credentials to every protocol's client, --model names its model, the
// cases needing fault injection or a scripted answer are skipped with the
// reason, the others check the outcome and that text came; a server that
// does not answer fails the run rather than passing the cases that expect
// a failure.
func TestServerModeForeignServer(t *testing.T) {
	t.Setenv("IL_CONFORMANCE_KEY", "conformance-key-1")
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "tester", Env: "IL_CONFORMANCE_KEY"}}
	inst := bridgetest.Start(t, &cfg)
	auth := http.Header{"Authorization": {"Bearer conformance-key-1"}}
	for _, p := range frontendProtocols {
		t.Run(p, func(t *testing.T) {
			rep, err := Run(context.Background(), Options{Mode: ModeServer, Protocol: p, Target: inst.URL})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Count(Pass) != 0 || rep.Count(Fail) == 0 {
				t.Errorf("without the key: %d passed, %d failed; want every case that runs to fail", rep.Count(Pass), rep.Count(Fail))
			}
			rep, err = Run(context.Background(), Options{Mode: ModeServer, Protocol: p, Target: inst.URL, Headers: auth, Model: "echo"})
			if err != nil {
				t.Fatal(err)
			}
			failures(t, rep)
			if rep.Count(Pass) < 2 || rep.Count(Skip) == 0 {
				t.Errorf("with --model: %d passed, %d skipped", rep.Count(Pass), rep.Count(Skip))
			}
			for _, r := range rep.Results {
				if r.Outcome == Skip && !strings.Contains(r.Message, "needs a cooperating server") && !strings.Contains(r.Message, "protocol") {
					t.Errorf("%s skipped for %q", r.Name, r.Message)
				}
				if strings.HasSuffix(r.Name, "/error-before-first-event") && r.Outcome != Skip {
					t.Errorf("%s: %s, want skipped (fault injection)", r.Name, r.Outcome)
				}
				if strings.HasSuffix(r.Name, "/empty-output") && (r.Outcome != Skip || !strings.Contains(r.Message, "a run with no output")) {
					t.Errorf("%s: %s %q, want skipped (a model answers an empty prompt too)", r.Name, r.Outcome, r.Message)
				}
			}
		})
	}
	_, err := Run(context.Background(), Options{Mode: ModeServer, Protocol: "triton", Target: "http://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("against nothing: %v, want an error saying the server does not answer", err)
	}
}
