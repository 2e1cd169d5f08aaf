package bridge_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/canonical"
)

// Tools are NATS micro services on interlingua.tool.<name>; copies of a
// service share the load, errors keep their meaning, and nothing outside
// the allowlist is ever called.
func TestToolRegistry(t *testing.T) {
	ns := natsServer(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var calls [2]atomic.Int64
	for i := range calls {
		svc, err := micro.AddService(nc, micro.Config{Name: "lookup", Version: "1.0.0"})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Stop()
		err = svc.AddEndpoint("lookup", micro.HandlerFunc(func(r micro.Request) {
			calls[i].Add(1)
			if strings.Contains(string(r.Data()), "missing") {
				_ = r.Error("404", "no such key", nil)
				return
			}
			_ = r.Respond([]byte(`{"value":"v"}`))
		}), micro.WithEndpointSubject("interlingua.tool.lookup"))
		if err != nil {
			t.Fatal(err)
		}
	}
	secret, err := nc.Subscribe("interlingua.tool.secret", func(m *nats.Msg) { t.Error("a tool outside the allowlist was called") })
	if err != nil {
		t.Fatal(err)
	}
	defer secret.Unsubscribe()
	_ = nc.Flush()

	reg := bridge.NewToolRegistry(bridge.ToolsConfig{Allow: []string{"lookup", "calculator", "absent"}, Timeout: 2 * time.Second}, nc, "interlingua", slog.New(slog.DiscardHandler))
	ctx := context.Background()
	for range 40 {
		out, err := reg.Call(ctx, "lookup", []byte(`{"key":"k"}`))
		if err != nil || string(out) != `{"value":"v"}` {
			t.Fatalf("lookup: %s %v", out, err)
		}
	}
	if calls[0].Load() == 0 || calls[1].Load() == 0 {
		t.Fatalf("one copy took every call: %d / %d", calls[0].Load(), calls[1].Load())
	}
	tests := []struct {
		tool, args string
		code       canonical.Code
	}{
		{"lookup", `{"key":"missing"}`, canonical.CodeNotFound},
		{"secret", `{}`, canonical.CodeNotFound},
		{"absent", `{}`, canonical.CodeUnavailable},
		{"calculator", `{"expression":"x"}`, canonical.CodeInvalidArgument},
	}
	for _, tt := range tests {
		_, err := reg.Call(ctx, tt.tool, []byte(tt.args))
		if canonical.CodeOf(err) != tt.code {
			t.Errorf("%s %s: got %v, want %v", tt.tool, tt.args, err, tt.code)
		}
	}
	if _, err := reg.Call(ctx, "lookup", make([]byte, 2<<20)); canonical.CodeOf(err) != canonical.CodeResourceExhausted {
		t.Errorf("oversized arguments: %v", err)
	}
}
