package cases_test

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/adapters/scripted"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/internal/builtin"
)

func TestLoad(t *testing.T) {
	all, err := cases.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 10 {
		t.Fatalf("%d cases loaded", len(all))
	}
	features := map[string]bool{}
	for _, c := range all {
		if c.GetDescription() == "" {
			t.Errorf("%s: no description", c.File)
		}
		if len(c.GetFeatures()) == 0 {
			t.Errorf("%s: no features", c.File)
		}
		for _, f := range c.GetFeatures() {
			features[f] = true
		}
	}
	// The coverage the suite promises (issue 9).
	for _, f := range []string{"text", "reasoning", "tool-call", "tool-activity", "multimodal", "empty", "large",
		"unicode-split", "error-before", "error-mid", "cancel", "slow-client", "concurrent", "replay"} {
		if !features[f] {
			t.Errorf("no case covers feature %q", f)
		}
	}
}

func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, file, data, want string
	}{
		{"unknown field", "common/a.yaml", "descriptoin: x\n", `unknown field "descriptoin"`},
		{"name mismatch", "common/a.yaml", "name: b\n", `name "b" does not match the file name`},
		{"bad name", "common/Bad_Name.yaml", "description: x\n", "is not lower-case words"},
		{"bad yaml", "common/a.yaml", "response: [\n", "common/a.yaml"},
		{"bad type", "common/a.yaml", "response: {delayMs: soon}\n", "delayMs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cases.Parse(tc.file, []byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	_, err := cases.LoadFS(fstest.MapFS{
		"common/a.yaml": {Data: []byte("description: x\n")},
		"native/a.yaml": {Data: []byte("description: y\n")},
	})
	if err == nil || !regexp.MustCompile(`native/a.yaml: case name "a" is also used by common/a.yaml`).MatchString(err.Error()) {
		t.Fatalf("duplicate names: got %v", err)
	}
}

type tools map[string]builtin.Func

func (t tools) Call(ctx context.Context, name string, args []byte) ([]byte, error) {
	f, ok := t[name]
	if !ok {
		return nil, canonical.Errorf(canonical.CodeNotFound, "no tool %q", name)
	}
	return f(ctx, args)
}

// Server mode asks a server for the cases' request targets, played by the
// scripted backend in `interlingua serve`: what that backend produces for
// each request must be the case's expected transcript (the one derived
// from its definition, or its written-out server expectation), so the
// cases and the scripted targets cannot drift apart.
func TestServerRequestsMatchTheScriptedTargets(t *testing.T) {
	all, err := cases.Load()
	if err != nil {
		t.Fatal(err)
	}
	be := scripted.New(scripted.Config{Tools: tools(builtin.Tools(time.Now))})
	for _, c := range all {
		if c.GetRequest().GetTarget() == "" {
			continue
		}
		t.Run(c.GetName(), func(t *testing.T) {
			req := &canonical.Request{
				RunId: "run-1", Target: c.GetRequest().GetTarget(), Parameters: map[string]*structpb.Value{},
				Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", c.GetRequest().GetPrompt())}},
			}
			for _, p := range []*structpb.Struct{c.GetRequest().GetParameters(), c.GetRequest().GetServerParameters()} {
				for k, v := range p.GetFields() {
					req.Parameters[k] = v
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			b := transcript.NewBuilder()
			s, err := be.Start(runCtx, req)
			if err != nil {
				b.Refuse(err)
			} else {
				defer s.Close()
				var evs []*canonical.Event
				for {
					ev, err := s.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					evs = append(evs, ev)
					b.Add(ev)
					if c.GetClient().GetCancel() && ev.GetBlockDelta() != nil {
						stop() // the hang fault hangs after its first content delta
					}
				}
				if err := canonical.Validate(evs); err != nil {
					t.Fatal(err)
				}
			}
			got := transcript.Normalize(b.Transcript())
			want := expectedForNative(c)
			if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
				t.Fatalf("the scripted target's transcript differs from the case's (-want +got):\n%s", d)
			}
		})
	}
}

// expectedForNative is what the native client must see in server mode.
func expectedForNative(c *cases.Case) *cv1.Transcript {
	for _, e := range c.GetExpectations() {
		if p := e.GetPair(); p == "frontend:native/backend:server" || p == "frontend:*/backend:server" {
			return transcript.Normalize(e.GetTranscript())
		}
	}
	return driver.Ideal(c.GetResponse(), c.GetRequest().GetPrompt())
}
