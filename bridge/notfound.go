package bridge

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// apiNotFound answers, in the error form of the SDK that called, a
// request under /v1/ that no frontend serves (an OpenAI client's
// /v1/embeddings, an Anthropic client's /v1/models/x): net/http's plain
// "404 page not found" reached the SDKs as an error with no message of
// theirs. A request with an anthropic-version header (every Anthropic SDK
// sends one) gets Anthropic's form, any other OpenAI's, as OpenAI answers
// an unknown URL. A path that a frontend serves with other methods keeps
// net/http's 405, and every other answer is mux's own.
func apiNotFound(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			mux.ServeHTTP(w, r)
			return
		}
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(&notFoundWriter{ResponseWriter: w, r: r}, r) // no pattern: a 404 or a 405
	})
}

// notFoundWriter replaces a 404 written through it with the API form.
type notFoundWriter struct {
	http.ResponseWriter
	r        *http.Request
	replaced bool
}

// WriteHeader implements http.ResponseWriter.
func (n *notFoundWriter) WriteHeader(status int) {
	if status != http.StatusNotFound {
		n.ResponseWriter.WriteHeader(status)
		return
	}
	n.replaced = true
	what := n.r.Method + " " + n.r.URL.Path
	var body any = openAIError{Error: openAIErrorObject{Message: fmt.Sprintf("Invalid URL (%s)", what), Type: "invalid_request_error"}}
	if n.r.Header.Get("Anthropic-Version") != "" {
		body = anthropicError{Type: "error", Error: anthropicErrorObject{Type: "not_found_error", Message: "Not found: " + what}}
	}
	data, _ := json.Marshal(body) // typed members: it cannot fail
	h := n.ResponseWriter.Header()
	h.Del("X-Content-Type-Options")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(data)+1))
	n.ResponseWriter.WriteHeader(status)
	_, _ = n.ResponseWriter.Write(append(data, '\n'))
}

// Write implements http.ResponseWriter: net/http's text after a replaced
// 404 is dropped.
func (n *notFoundWriter) Write(b []byte) (int, error) {
	if n.replaced {
		return len(b), nil
	}
	return n.ResponseWriter.Write(b)
}

// openAIError is OpenAI's error body.
type openAIError struct {
	Error openAIErrorObject `json:"error"`
}

type openAIErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string               `json:"type"`
	Error anthropicErrorObject `json:"error"`
}

type anthropicErrorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
