package anthropic

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// Block is one content block a model streams.
type Block struct {
	// Type is text, thinking, redacted_thinking or tool_use.
	Type string
	// Deltas are the block's text, thinking or input_json fragments.
	Deltas []string
	// Signature is a thinking block's signature (one signature_delta).
	Signature string
	// Data is a redacted_thinking block's data.
	Data string
	// ID and Name are a tool_use block's.
	ID, Name string
}

// Usage is what message_start and message_delta report.
type Usage struct {
	Input, Output, CacheRead, CacheCreation int64
}

// Model is a scripted model.
type Model struct {
	Name string
	// Status, ErrorType and ErrorMessage refuse the request before the
	// stream when Status is set.
	Status       int
	ErrorType    string
	ErrorMessage string
	// Echo streams the last user text, a word per text delta, first.
	Echo   bool
	Blocks []Block
	// ErrorEvent ends the stream with an error event after the blocks.
	ErrorEvent   string // the error type
	ErrorEventAt int    // blocks written before it
	// Cut resets the connection after the blocks (no message_stop).
	Cut bool
	// Hang waits after the blocks until the client leaves.
	Hang         bool
	Delay        time.Duration
	StopReason   string // default end_turn (tool_use when a tool_use block is last)
	StopSequence string
	Usage        Usage
}

// Request is a request the peer received.
type Request struct {
	Header http.Header
	Body   []byte
}

// Peer serves the models. Close ends hanging streams.
type Peer struct {
	models map[string]Model
	key    string

	mu       sync.Mutex
	requests []Request
	closed   chan struct{}
	once     sync.Once
	cancel   chan string
}

// New returns a peer serving models; key, when set, must be presented.
func New(key string, models ...Model) *Peer {
	p := &Peer{models: map[string]Model{}, key: key, closed: make(chan struct{}), cancel: make(chan string, 1024)}
	for _, m := range models {
		p.models[m.Name] = m
	}
	return p
}

// Close ends the streams that hang.
func (p *Peer) Close() { p.once.Do(func() { close(p.closed) }) }

// Cancelled reports the models whose stream the client left early.
func (p *Peer) Cancelled() <-chan string { return p.cancel }

// Requests returns the requests received so far.
func (p *Peer) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type errorBody struct {
	Type      string      `json:"type"`
	Error     errorDetail `json:"error"`
	RequestID string      `json:"request_id,omitzero"`
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_peer")
	w.WriteHeader(status)
	b, _ := json.Marshal(errorBody{Type: "error", Error: errorDetail{Type: typ, Message: msg}, RequestID: "req_peer"})
	_, _ = w.Write(b)
}

// request is the part of a create request the peer reads.
type request struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string     `json:"role"`
		Content json.Value `json:"content"`
	} `json:"messages"`
}

// ServeHTTP implements http.Handler.
func (p *Peer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		writeError(w, http.StatusNotFound, "not_found_error", "Not Found")
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	p.mu.Lock()
	p.requests = append(p.requests, Request{Header: r.Header.Clone(), Body: body})
	p.mu.Unlock()
	if r.Header.Get("Anthropic-Version") == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	if p.key != "" && r.Header.Get("X-Api-Key") != p.key && r.Header.Get("Authorization") != "Bearer "+p.key {
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "There was an error parsing the body: "+err.Error())
		return
	}
	m, ok := p.models[req.Model]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found_error", "model: "+req.Model)
		return
	}
	if m.Status != 0 {
		writeError(w, m.Status, m.ErrorType, m.ErrorMessage)
		return
	}
	if m.Echo {
		m.Blocks = append([]Block{{Type: "text", Deltas: words(lastUserText(&req))}}, m.Blocks...)
	}
	(&player{w: w, m: m, ctx: r.Context(), closed: p.closed}).play()
	if r.Context().Err() != nil {
		select {
		case p.cancel <- m.Name:
		default:
		}
	}
}

// lastUserText is the text of the last user turn.
func lastUserText(req *request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		msg := req.Messages[i]
		if msg.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(msg.Content, &s) == nil {
			return s
		}
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(msg.Content, &blocks)
		var sb strings.Builder
		for _, b := range blocks {
			if b.Type == "text" {
				sb.WriteString(b.Text)
			}
		}
		return sb.String()
	}
	return ""
}

// words cuts text into words, each delta carrying its leading space.
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

// cut breaks the connection mid-stream: the client reads a response
// that ends without its last chunk (net/http's sanctioned abort).
func cut() {
	panic(http.ErrAbortHandler)
}
