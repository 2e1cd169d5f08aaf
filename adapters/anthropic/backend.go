package anthropic

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

// BackendConfig configures a backend that calls one Anthropic Messages
// server (Anthropic, or vLLM, sglang, Ollama, ... serving the same API).
// Zero values mean the documented defaults; options come from the
// backend's YAML options.
type BackendConfig struct {
	// BaseURL is the server's root, without /v1, as the Anthropic SDKs
	// take it (https://api.anthropic.com); required.
	BaseURL string `yaml:"base_url"`
	// Model is the upstream model. Default: the run's target (after the
	// route's rename).
	Model string `yaml:"model"`
	// APIKey says where the key is: an environment variable or a file
	// (trailing newline ignored). Default: no key.
	APIKey protocol.SecretRef `yaml:"api_key"`
	// Auth is how the key is sent: x-api-key or bearer (Authorization:
	// Bearer). Default x-api-key.
	Auth string `yaml:"auth"`
	// AnthropicVersion is the anthropic-version header. Default 2023-06-01.
	AnthropicVersion string `yaml:"anthropic_version"`
	// Headers are added to every upstream request.
	Headers map[string]string `yaml:"headers"`
	// MaxTokens is sent when the request sets none (Anthropic requires
	// max_tokens). Default 4096.
	MaxTokens int64 `yaml:"max_tokens"`
	// Timeout bounds one run. Default 10m.
	Timeout time.Duration `yaml:"timeout"`
	// MaxEventBytes bounds one SSE event. Default 4 MiB.
	MaxEventBytes int `yaml:"max_event_bytes"`
	// MaxToolInputBytes bounds the tool input held for its check at the
	// block's stop. Default 16 MiB.
	MaxToolInputBytes int `yaml:"max_tool_input_bytes"`

	// HTTPClient makes the requests. Default: a client with its own
	// transport, whose idle connections Close releases.
	HTTPClient *http.Client `yaml:"-"`
	// Logger receives the backend's logs; discarded when nil.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports every invalid field, by its option name.
func (c *BackendConfig) Validate() error {
	var errs []error
	if u, err := protocol.UpstreamURL("base_url", c.BaseURL, "the server's root, as the Anthropic SDKs take it"); err != nil {
		errs = append(errs, err)
	} else if strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
		errs = append(errs, fmt.Errorf("base_url: %q ends in /v1: give the server's root, as the Anthropic SDKs take it", c.BaseURL))
	}
	if c.Auth != "" && c.Auth != "x-api-key" && c.Auth != "bearer" {
		errs = append(errs, fmt.Errorf("auth: %q is not x-api-key or bearer", c.Auth))
	}
	if c.Timeout < 0 || c.MaxTokens < 0 || c.MaxEventBytes < 0 || c.MaxToolInputBytes < 0 {
		errs = append(errs, errors.New("timeout, max_tokens, max_event_bytes, max_tool_input_bytes: must not be negative"))
	}
	return errors.Join(errs...)
}

// key reads the API key.
func (c *BackendConfig) key() (string, error) { return c.APIKey.Read("api_key") }

// Backend is a canonical.Backend calling a Messages server. It is safe
// for concurrent use; its streams run no goroutines.
type Backend struct {
	up   *bodystream.Upstream
	cfg  BackendConfig
	base string
	key  string
	log  *slog.Logger
}

// NewBackend validates cfg, reads the key and returns the backend.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	key, err := cfg.key()
	if err != nil {
		return nil, err
	}
	cfg.Auth = cmp.Or(cfg.Auth, "x-api-key")
	cfg.AnthropicVersion = cmp.Or(cfg.AnthropicVersion, "2023-06-01")
	cfg.MaxTokens = cmp.Or(cfg.MaxTokens, 4096)
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Minute)
	cfg.MaxEventBytes = cmp.Or(cfg.MaxEventBytes, sse.DefaultMaxEventBytes)
	cfg.MaxToolInputBytes = cmp.Or(cfg.MaxToolInputBytes, 16<<20)
	b := &Backend{up: bodystream.NewUpstream("anthropic", cfg.HTTPClient, cfg.Headers),
		cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), key: key, log: cfg.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

// Close releases the idle connections of the backend's own transport.
func (b *Backend) Close() error { return b.up.Close() }

// redacted is the base URL without credentials, for causes.
func (b *Backend) redacted() string { return bodystream.Redacted(b.base, "anthropic") }

// Start implements canonical.Backend: it sends the request (always
// streaming) and waits for the response headers. An error status is
// returned with the code of its error type.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	model := cmp.Or(b.cfg.Model, req.GetTarget())
	if model == "" {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "anthropic backend: no model: set the backend's model option or a target")
	}
	wire, e := encodeRequest(req, model, b.cfg.MaxTokens)
	if e != nil {
		return nil, e
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInternal, "anthropic backend: encoding the request: %v", err)
	}
	b.log.Debug("anthropic request", "run", req.GetRunId(), "model", model)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	resp, e := b.up.Post(ctx, b.base+"/v1/messages", body, func(h http.Header) { b.headers(h, req) }, httpError)
	if e != nil {
		cancel()
		return nil, e
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body.Close()
		cancel()
		return nil, canonical.Errorf(canonical.CodeInternal, "anthropic backend: the upstream answered %q, not an event stream", mt)
	}
	dec := newStreamDecoder(b.cfg.MaxEventBytes, b.cfg.MaxToolInputBytes, model, req.GetRunId()+"-")
	c := bodystream.Config{Ctx: ctx, Cancel: cancel, Body: resp.Body, Dec: dec, Backend: "anthropic", Source: b.redacted(),
		First: dec.b.Lifecycle(nil, canonical.StatusRunning)}
	return bodystream.New(c), nil
}

// headers sets the request's headers: the key, the version, the client's
// betas (Post adds the configured extras).
func (b *Backend) headers(h http.Header, req *canonical.Request) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	h.Set("Anthropic-Version", b.cfg.AnthropicVersion)
	if b.key != "" {
		if b.cfg.Auth == "bearer" {
			h.Set("Authorization", "Bearer "+b.key)
		} else {
			h.Set("X-Api-Key", b.key)
		}
	}
	var betas []string
	for _, v := range req.GetExtensions()[extBeta].GetListValue().GetValues() {
		betas = append(betas, v.GetStringValue())
	}
	if len(betas) > 0 {
		h.Set("Anthropic-Beta", strings.Join(betas, ","))
	}
}

// httpError reads an error answer: Anthropic's error object, an OpenAI-
// style gateway's {"error":{"message","type"}}, or text.
func httpError(resp *http.Response) *canonical.Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	msg, typ := "", ""
	if json.Unmarshal(data, &body, json.AllowInvalidUTF8(true)) == nil && body.Error != nil {
		msg, typ = body.Error.Message, body.Error.Type
	}
	if msg == "" {
		msg = strings.TrimSpace(strings.ToValidUTF8(string(data), "\uFFFD"))
		if len(msg) > 512 {
			msg = strings.ToValidUTF8(msg[:512], "")
		}
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return canonical.WireError(codeOf(resp.StatusCode, typ), msg)
}
