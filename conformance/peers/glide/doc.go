// Package glidepeer is a reference Glide router for tests: it serves
// Glide's chatStream WebSocket API (EinStack/glide 0.1.0-rc.1,
// pkg/api/http/handlers.go and pkg/routers/router.go) from scripted
// routers, so that Interlingua's Glide backend can be tested against the
// wire shapes, multiplexing and fallback sequence of a real Glide router.
//
// Like Glide: GET /v1/language/{router}/chatStream answers 426 "Upgrade
// Required" to a request that is not a WebSocket upgrade, 404
// {"name":"router_not_found","message":"router is not found"} to an unknown
// router, and 101 otherwise; every request frame starts a goroutine; all of
// them send to one writer goroutine; response frames are snake_case
// ChatStreamMessage JSON written as encoding/json's Encoder writes them
// (with a trailing newline); metadata is echoed; a model that fails
// mid-stream sends model_unavailable (no finish_reason) and the router
// falls back to its next model, restarting the text; when no model is left
// it sends all_models_unavailable with finish_reason "error"; a router
// without models sends no_model_configured.
//
// Unlike Glide (its bugs are not what the tests are about): a malformed
// frame or one without message gets a payload_parse_error reply instead of
// ending the read loop or crashing the process, a client disconnect
// cancels the requests, the retry policy's waits are skipped, and
// override_params is honoured (id entry, else name entry).
package glidepeer
