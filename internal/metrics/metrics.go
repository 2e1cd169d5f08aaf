// Package metrics holds an Interlingua server's Prometheus metrics. Each
// bridge.Server makes its own Metrics, registered on its own registry and
// served at its /metrics, so two servers in one process (tests, the bench
// harness) each report only their own counts. The bridge records runs;
// adapters that count protocol-level events (slow-consumer cut-offs) get
// their counter from the server through their configuration.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 18) // 50µs .. ~6.5s

// Metrics is one server's collectors and the registry that serves them.
type Metrics struct {
	registry *prometheus.Registry

	// Runs counts runs ended, by target, frontend, backend, outcome and
	// canonical code (ok for a run that did not fail).
	Runs *prometheus.CounterVec
	// Events counts canonical events delivered to frontends.
	Events *prometheus.CounterVec
	// Errors counts runs that failed or were cancelled, by canonical code.
	Errors *prometheus.CounterVec
	// TimeToFirstDelta is from a run's start to its first content delta.
	TimeToFirstDelta *prometheus.HistogramVec
	// DeltaInterval is between consecutive content deltas of a run.
	DeltaInterval *TallyHistogram
	// SlowConsumers counts clients cut off for not reading fast enough:
	// protocol "http" for a response write past write_timeout (every HTTP
	// path), "websocket" for internal/wsconn's connections.
	SlowConsumers *prometheus.CounterVec
}

// New returns a server's metrics on a registry of their own, with the Go
// runtime's and the process's collectors (process-wide figures, the same
// for every server in the process).
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlingua_runs_total", Help: "Runs ended (refused ones included), by target, frontend, backend, outcome and code.",
		}, []string{"target", "frontend", "backend", "outcome", "code"}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlingua_events_total", Help: "Canonical events delivered to frontends.",
		}, []string{"frontend", "backend"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlingua_run_errors_total", Help: "Runs that failed or were cancelled, by canonical code.",
		}, []string{"code"}),
		TimeToFirstDelta: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "interlingua_time_to_first_delta_seconds", Help: "From run start to its first content delta.", Buckets: latencyBuckets,
		}, []string{"frontend", "backend"}),
		DeltaInterval: NewTallyHistogram("interlingua_delta_interval_seconds", "Between consecutive content deltas of a run.", latencyBuckets),
		SlowConsumers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlingua_slow_consumer_cutoffs_total", Help: "Clients cut off because they did not read fast enough.",
		}, []string{"protocol"}),
	}
	m.registry.MustRegister(m.Runs, m.Events, m.Errors, m.TimeToFirstDelta, m.DeltaInterval, m.SlowConsumers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// GaugeFunc adds a gauge read at scrape time (NATS status, runs in
// flight). A name registered twice on one server is a programming error.
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// CounterFunc adds a counter read at scrape time from a count the server
// keeps anyway (bytes published to NATS).
func (m *Metrics) CounterFunc(name, help string, f func() float64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
}
