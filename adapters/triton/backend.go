package triton

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/bodystream"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/protocol"
)

// BackendConfig configures a backend that calls one Triton server (plain
// Triton, TRT-LLM or vLLM behind Triton) over its generate extension. Zero
// values mean the documented defaults; options come from the backend's
// YAML options.
type BackendConfig struct {
	// URL is the server's base URL, e.g. http://triton:8000; required.
	URL string `yaml:"url"`
	// Model is the upstream model name. Default: the run's target (after
	// the route's rename).
	Model string `yaml:"model"`
	// Version is the upstream model version. Default: none (the server's
	// version policy picks one).
	Version string `yaml:"version"`
	// Endpoint is generate_stream (a response per token, "stream": true)
	// or generate (one response, "stream": false). Default generate_stream.
	Endpoint string `yaml:"endpoint"`
	// TextOutput says how the upstream's streamed text_output reads: delta
	// (each response carries new text, as TRT-LLM and vLLM send it) or
	// cumulative (each carries all text so far; converted to deltas).
	// Default delta.
	TextOutput string `yaml:"text_output"`
	// Timeout bounds one run, from the request to the last response.
	// Default 10m.
	Timeout time.Duration `yaml:"timeout"`
	// MaxTokens is sent as max_tokens when the model has that input (the
	// TRT-LLM ensemble requires it) and the request sets none. Default 1024.
	MaxTokens int `yaml:"max_tokens"`
	// Metadata is auto (fetch GET /v2/models/{m} once per model to learn
	// its inputs, and type the request by them) or off. Default auto.
	Metadata string `yaml:"metadata"`
	// MaxEventBytes bounds one SSE event of the stream. Default 4 MiB.
	MaxEventBytes int `yaml:"max_event_bytes"`
	// MaxResponseBytes bounds a /generate response body, an error body and
	// a metadata body. Default 16 MiB.
	MaxResponseBytes int `yaml:"max_response_bytes"`
	// Headers are added to every upstream request (e.g. Authorization).
	Headers map[string]string `yaml:"headers"`

	// HTTPClient makes the requests. Default: a client with its own
	// transport, whose idle connections Close releases.
	HTTPClient *http.Client `yaml:"-"`
	// Logger receives the backend's logs; discarded when nil.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports every invalid field, by its option name.
func (c *BackendConfig) Validate() error {
	var errs []error
	if _, err := protocol.UpstreamURL("url", c.URL, "the Triton server's base URL"); err != nil {
		errs = append(errs, err)
	}
	if c.Version != "" && strings.Trim(c.Version, "0123456789") != "" {
		errs = append(errs, fmt.Errorf("version: %q is not a number", c.Version))
	}
	oneOf := func(name, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		errs = append(errs, fmt.Errorf("%s: %q is not %s", name, v, strings.Join(allowed[1:], " or ")))
	}
	oneOf("endpoint", c.Endpoint, "", "generate_stream", "generate")
	oneOf("text_output", c.TextOutput, "", "delta", "cumulative")
	oneOf("metadata", c.Metadata, "", "auto", "off")
	if c.Timeout < 0 {
		errs = append(errs, errors.New("timeout: must not be negative"))
	}
	for name, v := range map[string]int{"max_tokens": c.MaxTokens, "max_event_bytes": c.MaxEventBytes, "max_response_bytes": c.MaxResponseBytes} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative", name))
		}
	}
	return errors.Join(errs...)
}

// maxCachedModels bounds the metadata cache.
const maxCachedModels = 1024

// Backend is a canonical.Backend calling a Triton server. It is safe for
// concurrent use; its streams run no goroutines.
type Backend struct {
	up   *bodystream.Upstream
	cfg  BackendConfig
	base string
	log  *slog.Logger

	mu   sync.Mutex
	meta map[string]modelInputs
}

// NewBackend validates cfg and returns the backend.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Endpoint = cmp.Or(cfg.Endpoint, "generate_stream")
	cfg.TextOutput = cmp.Or(cfg.TextOutput, "delta")
	cfg.Metadata = cmp.Or(cfg.Metadata, "auto")
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Minute)
	cfg.MaxTokens = cmp.Or(cfg.MaxTokens, 1024)
	cfg.MaxEventBytes = cmp.Or(cfg.MaxEventBytes, sse.DefaultMaxEventBytes)
	cfg.MaxResponseBytes = cmp.Or(cfg.MaxResponseBytes, 16<<20)
	b := &Backend{up: bodystream.NewUpstream("triton", cfg.HTTPClient, cfg.Headers), cfg: cfg,
		base: strings.TrimRight(cfg.URL, "/"), log: cfg.Logger, meta: map[string]modelInputs{}}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

func (b *Backend) modelURL(model string) string {
	u := b.base + "/v2/models/" + url.PathEscape(model)
	if b.cfg.Version != "" {
		u += "/versions/" + b.cfg.Version
	}
	return u
}

