package triton

import (
	"cmp"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// FrontendConfig configures the Triton frontend. Zero values mean the
// documented defaults.
type FrontendConfig struct {
	// Runner starts the runs; required.
	Runner canonical.Runner
	// Logger receives the frontend's logs; discarded when nil.
	Logger *slog.Logger
	// Ready reports whether the server is ready: GET /v2/health/ready
	// answers 400 and model ready requests 503 while it is false. Nil means
	// always ready.
	Ready func() bool
	// MaxInputBytes bounds a generate request's body and its decoded
	// inputs, as Triton's --http-max-input-size does. Default (and for
	// zero or less) 4 MiB.
	MaxInputBytes int64
	// MaxOutputBytes bounds what one response holds before it is sent: the
	// whole text of /generate and of a non-streaming /generate_stream, and
	// the arguments and results of tool calls. Default (and for zero or
	// less) 16 MiB.
	MaxOutputBytes int
	// ServerName is the "name" of GET /v2. Default "interlingua".
	ServerName string
	// ServerVersion is the "version" of GET /v2: the Triton release whose
	// HTTP behaviour the frontend follows. Default "2.47.0".
	ServerVersion string
}

// Frontend serves Triton's generate extension and the KServe v2 health and
// metadata endpoints for every routed target (doc.go).
type Frontend struct {
	cfg FrontendConfig
	log *slog.Logger
}

// NewFrontend returns the frontend.
func NewFrontend(cfg FrontendConfig) *Frontend {
	if cfg.MaxInputBytes <= 0 {
		cfg.MaxInputBytes = 4 << 20
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = 16 << 20
	}
	cfg.ServerName = cmp.Or(cfg.ServerName, "interlingua")
	cfg.ServerVersion = cmp.Or(cfg.ServerVersion, "2.47.0")
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Frontend{cfg: cfg, log: log}
}

// Mount registers the frontend on mux: /v2 and everything under /v2/
// (unmatched paths there answer Triton's 404).
func (f *Frontend) Mount(mux *http.ServeMux) {
	mux.Handle("/v2", f)
	mux.Handle("/v2/", f)
}

// ServeHTTP routes a request as Triton's HTTP server does.
func (f *Frontend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if m := modelPath.FindStringSubmatch(p); m != nil {
		model, version, kind := m[1], m[2], m[3]
		switch kind {
		case "":
			f.serveModelMetadata(w, r, model, version)
		case "ready":
			f.serveModelReady(w, r, model, version)
		case "generate":
			f.serveGenerate(w, r, model, version, false)
		case "generate_stream":
			f.serveGenerate(w, r, model, version, true)
		default: // infer, config, stats, trace/setting
			writeError(w, http.StatusNotImplemented, "endpoint '"+kind+"' is not supported: this server implements the generate extension only")
		}
		return
	}
	if p == "/v2" {
		f.serveServerMetadata(w, r)
		return
	}
	if m := healthPath.FindStringSubmatch(p); m != nil {
		f.serveHealth(w, r, m[1])
		return
	}
	writeError(w, http.StatusNotFound, "Not Found")
}

func (f *Frontend) ready() bool { return f.cfg.Ready == nil || f.cfg.Ready() }

// lookup resolves a model and version as Triton's metadata lookup does:
// an unknown name is INVALID_ARG (400), an unknown version NOT_FOUND (404).
// Every routed target the caller's key may use is a model with version 1;
// one it may not use is unknown (canonical.VisibleTarget).
func (f *Frontend) lookup(r *http.Request, model, version string) *canonical.Error {
	v, msg := parseVersion(version)
	if msg != "" {
		return invalid("%s", msg)
	}
	if _, ok := canonical.VisibleTarget(f.cfg.Runner, canonical.PrincipalFrom(r.Context()), model); !ok {
		return invalid("Request for unknown model: '%s' is not found", model)
	}
	if v != -1 && v != 1 {
		return canonical.Errorf(canonical.CodeNotFound, "Request for unknown model: '%s' version %d is not found", model, v)
	}
	return nil
}

func methodNotAllowed(w http.ResponseWriter) {
	writeError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
}

// serveHealth answers GET /v2/health/live and /v2/health/ready by status
// code, with an empty body.
func (f *Frontend) serveHealth(w http.ResponseWriter, r *http.Request, kind string) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w)
		return
	}
	w.Header().Set("Content-Length", "0")
	if kind == "live" || f.ready() {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusBadRequest)
}

