// Package tritonpeer is a reference Triton server for tests and the
// conformance runner: it behaves like Triton's HTTP frontend in front of a
// decoupled (streaming) LLM model such as the TRT-LLM ensemble, as Triton's
// src/http_server.cc (commit e1db8a6) and its qa/L0_http generate tests
// show it, and is driven by a small
// script per model: the text chunks to send (a chunk may end inside a
// UTF-8 rune, as byte-level detokenizers do), delta or cumulative
// text_output, an in-band error at a given response, a delay, and how the
// bytes reach the wire (frames cut into small TCP writes, CRLF line ends,
// "data:" without a space).
//
// It is written independently of the adapter it tests (it shares no code
// with adapters/triton), so the two do not agree by construction.
//
// Endpoints: GET /v2/health/live, /v2/health/ready, /v2,
// /v2/models/{m}[/versions/1], /v2/models/{m}/ready; POST
// .../generate and .../generate_stream. Everything else is 404
// {"error":"Not Found"}; wrong methods are 405.
//
// A Server runs no goroutines of its own; its handlers end when their
// script ends or, for a hanging script, when the client goes away.
package tritonpeer

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// Model is one model's script.
type Model struct {
	// Name is the model name. Default "ensemble".
	Name string `json:"name"`
	// Chunks are the text of successive responses, as raw bytes. Nil
	// echoes the prompt, a word (with its leading space) per response.
	Chunks []string `json:"chunks"`
	// Cumulative makes each streamed text_output carry all text so far.
	Cumulative bool `json:"cumulative"`
	// ErrorMessage, when set, replaces response number ErrorAt (from 0)
	// with {"error": ErrorMessage} and ends the stream after it. At 0 the
	// first response fails: status 500, as Triton answers a model's error.
	ErrorMessage string `json:"error_message"`
	ErrorAt      int    `json:"error_at"`
	// Delay is slept before each response.
	Delay time.Duration `json:"delay"`
	// WriteSize, when positive, cuts each frame into writes of this many
	// bytes, each flushed, so a frame (and a rune) spans TCP writes.
	WriteSize int `json:"write_size"`
	// CRLF ends SSE lines with CRLF instead of LF.
	CRLF bool `json:"crlf"`
	// NoSpace writes "data:" without the space before the JSON.
	NoSpace bool `json:"no_space"`
	// Hang keeps the stream open after the last response until the client
	// goes away.
	Hang bool `json:"hang"`
	// Extra adds TRT-LLM's other outputs (batch_index, cum_log_probs,
	// output_log_probs, ...) to every response.
	Extra bool `json:"extra"`
	// RequireMaxTokens makes max_tokens a required input, as in the
	// TRT-LLM ensemble.
	RequireMaxTokens bool `json:"require_max_tokens"`
}

// Request is one generate request the server received.
type Request struct {
	// Path is the request path.
	Path string
	// Body is the request body as sent.
	Body []byte
	// Header is the request's header.
	Header http.Header
}

// Server is the reference Triton server; it implements http.Handler.
type Server struct {
	models    map[string]*Model
	cancelled chan string

	mu       sync.Mutex
	requests []Request
}

// New returns a server with the given models.
func New(models ...Model) *Server {
	s := &Server{models: map[string]*Model{}, cancelled: make(chan string, 64)}
	for i := range models {
		m := models[i]
		if m.Name == "" {
			m.Name = "ensemble"
		}
		s.models[m.Name] = &m
	}
	return s
}

// Requests returns the generate requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Cancelled receives the model name of each generate request whose client
// went away before its stream ended (up to 64 unread).
func (s *Server) Cancelled() <-chan string { return s.cancelled }