// Close releases the idle connections of the backend's own transport.
func (b *Backend) Close() error { return b.up.Close() }

// redacted is the base URL without credentials, for messages.
func (b *Backend) redacted() string { return bodystream.Redacted(b.base, "triton") }

// Start implements canonical.Backend: it sends the request and waits for
// the response headers (Triton sends them with the first response). An
// upstream error before that is returned with its canonical code and the
// upstream's message.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	model := cmp.Or(b.cfg.Model, req.GetTarget())
	if model == "" {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "triton backend: no model: set the backend's model option or a target")
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	inputs, err := b.inputs(ctx, model)
	if err != nil {
		cancel()
		return nil, err
	}
	streaming := b.cfg.Endpoint == "generate_stream"
	body := encodeRequest(req, streaming, inputs, b.cfg.MaxTokens)
	b.log.Debug("triton request", "run", req.GetRunId(), "model", model, "endpoint", b.cfg.Endpoint)
	resp, e := b.up.Post(ctx, b.modelURL(model)+"/"+b.cfg.Endpoint, body, func(h http.Header) {
		h.Set("Content-Type", "application/json")
		if streaming {
			h.Set("Accept", "text/event-stream")
		}
	}, b.httpError)
	if e != nil {
		cancel()
		return nil, e
	}
	// A server that answers generate_stream with one JSON object (no
	// streaming support) is read as /generate.
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	dec := newStreamDecoder(b.cfg.TextOutput == "cumulative", b.cfg.MaxEventBytes, resp.StatusCode, req.GetRunId()+"-")
	c := bodystream.Config{Ctx: ctx, Cancel: cancel, Body: resp.Body, Dec: dec, Backend: "triton", Source: b.redacted(),
		First: dec.b.Lifecycle(nil, canonical.StatusRunning)}
	if !streaming || mt == "application/json" {
		c.Object, c.MaxObjectBytes, c.MaxObjectOption = dec.Object, b.cfg.MaxResponseBytes, "max_response_bytes"
	}
	return bodystream.New(c), nil
}

// httpError reads an error response: an SSE body (a first response that
// failed), Triton's {"error": ...} object, or other text.
func (b *Backend) httpError(resp *http.Response) *canonical.Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, int64(min(b.cfg.MaxResponseBytes, 1<<20))))
	msg := errorMessage(resp.Header.Get("Content-Type"), data)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return canonical.WireError(codeOf(resp.StatusCode, msg), msg)
}

// errorMessage finds the message in an error body.
func errorMessage(contentType string, data []byte) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "text/event-stream" {
		var p sse.Parser
		p.DispatchIncompleteAtEnd = true
		evs, _ := p.Feed(data, nil)
		evs, _ = p.End(evs)
		for _, ev := range evs {
			if m := errorMessage("application/json", ev.Data); m != "" {
				return m
			}
		}
		return ""
	}
	var f responseFields
	var r responseReader
	if err := r.read(data, &f, false); err == nil && f.hasErr {
		return strings.ToValidUTF8(f.err, "\uFFFD")
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(data), "\uFFFD"))
	if len(s) > 512 {
		s = s[:512]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// inputs returns the model's inputs from its metadata, cached once per
// model; nil when metadata is off or the server does not serve it. A
// server that does not know the model fails the run with CodeNotFound.
func (b *Backend) inputs(ctx context.Context, model string) (modelInputs, error) {
	if b.cfg.Metadata == "off" {
		return nil, nil
	}
	b.mu.Lock()
	in, ok := b.meta[model]
	b.mu.Unlock()
	if ok {
		return in, nil
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, b.modelURL(model), nil)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "triton backend: %v", err)
	}
	b.up.SetHeaders(hreq.Header)
	resp, err := b.up.Client.Do(hreq)
	if err != nil {
		return nil, b.up.TransportError(ctx, http.MethodGet, hreq.URL.String(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		ce := b.httpError(resp)
		if ce.Code == canonical.CodeNotFound && strings.HasPrefix(ce.Message, unknownModelPrefix) {
			return nil, ce
		}
		return nil, nil // no metadata endpoint: send the request untyped
	}
	var md struct {
		Inputs []struct {
			Name     string `json:"name"`
			Datatype string `json:"datatype"`
		} `json:"inputs"`
	}
	// The first JSON value of the body, read as encoding/json read it before
	// (names matched without regard to case, the last of duplicates, invalid
	// UTF-8 replaced); Triton writes one object with exact names.
	dec := json.NewDecoder(io.LimitReader(resp.Body, int64(min(b.cfg.MaxResponseBytes, 1<<20))))
	if err := json.UnmarshalDecode(dec, &md, json.MatchCaseInsensitiveNames(true), json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true)); err != nil {
		return nil, nil
	}
	in = modelInputs{}
	for _, i := range md.Inputs {
		in[i.Name] = i.Datatype
	}
	b.mu.Lock()
	if len(b.meta) < maxCachedModels {
		b.meta[model] = in
	}
	b.mu.Unlock()
	return in, nil
}
