package responses

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/bodystream"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/protocol"
)

// BackendConfig configures a backend that calls one OpenAI-Responses
// server (OpenAI, vLLM, Ollama, another Interlingua). Zero values mean the
// documented defaults; options come from the backend's YAML options.
type BackendConfig struct {
	// BaseURL is the API's root, the one that holds /responses, e.g.
	// https://api.openai.com/v1 or http://vllm:8000/v1 (as the OpenAI SDKs
	// take it); required.
	BaseURL string `yaml:"base_url"`
	// Model is the upstream model. Default: the run's target (after the
	// route's rename).
	Model string `yaml:"model"`
	// APIKey says where the upstream's key is ({env: NAME} or {file:
	// PATH}), sent as Authorization: Bearer.
	APIKey protocol.SecretRef `yaml:"api_key"`
	// Headers are added to every upstream request.
	Headers map[string]string `yaml:"headers"`
	// Store is sent as store: false by default: the bridge keeps the
	// conversation and sends it whole each time (the upstream keeps
	// nothing); true lets the upstream store its responses too.
	Store bool `yaml:"store"`
	// Timeout bounds one run, from the request to the last event.
	// Default 10m.
	Timeout time.Duration `yaml:"timeout"`
	// MaxEventBytes bounds one SSE event of the stream. Default 4 MiB.
	MaxEventBytes int `yaml:"max_event_bytes"`
	// MaxOutputBytes bounds the text and arguments of one run. Default
	// 16 MiB.
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// MaxResponseBytes bounds an error body or a non-streamed response.
	// Default 16 MiB.
	MaxResponseBytes int `yaml:"max_response_bytes"`

	// HTTPClient makes the requests. Default: a client with its own
	// transport, whose idle connections Close releases.
	HTTPClient *http.Client `yaml:"-"`
	// Logger receives the backend's logs; discarded when nil.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports every invalid field, by its option name.
func (c *BackendConfig) Validate() error {
	var errs []error
	if _, err := protocol.UpstreamURL("base_url", c.BaseURL, "the API root with /v1, as the OpenAI SDKs take it"); err != nil {
		errs = append(errs, err)
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("timeout: must not be negative"))
	}
	for name, v := range map[string]int{"max_event_bytes": c.MaxEventBytes, "max_output_bytes": c.MaxOutputBytes, "max_response_bytes": c.MaxResponseBytes} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative", name))
		}
	}
	if _, err := c.APIKey.Read("api_key"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Backend is a canonical.Backend calling a Responses server. It is safe
// for concurrent use; its streams run no goroutines.
type Backend struct {
	up   *bodystream.Upstream
	cfg  BackendConfig
	base string
	key  string
	log  *slog.Logger
}

// NewBackend validates cfg and returns the backend.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Minute)
	cfg.MaxEventBytes = cmp.Or(cfg.MaxEventBytes, sse.DefaultMaxEventBytes)
	cfg.MaxOutputBytes = cmp.Or(cfg.MaxOutputBytes, 16<<20)
	cfg.MaxResponseBytes = cmp.Or(cfg.MaxResponseBytes, 16<<20)
	key, err := cfg.APIKey.Read("api_key")
	if err != nil {
		return nil, err
	}
	b := &Backend{up: bodystream.NewUpstream("responses", cfg.HTTPClient, cfg.Headers),
		cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), key: key, log: cfg.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

// Close releases the idle connections of the backend's own transport.
func (b *Backend) Close() error { return b.up.Close() }

// redacted is the base URL without credentials, for logs.
func (b *Backend) redacted() string { return bodystream.Redacted(b.base, "responses") }

// Start implements canonical.Backend: it sends the request with stream
// true and waits for the response headers. An upstream error before the
// stream is returned with its canonical code and the upstream's message.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	model := cmp.Or(b.cfg.Model, req.GetTarget())
	if model == "" {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "responses backend: no model: set the backend's model option or a target")
	}
	body, err := encodeCreate(req, model, b.cfg.Store)
	if err != nil {
		return nil, err
	}
	b.log.Debug("responses request", "run", req.GetRunId(), "model", model)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	resp, e := b.up.Post(ctx, b.base+"/responses", body, b.headers, b.httpError)
	if e != nil {
		cancel()
		return nil, e
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	dec := newStreamDecoder(b.cfg.MaxEventBytes, b.cfg.MaxOutputBytes, req.GetRunId()+"-")
	c := bodystream.Config{Ctx: ctx, Cancel: cancel, Body: resp.Body, Dec: dec, Backend: "responses", Source: b.redacted(),
		First: dec.b.Lifecycle(nil, canonical.StatusRunning)}
	if mt == "application/json" { // the upstream answered one JSON response, not a stream
		c.Object, c.MaxObjectBytes, c.MaxObjectOption = dec.object, b.cfg.MaxResponseBytes, "max_response_bytes"
	}
	return bodystream.New(c), nil
}

// headers sets the request's headers: the protocol's and the key.
func (b *Backend) headers(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	if b.key != "" {
		h.Set("Authorization", "Bearer "+b.key)
	}
}

// httpError reads an error response in OpenAI's form (or other text).
func (b *Backend) httpError(resp *http.Response) *canonical.Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, int64(min(b.cfg.MaxResponseBytes, 1<<20))))
	var eb errorBody
	msg := ""
	if json.Unmarshal(data, &eb, json.AllowDuplicateNames(true)) == nil && eb.Error.Message != "" {
		msg = eb.Error.Message
	} else {
		msg = strings.TrimSpace(strings.ToValidUTF8(string(data), "\uFFFD"))
		if len(msg) > 512 {
			msg = strings.ToValidUTF8(msg[:512], "")
		}
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return canonical.WireError(canonical.CodeOfHTTPStatus(resp.StatusCode), msg)
}

// object decodes a whole JSON response (a server that does not stream).
func (d *streamDecoder) object(data []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	var r upResponse
	if err := json.Unmarshal(data, &r, upstreamJSON); err != nil {
		return out, canonical.Errorf(canonical.CodeInternal, "responses backend: the upstream's response is not valid JSON: %s", jsonErrorText(err))
	}
	if r.Status == "failed" || r.Status == "cancelled" {
		return d.failed(&r, out), nil
	}
	return d.terminal(&r, out), nil
}
