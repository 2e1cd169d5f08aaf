package openai

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// Call is one tool call a model streams.
type Call struct {
	ID, Name string
	// Args are the arguments fragments.
	Args []string
}

// Usage is what the usage object reports.
type Usage struct {
	Prompt, Completion, Cached, Reasoning int64
}

// Model is a scripted model. The zero options send what OpenAI sends.
type Model struct {
	Name string
	// Status refuses the request before the stream with ErrorMessage;
	// IntCode writes the code as vLLM does (the status as an integer).
	Status       int
	ErrorMessage string
	IntCode      bool
	// Echo streams the last user text, a word per chunk, before Content.
	Echo      bool
	Content   []string
	Reasoning []string
	// ReasoningField is reasoning_content (default) or reasoning.
	ReasoningField string
	Calls          []Call
	// Finish is the finish_reason; default stop, tool_calls with calls.
	Finish string
	Usage  Usage
	// UsageOn is where usage goes: "" (a choices:[] chunk, when asked),
	// "finish" (on the finish chunk), "none".
	UsageOn string
	// RepeatToolIDs sends id, type and name on every tool-call chunk.
	RepeatToolIDs bool
	// WholeCalls sends each call whole in one chunk.
	WholeCalls bool
	// NullContent starts with {"role":"assistant","content":null}.
	NullContent bool
	// Comments writes an SSE comment before every chunk.
	Comments bool
	// ErrorAt > 0 sends, after that many chunks, vLLM's mid-stream error
	// object and [DONE].
	ErrorAt int
	// Cut resets the connection after CutAt chunks (no finish, no [DONE]).
	Cut   bool
	CutAt int
	// NoDone ends the body after the last chunk without [DONE];
	// DoneNoBlank writes "data: [DONE]" without its blank line.
	NoDone, DoneNoBlank bool
	// Hang waits after the first chunks until the client leaves.
	Hang  bool
	Delay time.Duration
}

// Request is a request the peer received.
type Request struct {
	Header http.Header
	Body   []byte
}

// Peer serves the models.
type Peer struct {
	models map[string]Model
	key    string

	mu       sync.Mutex
	requests []Request
	cancel   chan string
}

// New returns a peer serving models; key, when set, must be presented.
func New(key string, models ...Model) *Peer {
	p := &Peer{models: map[string]Model{}, key: key, cancel: make(chan string, 1024)}
	for _, m := range models {
		p.models[m.Name] = m
	}
	return p
}

// Requests returns the requests received so far.
func (p *Peer) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

// Cancelled reports the names of the models whose request the client
// abandoned before the stream's end.
func (p *Peer) Cancelled() <-chan string { return p.cancel }

// ServeHTTP implements http.Handler.
func (p *Peer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.key != "" && r.Header.Get("Authorization") != "Bearer "+p.key {
		writeError(w, http.StatusUnauthorized, "Incorrect API key provided.", "invalid_api_key", false)
		return
	}
	switch {
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		list := struct {
			Object string `json:"object"`
			Data   []any  `json:"data"`
		}{Object: "list"}
		for name := range p.models {
			list.Data = append(list.Data, map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "peer"})
		}
		writeJSON(w, http.StatusOK, list)
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		p.serveCompletion(w, r)
	default:
		writeError(w, http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")", "", false)
	}
}

// request is what the peer reads of a request.
type request struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string     `json:"role"`
		Content json.Value `json:"content"`
	} `json:"messages"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (p *Peer) serveCompletion(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return
	}
	p.mu.Lock()
	p.requests = append(p.requests, Request{Header: r.Header.Clone(), Body: body})
	p.mu.Unlock()
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "", false)
		return
	}
	m, ok := p.models[req.Model]
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "The model `"+req.Model+"` does not exist or you do not have access to it.", "model_not_found", false)
		return
	case m.Status != 0:
		writeError(w, m.Status, m.ErrorMessage, "", m.IntCode)
		return
	case !req.Stream:
		writeError(w, http.StatusBadRequest, "this peer only streams", "", false)
		return
	}
	pl := &player{w: w, m: m, usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage, id: "chatcmpl-peer", model: req.Model}
	if m.Echo {
		pl.echo = lastUser(&req)
	}
	if !pl.play(r) {
		select {
		case p.cancel <- m.Name:
		default:
		}
	}
}

// lastUser is the last user message's text.
func lastUser(req *request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		var sb strings.Builder
		for _, pt := range parts {
			sb.WriteString(pt.Text)
		}
		return sb.String()
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError writes OpenAI's error object (code a string or null), or
// vLLM's (code the integer status).
func writeError(w http.ResponseWriter, status int, msg, code string, intCode bool) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	if intCode {
		e["type"], e["code"] = strings.ReplaceAll(http.StatusText(status), " ", "")+"Error", status
	}
	writeJSON(w, status, map[string]any{"error": e})
}
