package canonical

import "context"

// Backend starts runs on an upstream (or a built-in producer).
type Backend interface {
	// Start begins a run for req. An error returned here (unknown target,
	// refused request, upstream down) means no event was produced; once a
	// Stream is returned every outcome, failure included, arrives as events.
	Start(ctx context.Context, req *Request) (Stream, error)
}

// Stream is one run's events.
//
// Recv returns the events in order; the last is the run's terminal lifecycle
// event, after which Recv returns io.EOF. Recv is called from one goroutine.
// Close releases the stream and cancels the run if it has not ended; it may
// be called from another goroutine to abort a blocked Recv, and more than once.
type Stream interface {
	Recv() (*Event, error)
	Close() error
}

// Buffered is implemented by streams that know how many events Recv
// returns without waiting (the bridge's runs; the Triton, Evergreen and
// agent backends' streams). A frontend writes that many events at once and
// flushes only before a Recv that may wait, so a burst costs one write and
// no event waits for a later one. It is called from the goroutine that
// calls Recv.
type Buffered interface {
	Buffered() int
}

// TargetInfo describes a routable target.
type TargetInfo struct {
	// Name is the target name clients use.
	Name string
	// Backend is the configured backend that serves it.
	Backend string
}

// Runner is what a frontend calls to start or join runs; the bridge routes
// each request to its backend, locally or over NATS. The XML action executor
// calls it for nested runs.
type Runner interface {
	// Run starts a run. Unknown targets fail with CodeNotFound before any
	// event. The returned Stream's events carry thread id, run id and seq.
	Run(ctx context.Context, req *Request) (Stream, error)
	// Target resolves a target name; false when no route serves it.
	Target(name string) (TargetInfo, bool)
	// Targets lists the concrete (non-glob) target names routed.
	Targets() []TargetInfo
}

// VisibleTarget resolves target as caller p sees it: false when no route
// serves it or p's key may not use it. A key cannot tell the targets it may
// not use from names no route serves, on any frontend: the bridge's
// /v1/targets lists only its own, and OpenAI answers a model the key may
// not use as one that "does not exist or you do not have access to it".
func VisibleTarget(r Runner, p *Principal, target string) (TargetInfo, bool) {
	info, ok := r.Target(target)
	if !ok || !p.Allows(target) {
		return TargetInfo{}, false
	}
	return info, true
}

// Tools calls tools by name: built in, or NATS micro services.
type Tools interface {
	// Call runs tool name with JSON arguments and returns its JSON result.
	// A tool not in the allowlist fails with CodeNotFound and never runs.
	Call(ctx context.Context, name string, args []byte) ([]byte, error)
}

// Observer streams a thread's events on any instance: the replay log after
// seq since, then live events. The stream does not end by itself; Close it.
// Runs whose owner vanishes end with failed (CodeUnavailable).
type Observer interface {
	Observe(ctx context.Context, thread string, since uint64) (Stream, error)
	// LastSeq is the thread's last seq in the replay log (0: none): an
	// Observe from it gives the events that come after.
	LastSeq(ctx context.Context, thread string) (uint64, error)
}

// Poller is implemented by the streams Observe returns: a reader with no
// goroutine of its own polls them. Poll appends what is ready, up to max
// events, without waiting for more (it may read the replay log to catch
// up); the function given to Notify, before the first Poll, is called
// without blocking when more may be ready. A stream is read with Recv or
// with Poll, not both.
type Poller interface {
	Stream
	Poll(out []*Event, max int) ([]*Event, error)
	Notify(func())
}

// Runtime is the run logic of a protocol that keeps thread state (the agent
// protocol's conversation, values and checkpoints). The bridge starts it in
// place of the backend, on the instance that hosts the backend, for each
// request that names it (Request.Runtime); it starts the backend itself.
// What its Stream adds to the backend's events takes the thread's seqs and
// enters the replay log with them, so every frontend on every instance
// reads one sequence of events, and runs of a thread are serialized by the
// bridge's thread lease. A runtime keeps its durable state in the
// ThreadStore it was built with.
type Runtime interface {
	Start(ctx context.Context, req *Request, backend Backend) (Stream, error)
}
