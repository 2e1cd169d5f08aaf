// Package tracing wires OpenTelemetry: W3C trace context taken from clients
// and carried across NATS and to upstreams, and spans for runs and tool
// calls. Spans are exported over OTLP/HTTP only when an endpoint is
// configured (tracing.otlp_endpoint or OTEL_EXPORTER_OTLP_ENDPOINT); without
// one, a client's traceparent still passes through unchanged.
package tracing

import (
	"context"
	"net/http"
	"os"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Config configures export.
type Config struct {
	// OTLPEndpoint is an OTLP/HTTP endpoint (host:port or URL); empty uses
	// OTEL_EXPORTER_OTLP_ENDPOINT, and with neither nothing is exported.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// SampleRatio samples root spans (a client's sampled flag wins).
	// Default 1.
	SampleRatio float64 `yaml:"sample_ratio"`
}

var propagator = propagation.TraceContext{}

// Tracer is the daemon's tracer (the global provider's).
func Tracer() trace.Tracer { return otel.Tracer("github.com/interlingua-dev/interlingua") }

// Start sets the global tracer provider from cfg and returns its shutdown.
func Start(ctx context.Context, cfg Config) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagator)
	endpoint := cfg.OTLPEndpoint
	if endpoint == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return func(context.Context) error { return nil }, nil
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(endpointURL(endpoint)))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	ratio := cfg.SampleRatio
	if ratio == 0 {
		ratio = 1
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("interlingua"))),
	)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

func endpointURL(e string) string {
	if len(e) > 7 && (e[:7] == "http://" || e[:8] == "https://") {
		return e
	}
	return "http://" + e
}

// FromHTTP returns ctx carrying the trace context of an incoming request.
func FromHTTP(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// ToHTTP writes ctx's trace context into an outgoing request's headers.
func ToHTTP(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// ToNATS writes ctx's trace context into a NATS message's headers.
func ToNATS(ctx context.Context, m *nats.Msg) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(m.Header))
}

// FromNATS returns ctx carrying a NATS message's trace context.
func FromNATS(ctx context.Context, m *nats.Msg) context.Context {
	if m.Header == nil {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(m.Header))
}

// Middleware takes each request's traceparent into its context.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Traceparent") != "" {
			r = r.WithContext(FromHTTP(r.Context(), r.Header))
		}
		next.ServeHTTP(w, r)
	})
}
