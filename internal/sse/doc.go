// Package sse is Server-Sent Events framing as the WHATWG HTML Living
// Standard defines it (section 9.2, "Server-sent events": the
// text/event-stream format and the EventSource parsing and dispatch rules),
// shared by every adapter that speaks SSE (Triton generate_stream, the
// LangChain agent protocol, OpenAI Chat Completions and Responses,
// Anthropic Messages, the XML renderer).
//
// Directions:
//
//   - Writer writes events to an http.ResponseWriter. Each event is built in
//     one reused buffer, handed to the ResponseWriter in a single Write and
//     flushed at once through http.NewResponseController, as Caddy's reverse
//     proxy does for text/event-stream: nothing waits in a buffer of ours or
//     of a proxy (SetHeaders sends X-Accel-Buffering: no). The one exception
//     is an event its caller queues because the next event is already there
//     to be written (QueueData, QueueEvent): queued events go out together,
//     in one Write and one flush, as soon as the caller writes an event
//     without queueing it or calls Flush (which it does before it waits for
//     anything), or when they reach BatchBytes (32 KiB) — a burst costs one
//     system call instead of one per event, and no event waits for a later
//     one. NewWriter refuses a ResponseWriter that cannot flush. Data is
//     split on LF, CRLF and CR into one data line per line, so a reader
//     gets the data back with its line ends normalised to LF; data without
//     line ends is written as exactly "data: <data>\n\n".
//   - Hijack takes an HTTP/1.1 response's connection over from net/http
//     once its headers are set, for a stream that mostly waits: the Conn
//     writes each event batch as one chunk of a chunked body (RFC 9112
//     §7.1) within a write timeout, and calls back when the peer hangs
//     up, so no handler (its stack, net/http's buffers) stays behind an
//     idle stream. NewConnWriter is a Writer on it. HTTP/2 and HTTP/1.0
//     are declined: those streams stay on their handler.
//   - Keepalive writes a heartbeat (a comment, Anthropic's ping) on a
//     stream left silent for an interval, from a timer under the writer's
//     lock, so a stream's one goroutine waits in its run's Recv and
//     writes each event as it comes.
//   - Parser reads a stream fed in chunks cut at any byte (Feed and End, as
//     the repository's streaming converters do). Lines end in LF, CRLF or
//     CR, also when a CRLF is split between chunks; a UTF-8 byte order mark
//     at the very start is skipped.
//
// Stated degradations from the standard:
//
//   - The Parser works on bytes and does not decode UTF-8: invalid UTF-8
//     passes through unchanged instead of becoming U+FFFD. Callers that emit
//     text run it through canonical's UTF-8 accumulator.
//   - At end of stream an event without its closing blank line is
//     discarded, as the standard says, unless Parser.DispatchIncompleteAtEnd
//     is set for upstreams that omit the last blank line.
//   - Event.Event is the event field as sent, "" when there was none;
//     EventSource would report that as "message".
//   - A retry value above math.MaxInt32 milliseconds is clamped to it.
//
// Limits: a Parser holds at most Parser.MaxEventBytes (default 4 MiB) bytes
// of peer data at once — the line being read plus the pending event's data,
// event type and the last event ID — and Feed fails with a *LimitError,
// whose cause is a canonical ResourceExhausted error, the moment a stream
// would need more. A Writer queues at most BatchBytes (32 KiB) of events
// plus the one that crosses it, and keeps its buffer between events only
// while it is at most 64 KiB.
//
// Neither Writer nor Parser is safe for concurrent use: each belongs to one
// stream and is used by one goroutine at a time (a Keepalive's send runs
// under the lock the stream's writes hold).
package sse
