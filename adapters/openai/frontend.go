package openai

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// FrontendConfig configures the Chat Completions frontend; it is also the
// frontends.openai block of the config. Zero values mean the documented
// defaults.
type FrontendConfig struct {
	// ReasoningField is the delta (and message) member reasoning goes in:
	// reasoning_content, reasoning or both. Default reasoning_content.
	ReasoningField string `yaml:"reasoning_field"`
	// MaxRequestBytes bounds a request body. Default 32 MiB.
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// MaxOutputBytes bounds the text, reasoning and arguments a
	// non-streaming answer holds before it is sent. Default 16 MiB.
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// Keepalive is how long a stream may go without a chunk before a
	// ": keepalive" comment is written. Default 15s.
	Keepalive time.Duration `yaml:"keepalive"`

	// Runner starts the runs; required.
	Runner canonical.Runner `yaml:"-"`
	// Logger receives the frontend's logs; discarded when nil.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports every invalid field, by its option name.
func (c *FrontendConfig) Validate() error {
	var errs []error
	switch c.ReasoningField {
	case "", ReasoningContent, ReasoningPlain, ReasoningBoth:
	default:
		errs = append(errs, fmt.Errorf("reasoning_field: %q is not reasoning_content, reasoning or both", c.ReasoningField))
	}
	if c.MaxRequestBytes < 0 || c.MaxOutputBytes < 0 || c.Keepalive < 0 {
		errs = append(errs, errors.New("max_request_bytes, max_output_bytes, keepalive: must not be negative"))
	}
	return errors.Join(errs...)
}

// Frontend serves POST /v1/chat/completions, GET /v1/models and GET
// /v1/models/{model} for every routed target (doc.go).
type Frontend struct {
	cfg     FrontendConfig
	log     *slog.Logger
	created int64 // the models' created time: when the frontend started
}

// NewFrontend returns the frontend; cfg must be valid.
func NewFrontend(cfg FrontendConfig) *Frontend {
	if cfg.ReasoningField == "" {
		cfg.ReasoningField = ReasoningContent
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 32 << 20
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = 16 << 20
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = 15 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Frontend{cfg: cfg, log: log, created: time.Now().Unix()}
}

// Mount registers the frontend's paths on mux.
func (f *Frontend) Mount(mux *http.ServeMux) {
	mux.HandleFunc("/v1/chat/completions", withRequestID(f.serveCompletions))
	mux.HandleFunc("/v1/chat/", withRequestID(func(w http.ResponseWriter, r *http.Request) {
		(&apiError{status: http.StatusNotFound, msg: "Invalid URL (" + r.Method + " " + r.URL.Path + ")"}).write(w)
	}))
	mux.HandleFunc("/v1/models", withRequestID(f.serveModels))
	mux.HandleFunc("/v1/models/{model...}", withRequestID(f.serveModel))
}

// withRequestID gives every answer of h an x-request-id, as OpenAI's API
// does: the SDKs read it into a response's and an error's request id.
func withRequestID(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", canonical.NewID("req_"))
		h(w, r)
	}
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) bool {
	if r.Method == allow {
		return false
	}
	w.Header().Set("Allow", allow)
	(&apiError{status: http.StatusMethodNotAllowed, msg: "Invalid method for URL (" + r.Method + " " + r.URL.Path + ")"}).write(w)
	return true
}

// allowed reports whether the caller may name target and a route serves it.
func (f *Frontend) allowed(r *http.Request, target string) bool {
	_, ok := canonical.VisibleTarget(f.cfg.Runner, canonical.PrincipalFrom(r.Context()), target)
	return ok
}

// serveModels lists the targets the caller may use as models.
func (f *Frontend) serveModels(w http.ResponseWriter, r *http.Request) {
	if methodNotAllowed(w, r, http.MethodGet) {
		return
	}
	list := modelList{Object: "list", Data: []model{}}
	p := canonical.PrincipalFrom(r.Context())
	for _, t := range f.cfg.Runner.Targets() {
		if p.Allows(t.Name) {
			list.Data = append(list.Data, f.model(t.Name))
		}
	}
	slices.SortFunc(list.Data, func(a, b model) int { return compareStrings(a.ID, b.ID) })
	writeJSON(w, list)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *Frontend) model(name string) model {
	return model{ID: name, Object: "model", Created: f.created, OwnedBy: "interlingua"}
}

// serveModel answers one model, or OpenAI's model_not_found.
func (f *Frontend) serveModel(w http.ResponseWriter, r *http.Request) {
	if methodNotAllowed(w, r, http.MethodGet) {
		return
	}
	name := r.PathValue("model")
	if !f.allowed(r, name) {
		modelNotFound(name).write(w)
		return
	}
	writeJSON(w, f.model(name))
}

func writeJSON(w http.ResponseWriter, v any) {
	out, err := json.Marshal(v)
	if err != nil {
		fromCanonical(canonical.Errorf(canonical.CodeInternal, "encoding the answer: %v", err)).write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// readBody reads the request body up to MaxRequestBytes.
func (f *Frontend) readBody(r *http.Request) ([]byte, *apiError) {
	limit := f.cfg.MaxRequestBytes
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
		msg: fmt.Sprintf("The request body exceeds the maximum of %d bytes (max_request_bytes).", limit)}
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, invalid("", "", "Reading the request body: "+err.Error())
	}
	if int64(len(body)) > limit {
		return nil, tooLarge
	}
	return body, nil
}

// serveCompletions answers POST /v1/chat/completions.
func (f *Frontend) serveCompletions(w http.ResponseWriter, r *http.Request) {
	if methodNotAllowed(w, r, http.MethodPost) {
		return
	}
	body, e := f.readBody(r)
	if e != nil {
		e.write(w)
		return
	}
	d, e := decodeRequest(body)
	if e != nil {
		e.write(w)
		return
	}
	if !f.allowed(r, d.model) {
		modelNotFound(d.model).write(w)
		return
	}
	stream, err := f.cfg.Runner.Run(r.Context(), d.req)
	if err != nil {
		fromCanonical(canonical.AsError(err)).write(w)
		return
	}
	stream = canonical.AnswerStream(stream, f.cfg.MaxOutputBytes) // an agent's answer, on the root (doc.go)
	defer stream.Close()                                          // cancels the run if the client left
	if d.stream {
		f.streamRun(w, stream, d)
		return
	}
	f.collectRun(w, stream, d)
}

// collectRun answers one chat.completion when the run has ended.
func (f *Frontend) collectRun(w http.ResponseWriter, stream canonical.Stream, d *decoded) {
	c := &collector{limit: f.cfg.MaxOutputBytes, reasonTo: f.cfg.ReasoningField}
	c.c = completion{ID: newID("chatcmpl-"), Object: "chat.completion", Created: time.Now().Unix(), Model: d.model}
	rd := newReader(c, d.clientTools)
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = canonical.Errorf(canonical.CodeInternal, "the run ended without a terminal event")
			}
			fromCanonical(canonical.AsError(err)).write(w)
			return
		}
		done, err := rd.event(ev)
		if err != nil {
			fromCanonical(canonical.AsError(err)).write(w)
			return
		}
		if !done {
			continue
		}
		if c.failed != nil {
			fromCanonical(c.failed).write(w)
			return
		}
		writeJSON(w, &c.c)
		return
	}
}