// serverMetadata is KServe's server metadata.
type serverMetadata struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

// serveServerMetadata answers GET /v2 (KServe server metadata).
func (f *Frontend) serveServerMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w)
		return
	}
	writeJSON(w, marshal(serverMetadata{Name: f.cfg.ServerName, Version: f.cfg.ServerVersion, Extensions: []string{"generate"}}))
}

// serveModelMetadata answers GET /v2/models/{m}[/versions/{v}].
func (f *Frontend) serveModelMetadata(w http.ResponseWriter, r *http.Request, model, version string) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w)
		return
	}
	if e := f.lookup(r, model, version); e != nil {
		writeError(w, statusOf(e.Code), e.Message)
		return
	}
	writeJSON(w, modelMetadata(model))
}

// serveModelReady answers GET /v2/models/{m}[/versions/{v}]/ready: 200
// when the target is routed, 400 "Model version not ready" otherwise (the
// reference's table), 503 while the server is not ready.
func (f *Frontend) serveModelReady(w http.ResponseWriter, r *http.Request, model, version string) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w)
		return
	}
	v, msg := parseVersion(version)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if !f.ready() {
		writeError(w, http.StatusServiceUnavailable, "Server not ready")
		return
	}
	if _, ok := canonical.VisibleTarget(f.cfg.Runner, canonical.PrincipalFrom(r.Context()), model); !ok || (v != -1 && v != 1) {
		writeError(w, http.StatusBadRequest, "Model version not ready")
		return
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

func writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// readBody reads the request body up to MaxInputBytes.
func (f *Frontend) readBody(r *http.Request) ([]byte, *canonical.Error) {
	limit := f.cfg.MaxInputBytes
	if r.ContentLength > limit {
		return nil, tooLarge(r.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, invalid("reading the request body: %v", err)
	}
	if int64(len(body)) > limit {
		return nil, tooLarge(int64(len(body)), limit)
	}
	return body, nil
}

// tooLarge is Triton's message for a body over the limit; for a chunked
// body, n counts the bytes read before the limit was hit.
func tooLarge(n, limit int64) *canonical.Error {
	return canonical.Errorf(canonical.CodeResourceExhausted,
		"request JSON size of %d bytes exceeds the maximum allowed input size of %d bytes. Use --http-max-input-size to increase the limit.", n, limit)
}

// serveGenerate answers POST .../generate (streaming false) and
// .../generate_stream (streaming true).
func (f *Frontend) serveGenerate(w http.ResponseWriter, r *http.Request, model, version string, streaming bool) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w)
		return
	}
	if e := f.lookup(r, model, version); e != nil {
		writeError(w, statusOf(e.Code), e.Message)
		return
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		writeError(w, http.StatusBadRequest, "Unsupported content-encoding, only 'identity' is supported.")
		return
	}
	body, e := f.readBody(r)
	if e == nil {
		var g *generateRequest
		if g, e = decodeRequest(body, model, f.cfg.MaxInputBytes); e == nil {
			f.generate(w, r, g, model, streaming)
			return
		}
	}
	writeError(w, statusOf(e.Code), e.Message)
}

