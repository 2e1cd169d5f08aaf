// Package triton speaks Triton Inference Server's generate extension
// (https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_generate.md,
// marked provisional upstream; the behaviour followed is
// src/http_server.cc at commit e1db8a6, Triton 2.47–2.73) and the KServe
// v2 health and metadata endpoints Triton clients check
// (https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/).
// It works in both directions; the choices it makes where Triton's
// behaviour is not ours to copy are stated below.
//
// # Frontend: we serve Triton's HTTP API
//
// Every routed target is published as a virtual Triton model, version "1",
// platform "interlingua", with TRT-LLM-ensemble-style inputs (text_input
// BYTES [-1,1] required; max_tokens, stream, bad_words, stop_words,
// temperature, top_p, top_k, seed, exclude_input_in_output,
// sampling_parameters optional) and one output text_output, so genai-perf,
// TRT-LLM and vLLM request bodies work unchanged.
//
//   - POST /v2/models/{m}[/versions/{v}]/generate and /generate_stream. The
//     body is mapped as Triton maps it: document order, the first of
//     duplicate keys, "parameters" as a nested object whose keys follow the
//     same rule, model inputs checked by datatype and shape, every other
//     key a typed request parameter (string, int, bool, double); objects,
//     arrays and null there are refused. Errors carry Triton's exact
//     messages and statuses (400 unknown model, 404 unknown version, 405
//     wrong method, 500 for Triton's INTERNAL-coded parse errors).
//   - Canonical request: text_input is the input "prompt" (a user text
//     node); the other inputs and all parameters become typed parameters
//     (stop_words and bad_words as lists of strings). The request "id" is a
//     string parameter too and the extension triton.request_id; the JSON
//     text of each number is kept in the extension triton.numbers, so ints
//     stay ints and 64-bit seeds keep every digit through a Triton backend.
//     The scalar members of a vLLM-style sampling_parameters JSON string
//     are copied into parameters the request does not set itself.
//   - Responses are {"id","model_name","model_version","text_output"} (id
//     only when the request had a non-empty one), keys in alphabetical
//     order, written compact (the JSON rapidjson writes, though not byte
//     for byte: a control character's \u escape is in lower-case hex). /generate_stream
//     with "stream": true writes one "data: <json>\n\n" event per text
//     delta, flushed at once; without it, one event with the whole text.
//     There is no [DONE]: the stream ends with the body. /generate answers
//     one object with the whole text (the "stream" input is ignored there).
//     exclude_input_in_output defaults to true; false echoes the prompt
//     before the text in the non-streaming forms only.
//   - Headers go out with the first response, so a run that fails before
//     its first token gets {"error": ...} as application/json with the
//     status of its code (errors.go); after it the error is written in
//     band as data: {"error": ...} under the 200 already sent.
//   - GET /v2/health/live (200 while the process runs), /v2/health/ready
//     (200 or 400 by FrontendConfig.Ready), /v2 (server metadata listing
//     the "generate" extension), /v2/models/{m} (metadata; 400 unknown) and
//     /v2/models/{m}/ready (200 when routed; 400 "Model version not ready"
//     otherwise, as the reference's table says; 503 "Server not ready").
//     Other methods: 405; /infer, /config, /stats, /trace/setting: 501;
//     other paths under /v2: 404 {"error":"Not Found"}.
//
// What a richer backend produces, rendered on this text-only wire. An
// agent's run is rendered as canonical.AnswerStream views it: its answer,
// the assistant messages, tool activity and errors of the root namespace
// and of the graph's own nodes (one-element namespaces such as
// LangGraph's ["model:<task id>"] and ["tools:<task id>"], unless a tool
// call started them), one message after another, with interrupts from
// any namespace; as LangGraph's messages stream mode without subgraphs,
// a subgraph's own nodes (namespaces two or more deep) are not the answer:
//
//   - Reasoning is dropped unless the request sets the parameter
//     include_reasoning to true. Then it is rendered inside text_output
//     wrapped in <think> and </think>, as vLLM-on-Triton serves a
//     reasoning model whose output is not parsed: streamed, the first
//     reasoning delta carries "<think>" and the block's end is its own
//     "</think>" response.
//   - Tool activity is surfaced as response parameters (Triton puts
//     response parameters beside the outputs as top-level keys), never in
//     text_output. Streaming: a finished tool-call block is a response
//     with text_output "" and tool_call_id, tool_call_name and
//     tool_call_arguments (the arguments' JSON text); a tool result is one
//     with tool_call_id and tool_call_result (the result as JSON text); a
//     tool failure one with tool_call_id and tool_call_error. Aggregated
//     (/generate and non-streaming /generate_stream): one parameter
//     tool_calls, a JSON array of {"id","name","arguments","result" or
//     "error"}.
//   - An input request (human in the loop) is surfaced the same way, as
//     parameters interrupt_id and interrupt (the payload as JSON text); the
//     run then ends like a completed one (Triton cannot resume it).
//   - Dropped: namespaces two or more deep (a subgraph's own nodes) and
//     nested runs a tool call started, non-assistant messages, data and ref
//     blocks, state, checkpoints, custom events and non-terminal errors.
//
// Stated degradations from Triton: the body is parsed before mapping as
// rapidjson does, but NaN and Infinity literals and invalid UTF-8 in
// strings are refused (rapidjson accepts them); syntax error offsets may
// differ from rapidjson's in edge cases; an input with a batch of more
// than one element is refused with "input 'X' must have exactly 1
// element" (Triton would run a batch); a body sent chunked over the limit
// reports the bytes read, not its full size; canonical parameters are
// float64, so a parameter's int or double type survives only through
// triton.numbers.
//
// # Backend: we call a Triton server
//
// Backend sends POST {url}/v2/models/{model}[/versions/{v}]/generate_stream
// (or /generate, BackendConfig.Endpoint) with text_input (the request's
// prompt text), "stream", "exclude_input_in_output": true, the request id
// and the parameters; with metadata on, it reads GET /v2/models/{model}
// once per model, types the parameters by the model's inputs, and fills
// max_tokens, bad_words and stop_words when the model has those inputs and
// the request does not set them (reference section 8.2). Objects, nulls
// and lists that are not BYTES inputs are not sent. Sampling settings
// (temperature, top_p, ...) go as top-level keys: model inputs where the
// model has them (TRT-LLM), request parameters otherwise, which
// vllm_backend reads when no sampling_parameters input is sent; a
// sampling_parameters string the client sent is passed on as is. A server
// that answers /generate_stream with one JSON object is read as /generate.
//
// The SSE body is parsed incrementally (LF, CRLF or CR line ends, "data:"
// with or without a space, events and runes split across reads anywhere);
// text_output is a delta or, with text_output: cumulative, the whole text
// so far (converted to deltas); an event object with an "error" key ends
// the run failed with the upstream's message (code Internal under a 200,
// else the status's code); EOF ends it completed. An error status before
// the first response fails Start with the status's code and the message of
// the body, read as SSE when it is text/event-stream, else as Triton's
// error object. Closing the stream closes the upstream request, which
// Triton passes on to the model as a cancellation. Each run yields
// running, one assistant message (metadata: provider, model,
// model_version) with one text block, and the terminal event; vLLM's
// finish_reason and token counts become the finish reason and usage.
//
// Limits: FrontendConfig.MaxInputBytes (request body and decoded inputs,
// default 4 MiB), FrontendConfig.MaxOutputBytes (aggregated text and tool
// arguments, default 16 MiB), JSON nesting depth 100 (Triton's), 65,536
// JSON values per request (ours: the parsed tree stays near the body's
// size);
// BackendConfig.MaxEventBytes (one SSE event, default 4 MiB),
// BackendConfig.MaxResponseBytes (a /generate body, default 16 MiB; error
// and metadata bodies, at most 1 MiB), BackendConfig.Timeout (one run,
// default 10m), at most 1024 models' metadata cached. A breach is
// CodeResourceExhausted naming the limit.
package triton
