package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A traceparent survives HTTP in, NATS across, and HTTP out unchanged
// when nothing is exported.
func TestPropagation(t *testing.T) {
	var got string
	h := Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		m := nats.NewMsg("x")
		ToNATS(r.Context(), m)
		ctx := FromNATS(context.Background(), m)
		out := http.Header{}
		ToHTTP(ctx, out)
		got = out.Get("Traceparent")
		if sc := trace.SpanContextFromContext(ctx); !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("span context %v", sc)
		}
	}))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Traceparent", parent)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got != parent {
		t.Fatalf("traceparent out %q, want %q", got, parent)
	}
}

func TestStartWithoutEndpointExportsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	stop, err := Start(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