// generate runs g and writes its responses.
func (f *Frontend) generate(w http.ResponseWriter, r *http.Request, g *generateRequest, model string, streaming bool) {
	out := &responder{w: w}
	if streaming {
		sw, err := sse.NewWriter(w)
		if err != nil {
			f.log.Error("generate_stream: response cannot stream", "err", err)
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		out.sw = sw
	}
	perDelta := streaming && g.stream
	echo := ""
	if !g.exclude && !perDelta {
		echo = g.prompt
	}
	enc := newResponseEncoder(g.id, model, perDelta, g.reasoning, echo, f.cfg.MaxOutputBytes)
	stream, err := f.cfg.Runner.Run(r.Context(), g.req)
	if err != nil {
		ce := canonical.AsError(err)
		writeError(w, statusOf(ce.Code), ce.Message)
		return
	}
	stream = canonical.AnswerStream(stream, f.cfg.MaxOutputBytes) // the agent's answer, on the root (doc.go)
	defer stream.Close()                                          // cancels the run if the client left
	ready, _ := stream.(canonical.Buffered)
	for {
		// Responses are queued while the run has more events at hand, and
		// flushed before a Recv that may wait: a burst is one write, and
		// no response waits for a later one.
		if out.queued() && (ready == nil || ready.Buffered() == 0) {
			if err := out.flush(); err != nil {
				f.log.Debug("generate_stream: client gone", "model", model, "err", err)
				return
			}
		}
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = canonical.Errorf(canonical.CodeInternal, "the run ended without a terminal event")
			}
			out.fail(canonical.AsError(err))
			return
		}
		resp, done, fail := enc.event(ev)
		if resp != nil {
			if err := out.queue(resp); err != nil {
				f.log.Debug("generate_stream: client gone", "model", model, "run", ev.GetRunId(), "err", err)
				return
			}
		}
		if !done {
			continue
		}
		switch {
		case fail != nil:
			out.fail(fail)
		case !perDelta:
			_ = out.send(enc.final())
		default:
			_ = out.start()
			_ = out.flush()
		}
		return
	}
}

// responder writes one generate response: headers when the first response
// (or the end) comes, then SSE events (sw set) or one JSON object.
type responder struct {
	w       http.ResponseWriter
	sw      *sse.Writer
	started bool
}

func (o *responder) start() error {
	if o.started {
		return nil
	}
	o.started = true
	h := o.w.Header()
	if o.sw != nil {
		sse.SetHeaders(h)
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		o.w.WriteHeader(http.StatusOK)
		return nil
	}
	h.Set("Content-Type", "application/json")
	o.w.WriteHeader(http.StatusOK)
	return nil
}

// send writes resp and flushes it with any responses queued before.
func (o *responder) send(resp []byte) error {
	if err := o.start(); err != nil {
		return err
	}
	if o.sw != nil {
		return o.sw.Data(resp)
	}
	_, err := o.w.Write(resp)
	return err
}

// queue writes resp; an SSE event waits in the writer's queue (at most
// sse.BatchBytes) until flush or the next send.
func (o *responder) queue(resp []byte) error {
	if o.sw == nil {
		return o.send(resp)
	}
	if err := o.start(); err != nil {
		return err
	}
	return o.sw.QueueData(resp)
}

func (o *responder) queued() bool { return o.sw != nil && o.sw.Queued() > 0 }

// flush writes the queued SSE events.
func (o *responder) flush() error {
	if o.sw == nil {
		return nil
	}
	return o.sw.Flush()
}

// fail reports a run's failure: Triton's error object with the status of
// its code before the first response, in band after it (with the
// responses queued before it). On generate_stream a failure that is the
// first response keeps the SSE framing with the error status, as Triton's
// StartResponse + AddErrorJson write it (reference section 5; Triton's QA
// test_generate_stream_response_error asserts the content type).
func (o *responder) fail(e *canonical.Error) {
	if !o.started && o.sw != nil {
		o.started = true
		sse.SetHeaders(o.w.Header())
		o.w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		o.w.WriteHeader(statusOf(e.Code))
		_ = o.sw.Data(appendError(nil, e.Message))
		return
	}
	if !o.started {
		writeError(o.w, statusOf(e.Code), e.Message)
		return
	}
	if o.sw != nil {
		_ = o.sw.Data(appendError(nil, e.Message))
	}
}
