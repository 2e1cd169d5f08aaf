// Package inspect is the inspector: a page served by the daemon at
// /inspect, and the JSON API under /v1/inspect/ it uses, that shows a
// captured run as three synchronised columns — the client's wire, the
// canonical events the bridge handed the frontend, and the upstream's wire
// — with times, seqs, byte offsets and the frontend protocol's stated
// degradations (its conformance profile, conformance/profile) beside the
// events its wire cannot carry. A captured run can be replayed as any
// other frontend protocol's wire: its canonical events are fed to that
// protocol's frontend, mounted privately, and read by that protocol's
// client. docs/inspector.md documents the API.
//
// The inspector is off unless inspector.enabled is set. Only admin API
// keys (auth.keys[].admin), or any caller when auth is off (which the
// daemon allows on a loopback listener only), may use it; other keys get
// permission_denied. The page's static files carry no data and need no
// key; the page asks for one and sends it with every API call.
//
// Capture is opt-in: per run, by the request header X-Interlingua-Inspect
// (any value but "0", "off" or "false"); per target, by inspector.targets
// in the config or POST /v1/inspect/capture. Each column of a capture is
// bounded by max_bytes and by max_duration after the run starts; past
// either, bytes are counted, not kept, and the run says it was truncated.
// At most max_runs captures are kept, none older than max_age.
//
// Costs when off: the bridge checks one nil pointer per run, the HTTP
// backends' transport (internal/wiretap) one atomic per request, and no
// middleware is installed.
//
// Limits of the recording: a WebSocket's client wire is recorded from its
// hijacked connection (frames as sent); upstream wire is recorded for
// backends whose HTTP client is wrapped by internal/wiretap (the backends
// built on internal/bodystream: triton, openai, anthropic, responses) and
// only for runs this instance hosts. Byte offsets are into the bodies of
// the client's response and the upstream's response, taken when the
// frontend received the event: the event's bytes lie at or after them.
package inspect
