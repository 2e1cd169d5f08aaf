package evergreen

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

func np(name, id string) *ev.NamedParameter { return &ev.NamedParameter{Name: name, Id: id} }

func gen(target string, in []*ev.NamedParameter, out []*ev.NamedParameter) *ev.Action {
	return &ev.Action{Name: "GENERATE", TargetSpec: &ev.TargetSpec{Id: target}, Inputs: in, Outputs: out}
}

// TestActionRules covers the GENERATE contract (reference sections 3.8 and
// 4, Interlingua choices).
func TestActionRules(t *testing.T) {
	params, _ := anypb.New(&structpb.Struct{Fields: map[string]*structpb.Value{"temperature": structpb.NewNumberValue(0.5)}})
	other, _ := anypb.New(timestamppb.New(timestamppb.Now().AsTime()))
	withConfigs := gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r")})
	withConfigs.Configs = []*anypb.Any{params, other}
	cases := []struct {
		name  string
		setup []*ev.NodeFragment
		a     *ev.Action
		code  canonical.Code
		msg   string
		check func(t *testing.T, g *generate)
	}{
		{name: "prompt/response", a: gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r")}),
			check: func(t *testing.T, g *generate) {
				if g.target != "echo" || g.input.id != "p" || len(g.response) != 1 || g.response[0].id != "r" {
					t.Errorf("%+v", g)
				}
			}},
		{name: "text/text (README)", a: gen("echo", []*ev.NamedParameter{np("text", "p")}, []*ev.NamedParameter{np("text", "r")})},
		{name: "all outputs", a: gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r"), np("text", "t"), np("reasoning", "th"), np("tool_calls", "tc")}),
			check: func(t *testing.T, g *generate) {
				if len(g.response) != 2 || g.reasoning.id != "th" || g.tools.id != "tc" {
					t.Errorf("%+v", g)
				}
			}},
		{name: "empty target is the default", a: gen("", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r")}),
			check: func(t *testing.T, g *generate) {
				if g.target != "default" {
					t.Errorf("target %q", g.target)
				}
			}},
		{name: "unknown target", a: gen("gpt-9", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r")}),
			code: canonical.CodeNotFound, msg: `target_spec.id "gpt-9": unknown target`},
		{name: "unknown action", a: &ev.Action{Name: "DROP"}, code: canonical.CodeUnimplemented, msg: `action "DROP" is not supported`},
		{name: "unknown input name", a: gen("echo", []*ev.NamedParameter{np("image", "p")}, []*ev.NamedParameter{np("response", "r")}),
			code: canonical.CodeInvalidArgument, msg: `unknown input name "image"`},
		{name: "two inputs", a: gen("echo", []*ev.NamedParameter{np("prompt", "p"), np("text", "q")}, []*ev.NamedParameter{np("response", "r")}),
			code: canonical.CodeInvalidArgument, msg: "more than one input"},
		{name: "no input", a: gen("echo", nil, []*ev.NamedParameter{np("response", "r")}),
			code: canonical.CodeInvalidArgument, msg: "no input"},
		{name: "unknown output name", a: gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("answer", "r")}),
			code: canonical.CodeInvalidArgument, msg: `unknown output name "answer"`},
		{name: "output name twice", a: gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r"), np("response", "s")}),
			code: canonical.CodeInvalidArgument, msg: `output name "response" appears twice`},
		{name: "no output", a: gen("echo", []*ev.NamedParameter{np("prompt", "p")}, nil),
			code: canonical.CodeInvalidArgument, msg: "no output"},
		{name: "output id equals input id", a: gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "p")}),
			code: canonical.CodeInvalidArgument, msg: `output id "p" is also the input id`},
		{name: "one id for two outputs", a: gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r"), np("text", "r")}),
			code: canonical.CodeInvalidArgument, msg: `output id "r" is bound to two outputs`},
		{name: "output id already received", setup: []*ev.NodeFragment{L("r", 0, false, "x", tp)},
			a:    gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r")}),
			code: canonical.CodeInvalidArgument, msg: `output id "r" is already used`},
		{name: "output in its own input", setup: []*ev.NodeFragment{P("p", 0, false, "q"), P("q", 0, true, "r")},
			a:    gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r")}),
			code: canonical.CodeInvalidArgument, msg: `output "r" is part of the action's own input ("p" → "q" → "r")`},
		{name: "output referenced elsewhere before the action is fine", setup: []*ev.NodeFragment{P("later", 0, true, "r")},
			a: gen("echo", []*ev.NamedParameter{np("prompt", "p")}, []*ev.NamedParameter{np("response", "r")})},
		{name: "configs", a: withConfigs, check: func(t *testing.T, g *generate) {
			if g.params["temperature"].GetNumberValue() != 0.5 || len(g.unknownTypes) != 1 || !strings.HasSuffix(g.unknownTypes[0], "google.protobuf.Timestamp") {
				t.Errorf("params %v unknown %v", g.params, g.unknownTypes)
			}
			req, err := g.request(newStore(Limits{}, false), "t", newRefPolicy(nil))
			if err != nil {
				t.Fatal(err)
			}
			if req.GetExtensions()[extConfigs] == nil || req.GetParameters()["temperature"] == nil {
				t.Errorf("request %v", req)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(Limits{}, false)
			for _, f := range tc.setup {
				if err := st.apply(f); err != nil {
					t.Fatal(err)
				}
			}
			g, err := parseAction(st, tc.a, echoTargets)
			if tc.code != canonical.CodeOK {
				if codeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("got %v, want %s containing %q", err, tc.code, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, g)
			}
		})
	}
}

// echoTargets resolves the targets echo and default ("" names it).
func echoTargets(id string) (string, bool) {
	if id == "" {
		id = "default"
	}
	return id, id == "echo" || id == "default"
}

// TestRefPolicy: http(s) refs pass, file refs and other schemes are
// refused, and only allowlisted origins are fetched.
func TestRefPolicy(t *testing.T) {
	p := newRefPolicy([]string{"https://media.example.com", "http://127.0.0.1:9000"})
	for ref, want := range map[string]string{
		"http://127.0.0.1/secret":         "loopback or private address",
		"http://localhost:8080/x":         "loopback or private address",
		"http://10.1.2.3/x":               "loopback or private address",
		"http://169.254.169.254/metadata": "loopback or private address",
		"http://[::1]/x":                  "loopback or private address",
		"http://0.0.0.0/x":                "loopback or private address",
		"http://127.0.0.1:9000/allowed":   "",
		"https://x.example.com/a.mp4":     "",
		"http://x.example.com/a.mp4":      "",
		"file://path/to/file/part1":       "the bridge never reads local files",
		"FILE:///etc/passwd":              "the bridge never reads local files",
		"gs://bucket/a":                   `scheme "gs" is not supported`,
		"relative/path":                   "has no scheme",
		"https:///nohost":                 "has no host",
	} {
		err := p.check("n", ref)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("check(%q) = %v, want %q", ref, err, want)
		}
	}
	if !p.fetches("https://MEDIA.example.com/a") || p.fetches("https://other.example.com/a") || p.fetches("http://media.example.com/a") {
		t.Error("fetch allowlist")
	}
	if _, err := parseOrigin("file:///"); err == nil {
		t.Error("file origin accepted")
	}
	if _, err := parseOrigin("https://h/path"); err == nil {
		t.Error("origin with a path accepted")
	}
}
