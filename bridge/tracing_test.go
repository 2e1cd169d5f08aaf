package bridge_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
)

// A client's traceparent becomes the parent of the run's span; the span of
// the run's owner on another instance (reached over NATS) and of its tool
// call share the trace.
func TestTracePropagation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(t.Context()) })

	ns := natsServer(t)
	bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL(), "none"))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest("POST", a.URL+"/v1/runs", strings.NewReader(`{"target":"demo-agent","inputs":[]}`))
	req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body) // to the terminal event: the run's span has ended
	resp.Body.Close()
	// The owner's span ends once the owner has closed the run, which may
	// be just after its client read the terminal event.
	want := []string{"interlingua.run", "interlingua.run.owner", "interlingua.tool"}
	var seen map[string]bool
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_ = tp.ForceFlush(t.Context())
		seen = map[string]bool{}
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID().String() == traceID {
				seen[s.Name] = true
			}
		}
		if seen[want[0]] && seen[want[1]] && seen[want[2]] || time.Now().After(deadline) {
			break
		}
	}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() == traceID && s.Name == "interlingua.run" && s.Parent.SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("run span's parent is %s, want the client's span", s.Parent.SpanID())
		}
	}
	for _, name := range want {
		if !seen[name] {
			t.Errorf("no %s span in the client's trace (saw %v)", name, seen)
		}
	}
}

// The run's trace continues to an upstream: the Triton backend sends the
// client's trace id in its traceparent header.
func TestTraceReachesUpstream(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(t.Context()) })

	peer := tritonpeer.New(tritonpeer.Model{Name: "m", Chunks: []string{"ok"}})
	up := httptest.NewServer(peer)
	defer up.Close()
	cfg := bridge.DefaultConfig()
	var opts yaml.Node
	if err := yaml.Unmarshal([]byte("url: "+up.URL+"\nmodel: m\nmetadata: off\n"), &opts); err != nil {
		t.Fatal(err)
	}
	cfg.Backends["triton"] = bridge.BackendConfig{Type: "triton", Options: *opts.Content[0]}
	cfg.Routes = append(cfg.Routes, bridge.Route{Target: "up", Backend: "triton"})
	inst := bridgetest.Start(t, &cfg)
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	req, _ := http.NewRequest("POST", inst.URL+"/v1/runs", strings.NewReader(`{"target":"up","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`))
	req.Header.Set("Traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	reqs := peer.Requests()
	if len(reqs) == 0 {
		t.Fatalf("the upstream got no request; client saw %s", body)
	}
	if tp := reqs[len(reqs)-1].Header.Get("Traceparent"); !strings.Contains(tp, traceID) {
		t.Fatalf("upstream traceparent %q lacks the client's trace id", tp)
	}
}
