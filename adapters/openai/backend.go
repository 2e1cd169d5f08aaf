package openai

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
	"slices"
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/bodystream"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/protocol"
)

// BackendConfig configures a backend that calls one OpenAI-compatible
// Chat Completions server (OpenAI, vLLM, TGI, llama.cpp, Ollama, sglang,
// or our own frontend). Zero values mean the documented defaults; options
// come from the backend's YAML options.
type BackendConfig struct {
	// BaseURL is the API root as the OpenAI SDKs take it, /v1 included
	// (https://api.openai.com/v1, http://vllm:8000/v1); required.
	BaseURL string `yaml:"base_url"`
	// Model is the upstream model. Default: the run's target (after the
	// route's rename).
	Model string `yaml:"model"`
	// APIKey says where the key is: an environment variable or a file
	// (trailing newline ignored), never inline. Default: no key.
	APIKey protocol.SecretRef `yaml:"api_key"`
	// Headers are added to every upstream request.
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one run. Default 10m.
	Timeout time.Duration `yaml:"timeout"`
	// MaxTokensField is the member the canonical max_tokens goes in:
	// max_tokens or max_completion_tokens. Default max_completion_tokens
	// for api.openai.com (which refuses max_tokens for reasoning models),
	// max_tokens for every other server.
	MaxTokensField string `yaml:"max_tokens_field"`
	// PassParameters names canonical parameters sent on as top-level
	// members as they are (vLLM's top_k, min_p, ...); OpenAI refuses
	// members it does not know, so none are by default.
	PassParameters []string `yaml:"pass_parameters"`
	// MaxEventBytes bounds one SSE event. Default 4 MiB.
	MaxEventBytes int `yaml:"max_event_bytes"`
	// MaxToolArgsBytes bounds the tool-call arguments of one answer.
	// Default 16 MiB.
	MaxToolArgsBytes int `yaml:"max_tool_args_bytes"`

	// HTTPClient makes the requests. Default: a client with its own
	// transport, whose idle connections Close releases.
	HTTPClient *http.Client `yaml:"-"`
	// Logger receives the backend's logs; discarded when nil.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports every invalid field, by its option name.
func (c *BackendConfig) Validate() error {
	var errs []error
	if u, err := protocol.UpstreamURL("base_url", c.BaseURL, "the API root with /v1, as the OpenAI SDKs take it"); err != nil {
		errs = append(errs, err)
	} else if strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/chat/completions") {
		errs = append(errs, fmt.Errorf("base_url: %q names the endpoint: give the API root (…/v1)", c.BaseURL))
	}
	switch c.MaxTokensField {
	case "", "max_tokens", "max_completion_tokens":
	default:
		errs = append(errs, fmt.Errorf("max_tokens_field: %q is not max_tokens or max_completion_tokens", c.MaxTokensField))
	}
	if c.Timeout < 0 || c.MaxEventBytes < 0 || c.MaxToolArgsBytes < 0 {
		errs = append(errs, errors.New("timeout, max_event_bytes, max_tool_args_bytes: must not be negative"))
	}
	return errors.Join(errs...)
}

// key reads the API key.
func (c *BackendConfig) key() (string, error) { return c.APIKey.Read("api_key") }

