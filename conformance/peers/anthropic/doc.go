// Package anthropic is a reference Anthropic Messages upstream: an
// http.Handler serving POST /v1/messages that plays scripted models with
// the event sequences Anthropic documents, for the anthropic backend's
// tests and the conformance matrix's column.
//
// What it reproduces, and where from:
//
//   - The streaming framing and event order of
//     https://docs.anthropic.com/en/docs/build-with-claude/streaming:
//     every event as "event: <type>" plus "data: <json>" whose type
//     matches; message_start (a Message with empty content, null
//     stop_reason, usage with input tokens and a small output count),
//     then per block content_block_start, its deltas and
//     content_block_stop, a ping after the first block's start (as the
//     doc's first example has it), message_delta with stop_reason,
//     stop_sequence and cumulative usage, message_stop.
//   - Delta types of RawContentBlockDelta
//     (anthropic-sdk-typescript src/resources/messages/messages.ts):
//     text_delta, input_json_delta (a tool_use block starts with
//     "input":{} and its first fragment is "", as the doc's tool example
//     shows), thinking_delta, and one signature_delta right before a
//     thinking block's stop; a redacted_thinking block's data arrives
//     whole in its start.
//   - Errors: before the stream, the status and
//     {"type":"error","error":{"type","message"},"request_id"} of
//     https://platform.claude.com/docs/en/api/errors; after it, "event:
//     error" with {"type":"error","error":{...}} and no message_stop.
//   - Headers it checks: anthropic-version must be present (a missing one
//     is the API's 400 "anthropic-version: header is required"); the key
//     from x-api-key or Authorization: Bearer when the peer has one (401
//     authentication_error otherwise).
//
// A model can also cut the connection mid-stream (a reset, no
// message_stop), hang until the client leaves, or echo the last user
// text a word per delta.
package anthropic
