package bridge

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/metrics"
)

type frontendKey struct{}

// frontendRunner tags the runs a frontend starts with its name, for
// metrics and the run-end log line.
type frontendRunner struct {
	*Bridge
	name string
}

func (f frontendRunner) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	return f.Bridge.Run(context.WithValue(ctx, frontendKey{}, f.name), req)
}

func frontendOf(ctx context.Context) string {
	if n, ok := ctx.Value(frontendKey{}).(string); ok {
		return n
	}
	return "internal"
}

// metered records a run's metrics as its events pass: time to first
// delta, interval between deltas, and at the end the run's outcome, event
// count and error code, with one log line.
type metered struct {
	canonical.Stream
	b                         *Bridge
	target, frontend, backend string
	thread, run               string
	key                       string // the API key's name ("" with auth off)
	start                     time.Time
	last                      int64 // the previous delta's stamp (unix ns)
	delta                     bool  // a delta has passed
	firstDelta                time.Duration
	events                    int
	ttfd                      prometheus.Observer
	interval                  metrics.Tally
	span                      trace.Span
	release                   func() // the API key's run slot
	// mu orders Recv's metering with Close's end: Close may run on
	// another goroutine than Recv (canonical.Stream allows it).
	mu   sync.Mutex
	done bool
}

// meter wraps a run's stream; start is the request's arrival, from which
// time to first delta and duration count (a backend whose Start waits for
// the upstream's first byte would otherwise show none of that wait).
func (b *Bridge) meter(ctx context.Context, s canonical.Stream, req *canonical.Request, target, backend string, start time.Time, span trace.Span, release func()) canonical.Stream {
	fe := frontendOf(ctx)
	return &metered{
		Stream: s, b: b, target: target, frontend: fe, backend: backend, span: span, release: release,
		thread: req.GetThreadId(), run: req.GetRunId(), start: start, key: keyName(ctx),
		ttfd:     b.metrics.TimeToFirstDelta.WithLabelValues(fe, backend),
		interval: b.metrics.DeltaInterval.Series(fe, backend).Tally(),
	}
}

func (m *metered) Recv() (*canonical.Event, error) {
	ev, err := m.Stream.Recv()
	if err != nil {
		return ev, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done { // closed meanwhile: the run's end is counted
		return ev, nil
	}
	m.events++
	if _, ok := ev.GetKind().(*canonical.KindBlockDelta); ok {
		// The interval is read from the events' stamps (a local run's
		// are this clock's, taken as the bridge took the event; a remote
		// run's are its owner's): a clock read per delta costs more than
		// the rest of the metering. Time to first delta is this clock's.
		at := ev.GetTimeUnixNano()
		if !m.delta {
			m.delta = true
			m.firstDelta = m.b.now().Sub(m.start)
			m.ttfd.Observe(m.firstDelta.Seconds())
		} else if at >= m.last && m.last != 0 {
			m.interval.Observe(time.Duration(at - m.last).Seconds())
		}
		m.last = at
	}
	if st, ok := canonical.TerminalOf(ev); ok && !m.done {
		m.done = true
		m.end(st, ev.GetLifecycle().GetError())
	}
	return ev, nil
}

// Buffered forwards the wrapped stream's count of events Recv returns
// without waiting (0 when it keeps none).
func (m *metered) Buffered() int {
	if b, ok := m.Stream.(canonical.Buffered); ok {
		return b.Buffered()
	}
	return 0
}

func (m *metered) Close() error {
	m.mu.Lock()
	if !m.done { // the client left before the terminal event: not "ok"
		m.done = true
		m.end(0, errAbandoned)
	}
	m.mu.Unlock()
	return m.Stream.Close()
}

// errAbandoned is the code and message of a run its client closed before
// it ended (outcome abandoned).
var errAbandoned = canonical.Errorf(canonical.CodeCanceled, "the client closed the run before it ended").Proto()

func (m *metered) end(st canonical.RunStatus, e *canonical.ErrorProto) {
	m.release()
	m.interval.Flush()
	outcome := "abandoned"
	switch st {
	case canonical.StatusCompleted:
		outcome = "completed"
	case canonical.StatusFailed:
		outcome = "failed"
	case canonical.StatusInterrupted:
		outcome = "interrupted"
	case canonical.StatusCancelled:
		outcome = "cancelled"
	}
	code := canonical.Code(e.GetCode())
	m.b.metrics.Runs.WithLabelValues(m.target, m.frontend, m.backend, outcome, code.String()).Inc()
	m.b.metrics.Events.WithLabelValues(m.frontend, m.backend).Add(float64(m.events))
	if code != canonical.CodeOK {
		m.b.metrics.Errors.WithLabelValues(code.String()).Inc()
	}
	m.span.SetAttributes(attribute.String("interlingua.outcome", outcome), attribute.Int("interlingua.events", m.events))
	if code != canonical.CodeOK {
		m.span.SetStatus(codes.Error, code.String()+": "+e.GetMessage())
	}
	m.span.End()
	args := []any{"thread", m.thread, "run", m.run, "target", m.target, "pair", m.frontend + ":" + m.backend,
		"outcome", outcome, "code", code.String(), "events", m.events,
		"ttfd_ms", millis(m.firstDelta), "duration_ms", millis(m.b.now().Sub(m.start))}
	if code != canonical.CodeOK {
		args = append(args, "error", e.GetMessage())
	}
	if m.key != "" {
		args = append(args, "key", m.key)
	}
	m.b.log.Info("run end", args...)
}

// millis is d in milliseconds, for logs: a JSON log writes a Duration as
// integer nanoseconds, which nobody reads as time.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// logRefused logs and counts a run that did not start (unknown target, a
// key at its limit, an upstream down when its backend starts...): it ends
// as a failure like any run, with its one run-end line.
func (b *Bridge) logRefused(ctx context.Context, req *canonical.Request, start time.Time, err error) {
	e := canonical.AsError(err)
	fe, backend := frontendOf(ctx), "none"
	if rt, _, ok := b.router.Resolve(req.GetTarget()); ok {
		backend = rt.Backend
	}
	b.metrics.Runs.WithLabelValues(req.GetTarget(), fe, backend, "refused", e.Code.String()).Inc()
	b.metrics.Errors.WithLabelValues(e.Code.String()).Inc()
	args := []any{"thread", req.GetThreadId(), "run", req.GetRunId(), "target", req.GetTarget(), "pair", fe + ":" + backend,
		"outcome", "refused", "code", e.Code.String(), "events", 0, "duration_ms", millis(b.now().Sub(start)), "error", e.Message}
	if e.Cause != nil && e.Cause.Error() != e.Message { // the detail kept from the client (an upstream's address)
		args = append(args, "cause", e.Cause.Error())
	}
	if k := keyName(ctx); k != "" {
		args = append(args, "key", k)
	}
	b.log.Info("run end", args...)
}

// keyName is the name of the caller's API key ("" with auth off); logs
// carry it, never the key.
func keyName(ctx context.Context) string {
	if p := canonical.PrincipalFrom(ctx); p != nil {
		return p.Name
	}
	return ""
}