var modelPath = regexp.MustCompile(`^/v2/models/([^/]+)(?:/versions/([0-9]+))?(?:/(generate|generate_stream|ready))?$`)

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/v2/health/live" || p == "/v2/health/ready":
		if r.Method != http.MethodGet {
			writeError(w, 405, "Method Not Allowed")
			return
		}
		w.WriteHeader(200)
		return
	case p == "/v2":
		if r.Method != http.MethodGet {
			writeError(w, 405, "Method Not Allowed")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"name":"triton","version":"2.47.0","extensions":["classification","sequence","model_repository","schedule_policy","model_configuration","system_shared_memory","cuda_shared_memory","binary_tensor_data","parameters","statistics","trace","logging"]}`)
		return
	}
	mm := modelPath.FindStringSubmatch(p)
	if mm == nil {
		writeError(w, 404, "Not Found")
		return
	}
	name, version, kind := mm[1], mm[2], mm[3]
	want := http.MethodGet
	if kind == "generate" || kind == "generate_stream" {
		want = http.MethodPost
	}
	if r.Method != want {
		writeError(w, 405, "Method Not Allowed")
		return
	}
	m := s.models[name]
	if kind == "ready" {
		if m == nil || (version != "" && version != "1") {
			writeError(w, 400, "Model version not ready")
			return
		}
		w.WriteHeader(200)
		return
	}
	if m == nil {
		writeError(w, 400, fmt.Sprintf("Request for unknown model: '%s' is not found", name))
		return
	}
	if version != "" && version != "1" {
		writeError(w, 404, fmt.Sprintf("Request for unknown model: '%s' version %s is not found", name, version))
		return
	}
	switch kind {
	case "":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, m.metadata())
	default:
		s.generate(w, r, m, kind == "generate_stream")
	}
}

func (m *Model) metadata() string {
	in := `[{"name":"text_input","datatype":"BYTES","shape":[-1,1]},{"name":"max_tokens","datatype":"INT32","shape":[-1,1]},` +
		`{"name":"bad_words","datatype":"BYTES","shape":[-1,-1]},{"name":"stop_words","datatype":"BYTES","shape":[-1,-1]},` +
		`{"name":"stream","datatype":"BOOL","shape":[-1,1]},{"name":"temperature","datatype":"FP32","shape":[-1,1]},` +
		`{"name":"exclude_input_in_output","datatype":"BOOL","shape":[-1,1]}]`
	return `{"name":"` + m.Name + `","versions":["1"],"platform":"ensemble","inputs":` + in +
		`,"outputs":[{"name":"text_output","datatype":"BYTES","shape":[-1,-1]}]}`
}

// inputs are the model's input datatypes.
var inputs = map[string]string{
	"text_input": "BYTES", "max_tokens": "INT32", "bad_words": "BYTES", "stop_words": "BYTES",
	"stream": "BOOL", "temperature": "FP32", "exclude_input_in_output": "BOOL",
}

// generateRequest is what the server understood of a request.
type generateRequest struct {
	id      string
	prompt  string
	stream  bool
	exclude bool
	got     map[string]bool
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorJSON(msg))
}

func errorJSON(msg string) []byte {
	return append(append([]byte(`{"error":`), quote(msg)...), '}')
}

// readOptions read a request as encoding/json did: of duplicate names the
// last wins, invalid UTF-8 becomes U+FFFD (a Value keeps its bytes), and
// errors are worded as it worded them (the 500 for a body that is not JSON
// quotes one).
var readOptions = json.JoinOptions(json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true),
	json.ReportErrorsWithLegacySemantics(true))

// parse maps a body onto the model's inputs and parameters, with Triton's
// messages for the common mistakes.
func (m *Model) parse(body []byte) (*generateRequest, int, string) {
	var top map[string]json.Value
	// The body's first value (what follows it is not read), raw.
	if err := json.UnmarshalDecode(json.NewDecoder(bytes.NewReader(body), readOptions), &top, readOptions); err != nil {
		return nil, 500, "failed to parse the request JSON buffer: " + err.Error()
	}
	g := &generateRequest{got: map[string]bool{}}
	if raw, ok := top["id"]; ok {
		if err := json.Unmarshal(raw, &g.id, readOptions); err != nil {
			return nil, 500, "Unable to parse 'id': attempt to access JSON non-string as string"
		}
	}
	all := map[string]json.Value{}
	for k, v := range top {
		if k == "parameters" {
			var nested map[string]json.Value
			if err := json.Unmarshal(v, &nested, readOptions); err != nil {
				return nil, 500, "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object"
			}
			for nk, nv := range nested {
				all[nk] = nv
			}
			continue
		}
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := all[k]
		dt, isInput := inputs[k]
		if !isInput {
			var v any
			if json.Unmarshal(raw, &v, readOptions) != nil {
				v = nil // a number out of float64's range is no float64
			}
			switch v.(type) {
			case string, bool, float64:
			default:
				return nil, 400, "parameter '" + k + "' has invalid type. It should be either 'int', 'bool', or 'string'."
			}
			continue
		}
		g.got[k] = true
		if code, msg := g.input(k, dt, raw); code != 0 {
			return nil, code, msg
		}
	}
	var missing []string
	if !g.got["text_input"] {
		missing = append(missing, "'text_input'")
	}
	if m.RequireMaxTokens && !g.got["max_tokens"] {
		missing = append(missing, "'max_tokens'")
	}
	if len(missing) > 0 {
		id := g.id
		if id == "" {
			id = "<id_unknown>"
		}
		got := make([]string, 0, len(g.got))
		for k := range g.got {
			got = append(got, "'"+k+"'")
		}
		sort.Strings(got)
		return nil, 400, fmt.Sprintf("[request id: %s] expected number of inputs between 1 and %d but got %d inputs for model '%s'. Got input(s) [%s], but missing required input(s) [%s]. Please provide all required input(s).",
			id, len(inputs), len(got), m.Name, strings.Join(got, ","), strings.Join(missing, ","))
	}
	return g, 0, ""
}

// input reads one input of the request, as Triton's generate extension
// reads it (the first element of a list); a non-zero code is the error.
func (g *generateRequest) input(k, dt string, raw json.Value) (int, string) {
	var one = raw
	var list []json.Value
	if json.Unmarshal(raw, &list, readOptions) == nil {
		if len(list) == 0 {
			return 0, ""
		}
		one = list[0]
	}
	switch dt {
	case "BYTES":
		var s string
		if json.Unmarshal(one, &s, readOptions) != nil {
			return 500, "Unable to parse JSON bytes array: attempt to access JSON non-string as string"
		}
		if k == "text_input" {
			g.prompt = s
		}
	case "BOOL":
		var b bool
		if json.Unmarshal(one, &b, readOptions) != nil {
			return 500, "Unable to parse 'data': attempt to access JSON non-boolean as boolean"
		}
		switch k {
		case "stream":
			g.stream = b
		case "exclude_input_in_output":
			g.exclude = b
		}
	case "INT32":
		if _, err := strconv.ParseInt(string(one), 10, 32); err != nil {
			return 500, "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"
		}
	case "FP32":
		if _, err := strconv.ParseFloat(string(one), 64); err != nil {
			return 500, "Unable to parse 'data': attempt to access JSON non-number as double"
		}
	}
	return 0, ""
}

// response is one model response: text, or an error.
type response struct {
	text string
	err  string
}

// script returns the responses the model produces for g.
func (m *Model) script(g *generateRequest) []response {
	chunks := m.Chunks
	if chunks == nil {
		chunks = words(g.prompt)
	}
	var out []response
	if !g.stream {
		text := strings.Join(chunks, "")
		if !g.exclude {
			text = g.prompt + text
		}
		out = []response{{text: text}}
	} else {
		// Cumulative text is a prefix of all the text joined once (not a
		// string grown per chunk, which is quadratic in the stream's length).
		all, end := "", 0
		if m.Cumulative {
			all = strings.Join(chunks, "")
		}
		out = make([]response, 0, len(chunks))
		for _, c := range chunks {
			end += len(c)
			t := c
			if m.Cumulative {
				t = all[:end]
			}
			out = append(out, response{text: t})
		}
	}
	if m.ErrorMessage != "" && m.ErrorAt >= 0 && m.ErrorAt <= len(out) {
		out = append(out[:m.ErrorAt], response{err: m.ErrorMessage})
	}
	return out
}

// words cuts text into words, each with its leading space.
func words(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			return append(out, text)
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request, m *Model, streaming bool) {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		writeError(w, 400, "Unsupported content-encoding, only 'identity' is supported.")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		writeError(w, 400, err.Error())
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Body: body, Header: r.Header.Clone()})
	s.mu.Unlock()
	g, status, msg := m.parse(body)
	if g == nil {
		writeError(w, status, msg)
		return
	}
	resps := m.script(g)
	ctx := r.Context()
	rc := http.NewResponseController(w)
	if !streaming {
		// A decoupled model streaming on /generate: Triton answers 200
		// with this error unless the first response failed.
		if len(resps) != 1 {
			if !m.sleep(r) {
				s.gone(m)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			if resps[0].err != "" {
				w.WriteHeader(500)
				_, _ = w.Write(errorJSON(resps[0].err))
				return
			}
			_, _ = w.Write(errorJSON("generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses"))
			return
		}
		if !m.sleep(r) {
			s.gone(m)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resps[0].err != "" {
			w.WriteHeader(500)
			_, _ = w.Write(errorJSON(resps[0].err))
			return
		}
		_, _ = w.Write(m.object(g, resps[0].text))
		return
	}
	for i, resp := range resps {
		if !m.sleep(r) {
			s.gone(m)
			return
		}
		if i == 0 {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			if resp.err != "" {
				w.WriteHeader(500)
			} else {
				w.WriteHeader(200)
			}
		}
		obj := errorJSON(resp.err)
		if resp.err == "" {
			obj = m.object(g, resp.text)
		}
		if !m.write(w, rc, m.frame(obj)) {
			s.gone(m)
			return
		}
	}
	if len(resps) == 0 {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(200)
	}
	if m.Hang {
		_ = rc.Flush()
		<-ctx.Done()
		s.gone(m)
	}
}

// gone reports a client that left before the stream ended.
func (s *Server) gone(m *Model) {
	select {
	case s.cancelled <- m.Name:
	default:
	}
}

// sleep waits Delay; false when the client went away first.
func (m *Model) sleep(r *http.Request) bool {
	if m.Delay <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(m.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// frame is one SSE event around obj.
func (m *Model) frame(obj []byte) []byte {
	prefix, end := "data: ", "\n"
	if m.NoSpace {
		prefix = "data:"
	}
	if m.CRLF {
		end = "\r\n"
	}
	return []byte(prefix + string(obj) + end + end)
}

// write writes b (in WriteSize pieces), flushing each.
func (m *Model) write(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	n := m.WriteSize
	if n <= 0 {
		n = len(b)
	}
	for len(b) > 0 {
		k := min(n, len(b))
		if _, err := w.Write(b[:k]); err != nil {
			return false
		}
		if err := rc.Flush(); err != nil {
			return false
		}
		b = b[k:]
	}
	return true
}

// object is one response object, keys in alphabetical order.
func (m *Model) object(g *generateRequest, text string) []byte {
	var b []byte
	b = append(b, '{')
	if m.Extra {
		b = append(b, `"batch_index":0,"context_logits":0.0,"cum_log_probs":0.0,"generation_logits":0.0,`...)
	}
	if g.id != "" {
		b = append(b, `"id":`...)
		b = append(b, quote(g.id)...)
		b = append(b, ',')
	}
	b = append(b, `"model_name":`...)
	b = append(b, quote(m.Name)...)
	b = append(b, `,"model_version":"1",`...)
	if m.Extra {
		b = append(b, `"output_log_probs":[0.0,0.0,0.0],`...)
	}
	b = append(b, `"text_output":`...)
	b = append(b, quote(text)...)
	return append(b, '}')
}

// quote writes s as a JSON string the way Triton's writer does: bytes
// above 0x7F raw (valid UTF-8 or not), control characters escaped.
func quote(s string) []byte {
	b := []byte{'"'}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, fmt.Sprintf(`\u%04X`, c)...)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
