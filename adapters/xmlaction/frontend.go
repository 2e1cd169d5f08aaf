package xmlaction

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// Frontend serves runs rendered as XML action streams:
//
//	POST /v1/xml/stream  {"target": NAME, "input": TEXT, "parameters": {...}}
//
// answers with the run as text/plain; charset=utf-8, chunked, flushed
// whenever the run has no more events at hand; with Accept:
// text/event-stream the same text comes as SSE, one data event per
// rendered piece. An error before the stream starts is an
// HTTP status with an <error code="..">message</error> body; after it, the
// stream ends with such an element.
type Frontend struct {
	cfg Config
}

// NewFrontend returns the frontend; cfg.Runner is required.
func NewFrontend(cfg Config) *Frontend {
	return &Frontend{cfg: cfg.withDefaults()}
}

// Mount registers the frontend's route.
func (f *Frontend) Mount(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/xml/stream", f.serveStream)
	mux.HandleFunc("/v1/xml/stream", func(w http.ResponseWriter, r *http.Request) {
		// ServeMux's own 405 is plain text, not the <error> form.
		w.Header().Set("Allow", http.MethodPost)
		writeStatusError(w, http.StatusMethodNotAllowed, canonical.Errorf(canonical.CodeUnimplemented,
			"method %s is not allowed on %s: use POST", r.Method, r.URL.Path))
	})
}

// streamRequest is the request body.
type streamRequest struct {
	Target     string         `json:"target"`
	Input      *string        `json:"input"`
	Parameters map[string]any `json:"parameters"`
}

func (f *Frontend) serveStream(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, f.cfg.MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, canonical.Errorf(canonical.CodeResourceExhausted, "request body exceeds MaxRequestBytes (%d bytes)", mbe.Limit))
			return
		}
		writeError(w, canonical.Errorf(canonical.CodeInvalidArgument, "reading the request body: %v", err))
		return
	}
	req, ce := parseRequest(body)
	if ce != nil {
		writeError(w, ce)
		return
	}
	stream, err := f.cfg.Runner.Run(r.Context(), req)
	if err != nil {
		writeError(w, canonical.AsError(err))
		return
	}
	stream = canonical.AnswerStream(stream, 0) // the agent's answer, on the root (doc.go)
	defer stream.Close()

	// A piece is queued, and flushed once the run has no more events at
	// hand (canonical.Buffered): a burst is one write, and no piece waits
	// for a later one.
	rc := http.NewResponseController(w)
	queue := func(p []byte) error { _, err := w.Write(p); return err }
	flush := rc.Flush
	if wantsSSE(r.Header.Get("Accept")) {
		sw, err := sse.NewWriter(w)
		if err != nil {
			writeError(w, canonical.AsError(err))
			return
		}
		sse.SetHeaders(w.Header())
		queue, flush = sw.QueueData, sw.Flush
	} else {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	}
	w.WriteHeader(http.StatusOK)
	enc := NewEncoder()
	ready, _ := stream.(canonical.Buffered)
	var buf []byte
	for {
		ev, err := stream.Recv()
		buf = buf[:0]
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// The run's stream broke without its terminal event.
				buf = enc.End(buf)
				buf = enc.element(buf, canonical.Terminal(canonical.StatusFailed, canonical.AsError(err)))
				_ = queue(buf)
			}
			_ = flush()
			return
		}
		buf = enc.Encode(buf, ev)
		if len(buf) > 0 {
			if err := queue(buf); err != nil {
				return // the client left: the deferred Close cancels the run
			}
		}
		if ready != nil && ready.Buffered() > 0 {
			continue
		}
		if err := flush(); err != nil {
			return
		}
	}
}

// requestOptions read the request as readOptions, and as clients written
// against encoding/json expect: names matched ignoring case (not _ or -),
// and an unknown member refused.
var requestOptions = json.JoinOptions(json.JoinOptions(readOptions...), json.RejectUnknownMembers(true),
	json.MatchCaseInsensitiveNames(true), json.MatchCaseSensitiveDelimiter(true))

// parseRequest checks the request body, naming the field at fault.
func parseRequest(body []byte) (*canonical.Request, *canonical.Error) {
	var in streamRequest
	if err := json.Unmarshal(body, &in, requestOptions); err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: %s", requestError(err))
	}
	if in.Target == "" {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, `request: "target" is required`)
	}
	if in.Input == nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, `request: "input" is required (a string)`)
	}
	params := make(map[string]*structpb.Value, len(in.Parameters))
	for k, v := range in.Parameters {
		pv, err := structpb.NewValue(v)
		if err != nil {
			return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: parameters.%s: %v", k, err)
		}
		params[k] = pv
	}
	return &canonical.Request{
		Target:     in.Target,
		Inputs:     []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", *in.Input)}},
		Parameters: params,
	}, nil
}

// requestError names the field at fault from the library's error: the
// JSON pointer to the value and the Go type it did not fit.
func requestError(err error) string {
	var se *json.SemanticError
	if !errors.As(err, &se) {
		return jsonError(err).Error()
	}
	_, kind, ok := json.TypeMismatch(err)
	field := strings.Join(slices.Collect(se.JSONPointer.Tokens()), ".")
	switch {
	case !ok:
		return "the body must be a JSON object"
	case kind == reflect.Struct: // a member streamRequest has no field for
		return fmt.Sprintf("unknown field %q", field)
	case kind == reflect.String:
		return fmt.Sprintf("field %q must be a string", field)
	case kind == reflect.Map:
		return fmt.Sprintf("field %q must be an object", field)
	}
	return fmt.Sprintf("field %q must be a number within float64's range", field)
}

// wantsSSE reports whether an Accept header asks for text/event-stream.
func wantsSSE(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// writeError answers a request that fails before its stream starts.
func writeError(w http.ResponseWriter, e *canonical.Error) {
	writeStatusError(w, httpStatus(e.Code), e)
}

// writeStatusError writes e with the HTTP status given.
func writeStatusError(w http.ResponseWriter, status int, e *canonical.Error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	var b []byte
	b = append(b, "<error"...)
	b = appendAttr(b, "code", wireCode(e.Code))
	b = append(b, '>')
	b = appendEscaped(b, e.Message)
	b = append(b, "</error>\n"...)
	_, _ = w.Write(b)
}
