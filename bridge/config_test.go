package bridge

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfigRefuses(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"bad yaml", "listen: [1,\n", []string{"line"}},
		{"unknown top-level key", "listen: x\nlisten_addr: y\n", []string{"line 2", "listen_addr"}},
		{"unknown nested key", "nats:\n  url: x\n  urls: y\n", []string{"line 3", "urls"}},
		{"ill-typed value", "shutdown_timeout: soon\n", []string{"line 1", "soon"}},
		{"unknown backend in route", "backends:\n  s:\n    type: scripted\nroutes:\n  - target: echo\n    backend: s\n  - target: x\n    backend: nope\n",
			[]string{"line 8", "routes[1].backend", `unknown backend "nope"`}},
		{"bad glob", "backends:\n  s:\n    type: scripted\nroutes:\n  - target: '[x'\n    backend: s\n", []string{"line 5", "bad glob"}},
		{"backend without type", "backends:\n  s: {}\n", []string{"backends.s.type is empty"}},
		{"unknown frontend", "frontends:\n  nope: {}\n", []string{"frontends.nope: unknown frontend"}},
		{"unknown key, closest suggested", "nats:\n  replay_max_ags: 1h\n", []string{"line 2", "nats", `unknown key "replay_max_ags"`, `did you mean "replay_max_age"`}},
		{"duration without unit", "shutdown_timeout: 30\n", []string{"line 1", "shutdown_timeout", "has no unit: write 30s"}},
		{"whole number wanted, no Go type", "nats:\n  publish_queue: lots\n", []string{"line 2", "nats.publish_queue", `want a whole number, got "lots"`}},
		{"bool wanted", "nats:\n  url: x\nroutes:\n  - target: a\n    backend: b\n    xml: maybe\n", []string{"line 6", "routes[0].xml", "want true or false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("test.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("config accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, goType := range []string{"int64", "time.Duration", "bridge.", "!!str"} {
				if strings.Contains(err.Error(), goType) {
					t.Errorf("error %q shows Go's or YAML's type names (%s)", err, goType)
				}
			}
		})
	}
}

func TestParseConfigAccepts(t *testing.T) {
	c, err := ParseConfig("ok.yaml", []byte(`
listen: 127.0.0.1:9000
shutdown_timeout: 5s
nats:
  url: nats://127.0.0.1:4222
backends:
  demo:
    type: scripted
routes:
  - target: "demo-*"
    backend: demo
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9000" || c.ShutdownTimeout != 5*time.Second || c.NATS.URL != "nats://127.0.0.1:4222" || c.Routes[0].Target != "demo-*" {
		t.Fatalf("parsed %+v", c)
	}
	if _, err := ParseConfig("empty.yaml", nil); err != nil {
		t.Fatalf("empty file: %v", err)
	}
}

func TestEnvAndSetOverride(t *testing.T) {
	c := DefaultConfig()
	env := map[string]string{
		"INTERLINGUA_LISTEN":                "127.0.0.1:1",
		"INTERLINGUA_NATS_URL":              "nats://x:4222",
		"INTERLINGUA_NATS_REPLAY_MAX_AGE":   "2h",
		"INTERLINGUA_NATS_REPLAY_MAX_BYTES": "1024",
		"INTERLINGUA_TOOLS_ALLOW":           "calculator, clock",
	}
	if err := c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:1" || c.NATS.URL != "nats://x:4222" || c.NATS.ReplayMaxAge != 2*time.Hour || c.NATS.ReplayMaxBytes != 1024 || len(c.Tools.Allow) != 2 {
		t.Fatalf("env not applied: %+v", c)
	}
	if err := c.Set("log.level", "debug"); err != nil || c.Log.Level != "debug" {
		t.Fatalf("Set: %v %q", err, c.Log.Level)
	}
	if err := c.Set("nats.nope", "x"); err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Fatalf("Set unknown key: %v", err)
	}
	if err := c.ApplyEnv(func(k string) (string, bool) {
		if k == "INTERLINGUA_SHUTDOWN_TIMEOUT" {
			return "forever", true
		}
		return "", false
	}); err == nil || !strings.Contains(err.Error(), "INTERLINGUA_SHUTDOWN_TIMEOUT") {
		t.Fatalf("bad env value: %v", err)
	}
}

func TestValidate(t *testing.T) {
	c := DefaultConfig()
	c.Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Log.Level = "loud"
	c.NATS.SubjectPrefix = "a.b"
	c.Listen = "localhost"
	c.Routes = nil
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "log.level") || !strings.Contains(err.Error(), "nats.subject_prefix") ||
		!strings.Contains(err.Error(), `listen: "localhost" is not host:port`) || !strings.Contains(err.Error(), "routes: none configured") {
		t.Fatalf("got %v", err)
	}
}

func TestValidateReplicas(t *testing.T) {
	for _, tc := range []struct {
		url      string
		replicas int
		bad      bool
	}{
		{"", 1, false},
		{"nats://a,nats://b,nats://c", 3, false},
		{"nats://a", 5, false},
		{"", 3, true}, // the embedded server is one server
		{"nats://a", 6, true},
		{"nats://a", -1, true},
	} {
		c := DefaultConfig()
		c.NATS.URL, c.NATS.Replicas = tc.url, tc.replicas
		c.Defaults()
		err := c.Validate()
		if bad := err != nil; bad != tc.bad || bad && !strings.Contains(err.Error(), "nats.replicas") {
			t.Errorf("url %q replicas %d: %v", tc.url, tc.replicas, err)
		}
	}
	c := DefaultConfig()
	c.Defaults()
	if c.NATS.Replicas != 1 {
		t.Fatalf("default replicas %d, want 1", c.NATS.Replicas)
	}
}

// An embedded NATS listener that is not loopback needs nats.token: anyone
// reaching the port would otherwise read every run and place runs.
func TestValidateEmbeddedListener(t *testing.T) {
	for _, tc := range []struct {
		url, listen, token string
		bad                bool
	}{
		{"", "", "", false},
		{"", "127.0.0.1:4222", "", false},
		{"", "localhost:0", "", false},
		{"", "[::1]:4222", "", false},
		{"", "0.0.0.0:4222", "", true},
		{"", "10.0.0.5:4222", "", true},
		{"", ":4222", "", true},
		{"", "0.0.0.0:4222", "s3cret", false},
		{"nats://a:4222", "0.0.0.0:4222", "", false}, // an external server: no embedded listener
	} {
		c := DefaultConfig()
		c.NATS.URL, c.NATS.EmbeddedListen, c.NATS.Token = tc.url, tc.listen, tc.token
		c.Defaults()
		err := c.Validate()
		if bad := err != nil; bad != tc.bad || bad && !strings.Contains(err.Error(), "nats.token") {
			t.Errorf("url %q listen %q token %q: %v", tc.url, tc.listen, tc.token, err)
		}
	}
}
