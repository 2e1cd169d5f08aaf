package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/interlingua-dev/interlingua/bridge"
	openaipeer "github.com/interlingua-dev/interlingua/conformance/peers/openai"
)

// --- OpenAI Chat Completions: POST /v1/chat/completions, SSE chunks ---

type openaiClient struct {
	cs  clientSpec
	hc  *http.Client
	url string
}

// errNoParameters refuses the scripted backend behind a frontend whose
// requests carry only the protocol's own members: the bench parameters
// (deltas, delta_text, delay_ms) would not reach it.
func errNoParameters(frontend string) error {
	return fmt.Errorf("the %s frontend carries no bench parameters (deltas, delta_text, delay_ms): use a backend with a peer, not scripted or xml", frontend)
}

func newOpenAIClient(cs clientSpec) (client, error) {
	if cs.params != nil {
		return nil, errNoParameters("openai")
	}
	return &openaiClient{cs: cs, hc: httpClient(cs.streams), url: cs.base + "/v1/chat/completions"}, nil
}

// openaiRequest is the Chat Completions request the client sends.
type openaiRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	Messages []openaiMessage `json:"messages"`
}

type openaiMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

var (
	openaiContentKey = []byte(`"content":"`)
	openaiFinishKey  = []byte(`"finish_reason":"`)
	openaiDone       = []byte("[DONE]")
)

// hasText reports whether p holds key (a member name and its opening
// quote) followed by a non-empty string.
func hasText(p, key []byte) bool {
	for {
		i := bytes.Index(p, key)
		if i < 0 {
			return false
		}
		p = p[i+len(key):]
		if len(p) > 0 && p[0] != '"' {
			return true
		}
	}
}

// stream counts each chunk whose delta has non-empty content (the first
// chunk's role announcement carries "content":"" and is not a delta); the
// stream must end with a finish_reason and then [DONE].
func (c *openaiClient) stream(ctx context.Context, _ int, prompt string, rec *recorder) error {
	b, _ := json.Marshal(openaiRequest{Model: c.cs.target, Stream: true,
		Messages: []openaiMessage{{Role: "user", Content: prompt}}})
	rec.start = now()
	resp, err := post(ctx, c.hc, c.url, b, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	finished, done := false, false
	err = lines(resp.Body, func(line []byte) error {
		if !bytes.HasPrefix(line, dataPrefix) {
			return nil
		}
		data := bytes.TrimLeft(line[len(dataPrefix):], " ")
		switch {
		case bytes.Equal(data, openaiDone):
			done = true
		case bytes.HasPrefix(data, sseErrorPrefix):
			return fmt.Errorf("in-band error: %s", data)
		case bytes.Contains(data, openaiFinishKey):
			finished = true
		case hasText(data, openaiContentKey):
			rec.delta()
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case !finished:
		return errors.New("stream ended without a finish_reason")
	case !done:
		return errors.New("stream ended without [DONE]")
	}
	return nil
}

func (c *openaiClient) close() { c.hc.CloseIdleConnections() }

// --- OpenAI: conformance/peers/openai, its content chunks stamped ---

type openaiUp struct {
	peer  *openaipeer.Peer
	srv   *server
	stamp *stampBook
}

// newOpenAIUp scripts model "bench" on the peer as OpenAI streams it: a
// role chunk, sc.deltas content chunks, the finish chunk and [DONE], each
// chunk after sc.interval (the peer's per-chunk delay).
func newOpenAIUp(sc script) (upstream, error) {
	content := make([]string, sc.deltas)
	for i := range content {
		content[i] = sc.text
	}
	u := &openaiUp{
		peer:  openaipeer.New("", openaipeer.Model{Name: benchTarget, Content: content, Delay: sc.interval}),
		stamp: newStampBook(sc.deltas),
	}
	var err error
	if u.srv, err = serve(u, false); err != nil {
		return nil, err
	}
	return u, nil
}

func (u *openaiUp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		u.peer.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	st := u.stamp.get(lastUserText(body)) // a Chat Completions body has the same messages shape
	if st == nil {
		u.peer.ServeHTTP(w, r)
		return
	}
	defer st.finish()
	u.peer.ServeHTTP(&contentStampWriter{ResponseWriter: w, st: st}, r)
}

// contentStampWriter stamps each write (the peer writes one whole chunk
// per write) whose delta carries non-empty content.
type contentStampWriter struct {
	http.ResponseWriter
	st *stamps
}

func (w *contentStampWriter) Write(p []byte) (int, error) {
	if hasText(p, openaiContentKey) {
		w.st.add()
	}
	return w.ResponseWriter.Write(p)
}

func (w *contentStampWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *contentStampWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (u *openaiUp) backend() (bridge.BackendConfig, error) {
	o, err := options(map[string]any{"base_url": "http://" + u.srv.addr() + "/v1"})
	return bridge.BackendConfig{Type: "openai", Options: o}, err
}

func (u *openaiUp) base() string     { return "http://" + u.srv.addr() }
func (u *openaiUp) book() *stampBook { return u.stamp }
func (u *openaiUp) close()           { u.srv.close() }
