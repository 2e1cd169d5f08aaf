// Package metrics holds the daemon's Prometheus metrics, registered on one
// registry served at /metrics. Adapters record protocol-level events
// (slow-consumer cut-offs) here; the bridge records runs.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is the daemon's registry.
var Registry = prometheus.NewRegistry()

var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 18) // 50µs .. ~6.5s

// The metrics.
var (
	Runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "interlingua_runs_total", Help: "Runs ended, by target, frontend, backend and outcome.",
	}, []string{"target", "frontend", "backend", "outcome"})
	Events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "interlingua_events_total", Help: "Canonical events delivered to frontends.",
	}, []string{"frontend", "backend"})
	Errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "interlingua_run_errors_total", Help: "Runs that failed or were cancelled, by canonical code.",
	}, []string{"code"})
	TimeToFirstDelta = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "interlingua_time_to_first_delta_seconds", Help: "From run start to its first content delta.", Buckets: latencyBuckets,
	}, []string{"frontend", "backend"})
	DeltaInterval = NewTallyHistogram("interlingua_delta_interval_seconds", "Between consecutive content deltas of a run.", latencyBuckets)
	SlowConsumers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "interlingua_slow_consumer_cutoffs_total", Help: "Clients cut off because they did not read fast enough.",
	}, []string{"protocol"})
	PublishedBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "interlingua_nats_published_bytes_total", Help: "Bytes of events published to NATS.",
	})
)

func init() {
	Registry.MustRegister(Runs, Events, Errors, TimeToFirstDelta, DeltaInterval, SlowConsumers, PublishedBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Handler serves the registry.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry})
}

// RegisterGauge adds a gauge read at scrape time (NATS status and counts).
// A name already registered is left as it is (several servers in one test
// process).
func RegisterGauge(name, help string, f func() float64) {
	_ = Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}