// Backend is a canonical.Backend calling a Chat Completions server. It is
// safe for concurrent use; its streams run no goroutines.
type Backend struct {
	up  *bodystream.Upstream
	cfg BackendConfig
	url string // …/chat/completions
	key string
	log *slog.Logger
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
	base := strings.TrimRight(cfg.BaseURL, "/")
	if cfg.MaxTokensField == "" {
		cfg.MaxTokensField = "max_tokens"
		if u, err := url.Parse(base); err == nil && u.Hostname() == "api.openai.com" {
			cfg.MaxTokensField = "max_completion_tokens"
		}
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Minute)
	cfg.MaxEventBytes = cmp.Or(cfg.MaxEventBytes, sse.DefaultMaxEventBytes)
	cfg.MaxToolArgsBytes = cmp.Or(cfg.MaxToolArgsBytes, 16<<20)
	b := &Backend{up: bodystream.NewUpstream("openai", cfg.HTTPClient, cfg.Headers),
		cfg: cfg, url: base + "/chat/completions", key: key, log: cfg.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

// Close releases the idle connections of the backend's own transport.
func (b *Backend) Close() error { return b.up.Close() }

// redacted is the URL without credentials, for causes.
func (b *Backend) redacted() string { return bodystream.Redacted(b.url, "openai") }

// Start implements canonical.Backend: it sends the request (always
// streaming, with include_usage) and waits for the response headers. An
// error status is returned with the code its error object or status says.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	model := cmp.Or(b.cfg.Model, req.GetTarget())
	if model == "" {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "openai backend: no model: set the backend's model option or a target")
	}
	wire, e := b.encodeRequest(req, model)
	if e != nil {
		return nil, e
	}
	body, err := marshalRequest(wire)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInternal, "openai backend: encoding the request: %v", err)
	}
	b.log.Debug("openai request", "run", req.GetRunId(), "model", model)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	resp, e := b.up.Post(ctx, b.url, body, b.headers, httpError)
	if e != nil {
		cancel()
		return nil, e
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body.Close()
		cancel()
		return nil, canonical.Errorf(canonical.CodeInternal, "openai backend: the upstream answered %q, not an event stream", mt)
	}
	dec := newStreamDecoder(b.cfg.MaxEventBytes, b.cfg.MaxToolArgsBytes, model, req.GetRunId()+"-")
	c := bodystream.Config{Ctx: ctx, Cancel: cancel, Body: resp.Body, Dec: dec, Backend: "openai", Source: b.redacted(),
		First: dec.b.Lifecycle(nil, canonical.StatusRunning)}
	// A reset after the finish chunk: the answer is whole, only the usage
	// chunk and [DONE] are lost (reference 10.2).
	c.Broken = func(out []*canonical.Event) ([]*canonical.Event, bool) {
		if dec.finish == "" {
			return out, false
		}
		out, _ = dec.complete(out)
		return out, true
	}
	return bodystream.New(c), nil
}

// marshalRequest is the request's JSON with the Extra members after the
// typed ones, in name order.
func marshalRequest(r *outRequest) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil || len(r.Extra) == 0 {
		return body, err
	}
	names := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		names = append(names, k)
	}
	slices.Sort(names)
	body = body[:len(body)-1] // the closing brace
	for _, k := range names {
		if !json.Valid(r.Extra[k]) {
			continue
		}
		body = append(json.AppendQuote(append(body, ','), k), ':')
		body = append(body, r.Extra[k]...)
	}
	return append(body, '}'), nil
}

// headers sets the request's headers: the protocol's and the key.
func (b *Backend) headers(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	if b.key != "" {
		h.Set("Authorization", "Bearer "+b.key)
	}
}

// httpError reads an error answer: {"error":{...}} (code a string, an
// integer or null), the flat {"object":"error",...} of older vLLM and
// sglang, or text.
func httpError(resp *http.Response) *canonical.Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var c inChunk
	msg := ""
	code := canonical.CodeOfHTTPStatus(resp.StatusCode)
	if json.Unmarshal(data, &c, json.AllowInvalidUTF8(true)) == nil {
		var ie inError
		switch {
		case c.Error.Kind() == '{' && json.Unmarshal(c.Error, &ie, json.AllowInvalidUTF8(true)) == nil:
			msg, code = ie.Message, codeOfWire(ie.Code, ie.Type, resp.StatusCode)
		case c.Error.Kind() == '"':
			_ = json.Unmarshal(c.Error, &msg)
		case c.Message != "":
			msg, code = c.Message, codeOfWire(c.Code, c.Type, resp.StatusCode)
		}
	}
	if msg == "" {
		msg = string(data)
	}
	if msg = trimMessage(msg); msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return canonical.WireError(code, msg)
}
