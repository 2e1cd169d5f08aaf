package bridge_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/protocol"
)

// A tool the allowlist names that is neither built in nor served by any
// NATS micro service is warned about at start (issue 32 #4), once; a
// built-in one and one a service serves are not. Alone on the embedded
// server, no service can serve one.
func TestToolsWarnUnserved(t *testing.T) {
	ns := natsServer(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	svc, err := micro.AddService(nc, micro.Config{Name: "lookup", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	if err := svc.AddEndpoint("lookup", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte(`{}`)) }),
		micro.WithEndpointSubject("interlingua.tool.lookup")); err != nil {
		t.Fatal(err)
	}
	allow := []string{"calculator", "lookup", "lookpu"}
	for _, tt := range []struct {
		alone bool
		want  []string
	}{{false, []string{"lookpu"}}, {true, []string{"lookup", "lookpu"}}} {
		var logs bytes.Buffer
		reg := bridge.NewToolRegistry(bridge.ToolsConfig{Allow: allow, Timeout: time.Second}, nc, "interlingua", slog.New(slog.NewTextHandler(&logs, nil)))
		reg.WarnUnserved(tt.alone, 500*time.Millisecond)
		var warned []string
		for line := range strings.Lines(logs.String()) {
			if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "tools.allow names a tool") {
				t.Errorf("unexpected log line: %s", line)
			}
			for _, f := range strings.Fields(line) {
				if tool, ok := strings.CutPrefix(f, "tool="); ok {
					warned = append(warned, tool)
				}
			}
		}
		if strings.Join(warned, ",") != strings.Join(tt.want, ",") {
			t.Errorf("alone %v: warned of %v, want %v\n%s", tt.alone, warned, tt.want, logs.String())
		}
	}
}

// An error inside a backend's options names the file's line, not one
// counted from the block, suggests the closest key and a duration's unit,
// and shows no Go type; a frontends.<name> block is checked when the
// config is read, and refused for a frontend that takes no options.
func TestOptionsErrorsNameTheFileLine(t *testing.T) {
	head := "listen: 127.0.0.1:0\nbackends:\n  tr:\n    type: triton\n    options:\n      url: http://127.0.0.1:1\n"
	for _, tt := range []struct{ name, yaml, want string }{
		{"typo", head + "      timout: 30s\n", `backends.tr.options: line 7: unknown key "timout" (did you mean "timeout"?)`},
		{"no unit", head + "      timeout: 30\n", `backends.tr.options: line 7: timeout: 30 has no unit: write 30s (or ms, m, h)`},
		{"kind", head + "      max_event_bytes: lots\n", `backends.tr.options: line 7: max_event_bytes: want a whole number, got "lots"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := bridge.ParseConfig("test.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = bridge.BuildBackends(cfg, protocol.BackendDeps{Log: slog.New(slog.DiscardHandler)})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v\nwant %s", err, tt.want)
			}
		})
	}
	for _, tt := range []struct{ name, yaml, want string }{
		{"no options", "frontends:\n  agent:\n    buffer_events: 5\n", "config test.yaml: line 3: frontends.agent: the agent frontend takes no options"},
		{"frontend kind", "frontends:\n  evergreen:\n    max_message_bytes: 1000\n    max_actions: lots\n", `config test.yaml: line 4: frontends.evergreen.max_actions: want a whole number, got "lots"`},
		{"frontend typo", "frontends:\n  evergreen:\n    max_action: 3\n", `config test.yaml: line 3: frontends.evergreen: unknown key "max_action" (did you mean "max_actions"?)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bridge.ParseConfig("test.yaml", []byte(tt.yaml))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}
