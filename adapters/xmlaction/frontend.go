package xmlaction

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
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
// answers with the run as text/plain; charset=utf-8, chunked, flushed per
// event; with Accept: text/event-stream the same text comes as SSE, one
// data event per rendered piece. An error before the stream starts is an
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

	write := f.textWriter(w)
	if wantsSSE(r.Header.Get("Accept")) {
		sw, err := sse.NewWriter(w)
		if err != nil {
			writeError(w, canonical.AsError(err))
			return
		}
		sse.SetHeaders(w.Header())
		write = func(p []byte) error { return sw.Data(p) }
	} else {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	}
	w.WriteHeader(http.StatusOK)
	enc := NewEncoder()
	var buf []byte
	for {
		ev, err := stream.Recv()
		buf = buf[:0]
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// The run's stream broke without its terminal event.
				buf = enc.End(buf)
				buf = enc.element(buf, canonical.Terminal(canonical.StatusFailed, canonical.AsError(err)))
				_ = write(buf)
			}
			return
		}
		buf = enc.Encode(buf, ev)
		if len(buf) == 0 {
			continue
		}
		if err := write(buf); err != nil {
			return // the client left: the deferred Close cancels the run
		}
	}
}

// textWriter writes and flushes each piece of a text/plain stream.
func (f *Frontend) textWriter(w http.ResponseWriter) func([]byte) error {
	rc := http.NewResponseController(w)
	return func(p []byte) error {
		if _, err := w.Write(p); err != nil {
			return err
		}
		return rc.Flush()
	}
}

// parseRequest checks the request body, naming the field at fault.
func parseRequest(body []byte) (*canonical.Request, *canonical.Error) {
	in, msg := readRequest(body)
	if msg != "" {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: %s", msg)
	}
	if in.Target == "" {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, `request: "target" is required`)
	}
	if in.Input == nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, `request: "input" is required (a string)`)
	}
	params := make(map[string]*structpb.Value, len(in.Parameters))
	for k, v := range in.Parameters {
		pv, err := toProto(v, false)
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

// readRequest reads the body as the encoding/json Decoder (with
// DisallowUnknownFields) it replaces read it into a streamRequest, and
// returns that decoder's error in its words, which clients see: a syntax
// error, then the first type error or unknown member in the body's order,
// then data after the object (a stray '}' or ']' passed).
func readRequest(body []byte) (streamRequest, string) {
	var in streamRequest
	start := skipSpace(body, 0)
	end, serr := scanValue(body)
	switch {
	case start == len(body):
		return in, "EOF"
	case serr != nil:
		return in, serr.Error()
	}
	switch k := json.Value(body[start:end]).Kind(); k {
	case 'n': // null decodes into a struct as nothing
	case '{':
		if msg := in.readMembers(body[start:end]); msg != "" {
			return in, msg
		}
	default:
		return in, "cannot unmarshal " + kindWord(k) + " into Go value of type xmlaction.streamRequest"
	}
	if p := skipSpace(body, end); p < len(body) && body[p] != '}' && body[p] != ']' {
		return in, "data after the JSON object"
	}
	return in, ""
}

// readMembers sets the fields from the members of obj, names matched
// without regard to case, the last of duplicates winning (a second
// "parameters" object adds to the first, null clears a field), and
// returns the first error.
func (in *streamRequest) readMembers(obj []byte) string {
	var first string
	fail := func(field, typ string) {
		if first == "" {
			first = fmt.Sprintf("field %q must be %s", field, typ)
		}
	}
	eachMember(obj, func(key string, v json.Value) bool {
		k := v.Kind()
		switch {
		case strings.EqualFold(key, "target"):
			if s, ok := decodeWhole(v).(string); ok {
				in.Target = s
			} else if k != 'n' {
				fail("target", "string")
			}
		case strings.EqualFold(key, "input"):
			if s, ok := decodeWhole(v).(string); ok {
				in.Input = &s
			} else if k == 'n' {
				in.Input = nil
			} else {
				fail("input", "string")
			}
		case strings.EqualFold(key, "parameters"):
			in.readParameters(v, fail)
		case first == "":
			first = fmt.Sprintf("unknown field %q", key)
		}
		return true
	})
	return first
}

// readParameters reads the "parameters" member's value v.
func (in *streamRequest) readParameters(v json.Value, fail func(field, typ string)) {
	switch v.Kind() {
	case 'n':
		in.Parameters = nil
	case '{':
		m, _ := decodeWhole(v).(map[string]any)
		if !floatsFit(m) {
			fail("parameters", "float64") // encoding/json decoded the numbers as float64
		}
		if in.Parameters == nil {
			in.Parameters = m
		} else {
			maps.Copy(in.Parameters, m)
		}
	default:
		fail("parameters", "map[string]interface {}")
	}
}

// kindWord names a JSON kind as encoding/json's type errors did.
func kindWord(k json.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case '[':
		return "array"
	}
	return "bool"
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
