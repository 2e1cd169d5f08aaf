// Package native serves Interlingua's own canonical protocol over HTTP:
// POST /v1/runs with a canonical Request in proto3 JSON answers with the
// run's canonical Events as newline-delimited proto3 JSON
// (application/x-ndjson), one line per event, flushed as it is written.
// It is the thinnest possible frontend: for debugging, scripts and the
// conformance runner, and what the shutdown tests drive.
//
// A request without threadId runs on a thread named by its runId: one the
// bridge makes up (128 random bits), or the client's, which names one run
// (a runId whose thread has events, or another API key's, is refused 409
// before any event).
//
// A request with "runtime": "agent" runs through the agent protocol's
// runtime (adapters/agent, Runtime): the thread keeps a conversation in
// the thread store, each run is sent it with its own input nodes as the
// new messages, and the run's steps come as state update, snapshot and
// checkpoint events beside the model's, as an agent-protocol client's
// thread does.
//
// Errors before the first event are a JSON body {"code","message"} with the
// HTTP status of the code (errors.go); after it, the stream carries them as
// the run's terminal lifecycle event, and a thread's event stream that
// fails (a replay reaching events the log has let go of, a log that
// cannot be read) ends with an error event (an Event whose error names
// the code and why). Limits: request body (MaxRequestBytes,
// default 4 MiB); a client that does not take an event within the server's
// write_timeout (default 30s) is cut off as a slow consumer and its run
// cancelled (bridge/writedeadline.go).
package native
