package anthropic

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// FrontendConfig configures the Messages frontend. Zero values mean the
// documented defaults.
type FrontendConfig struct {
	// Runner starts the runs; required.
	Runner canonical.Runner
	// Logger receives the frontend's logs; discarded when nil.
	Logger *slog.Logger
	// MaxRequestBytes bounds a request body (Anthropic's Messages limit).
	// Default 32 MiB.
	MaxRequestBytes int64
	// MaxOutputBytes bounds the text, thinking and tool input a
	// non-streaming answer holds before it is sent. Default 16 MiB.
	MaxOutputBytes int
	// PingInterval is how long a stream may go without an event before a
	// ping is written. Default 10s.
	PingInterval time.Duration
}

// Frontend serves POST /v1/messages and /v1/messages/count_tokens for
// every routed target (doc.go).
type Frontend struct {
	cfg FrontendConfig
	log *slog.Logger
}

// NewFrontend returns the frontend.
func NewFrontend(cfg FrontendConfig) *Frontend {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 32 << 20
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = 16 << 20
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Frontend{cfg: cfg, log: log}
}

// Mount registers the frontend's paths on mux.
func (f *Frontend) Mount(mux *http.ServeMux) {
	mux.HandleFunc("/v1/messages", f.serveMessages)
	mux.HandleFunc("/v1/messages/count_tokens", f.serveCountTokens)
	mux.HandleFunc("/v1/messages/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, errNotFound, "Not Found: "+r.URL.Path, newRequestID())
	})
}

// newRequestID is a request id in Anthropic's form (req_ and 24 hex digits).
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// serveCountTokens answers that tokens are not counted here: no backend
// type of ours can count them (issue 34 allows it).
func (f *Frontend) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	rid := newRequestID()
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, errInvalidRequest, "Method Not Allowed", rid)
		return
	}
	writeError(w, http.StatusNotFound, errNotFound, "count_tokens is not supported: this server cannot count tokens", rid)
}

// readBody reads the request body up to MaxRequestBytes.
func (f *Frontend) readBody(r *http.Request) ([]byte, *canonical.Error) {
	limit := f.cfg.MaxRequestBytes
	if r.ContentLength > limit {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "Request exceeds the maximum allowed number of bytes (%d)", limit)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, invalid("", "reading the request body: %v", err)
	}
	if int64(len(body)) > limit {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "Request exceeds the maximum allowed number of bytes (%d)", limit)
	}
	return body, nil
}

// serveMessages answers POST /v1/messages.
func (f *Frontend) serveMessages(w http.ResponseWriter, r *http.Request) {
	rid := newRequestID()
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, errInvalidRequest, "Method Not Allowed", rid)
		return
	}
	body, e := f.readBody(r)
	if e != nil {
		if e.Code == canonical.CodeResourceExhausted {
			writeError(w, http.StatusRequestEntityTooLarge, errTooLarge, e.Message, rid)
			return
		}
		writeCanonicalError(w, e, rid)
		return
	}
	d, e := decodeRequest(body)
	if e != nil {
		writeCanonicalError(w, e, rid)
		return
	}
	if _, ok := canonical.VisibleTarget(f.cfg.Runner, canonical.PrincipalFrom(r.Context()), d.model); !ok {
		writeError(w, http.StatusNotFound, errNotFound, "model: "+d.model, rid)
		return
	}
	if betas := betaHeader(r.Header); len(betas) > 0 {
		d.req.Extensions[extBeta] = structpb.NewListValue(&structpb.ListValue{Values: betas})
	}
	stream, err := f.cfg.Runner.Run(r.Context(), d.req)
	if err != nil {
		writeCanonicalError(w, canonical.AsError(err), rid)
		return
	}
	stream = canonical.AnswerStream(stream, f.cfg.MaxOutputBytes) // an agent's answer, on the root (doc.go)
	defer stream.Close()                                          // cancels the run if the client left
	if d.stream {
		f.streamRun(w, stream, d, rid)
		return
	}
	f.collectRun(w, stream, d, rid)
}

// betaHeader reads anthropic-beta (comma-separated, may repeat).
func betaHeader(h http.Header) []*structpb.Value {
	var out []*structpb.Value
	for _, v := range h.Values("Anthropic-Beta") {
		for _, b := range strings.Split(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				out = append(out, structpb.NewStringValue(b))
			}
		}
	}
	return out
}

// collectRun answers one Message when the run has ended.
func (f *Frontend) collectRun(w http.ResponseWriter, stream canonical.Stream, d *decoded, rid string) {
	acc := &accumulator{limit: f.cfg.MaxOutputBytes}
	enc := newEncoder(acc, d.model, d.clientTools, d.thinking)
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = canonical.Errorf(canonical.CodeInternal, "the run ended without a terminal event")
			}
			writeCanonicalError(w, canonical.AsError(err), rid)
			return
		}
		done, fail, err := enc.event(ev)
		if err != nil {
			writeCanonicalError(w, canonical.AsError(err), rid)
			return
		}
		if !done {
			continue
		}
		if fail != nil {
			writeCanonicalError(w, fail, rid)
			return
		}
		m, e := acc.message()
		if e != nil {
			writeCanonicalError(w, e, rid)
			return
		}
		out, merr := json.Marshal(m)
		if merr != nil {
			writeCanonicalError(w, canonical.Errorf(canonical.CodeInternal, "encoding the message: %v", merr), rid)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", rid)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
		return
	}
}
