package bridge

import (
	"net/http"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// apiNotFound answers, in the error form of the SDK that called, a
// request under /v1/ that no frontend serves (an OpenAI client's
// /v1/embeddings, an Anthropic client's /v1/complete): net/http's plain
// "404 page not found" reached the SDKs as an error with no message of
// theirs. A request with an anthropic-version header (every Anthropic SDK
// sends one) gets the Anthropic frontend's refusal, any other the OpenAI
// frontend's, as OpenAI answers an unknown URL ("Invalid URL"). A path
// that a frontend serves with other methods keeps net/http's 405, and
// every other answer is mux's own.
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

// notFoundWriter replaces a 404 written through it with the SDK's form.
type notFoundWriter struct {
	http.ResponseWriter
	r        *http.Request
	replaced bool
}

// WriteHeader implements http.ResponseWriter.
func (n *notFoundWriter) WriteHeader(status int) {
	name := "openai"
	if n.r.Header.Get("Anthropic-Version") != "" {
		name = "anthropic"
	}
	p := protocols.Get(name)
	if status != http.StatusNotFound || p == nil || p.WriteRefusal == nil {
		n.ResponseWriter.WriteHeader(status)
		return
	}
	n.replaced = true
	h := n.ResponseWriter.Header()
	h.Del("X-Content-Type-Options")
	h.Del("Content-Type")
	p.WriteRefusal(n.ResponseWriter, n.r, protocol.Refusal{Status: status, Code: canonical.CodeNotFound,
		Message: "Invalid URL (" + n.r.Method + " " + n.r.URL.Path + ")"})
}

// Write implements http.ResponseWriter: net/http's text after a replaced
// 404 is dropped.
func (n *notFoundWriter) Write(b []byte) (int, error) {
	if n.replaced {
		return len(b), nil
	}
	return n.ResponseWriter.Write(b)
}
