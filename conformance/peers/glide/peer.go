package glidepeer

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// Config scripts the peer.
type Config struct {
	// Routers by id.
	Routers map[string]Router
	// Now stamps created_at and generated_at. Default time.Now.
	Now func() time.Time
}

// Router is a scripted Glide language router: its models in fallback
// order.
type Router struct {
	Models []Model
}

// Model is one model of a router and what it streams.
type Model struct {
	ID       string // chunk.model_id
	Provider string // chunk.provider_id; default "openai"
	Name     string // chunk.model_name; default "gpt-3.5-turbo-0125"
	Role     string // chunk message role; default "assistant"
	Steps    []Step
	// Finish is the finish_reason of the final chunk; default "complete".
	Finish string
}

// Step is one scripted step of a model's stream.
type Step struct {
	// Text sends a chunk with this content.
	Text string
	// Echo sends a chunk per word of the request's message content (after
	// override_params), each word with its leading space.
	Echo bool
	// Delay waits before the step.
	Delay time.Duration
	// Wait blocks until Release(Wait) (or the client disconnects).
	Wait string
	// Unavailable fails the model mid-stream with this provider error:
	// model_unavailable, then the next model.
	Unavailable string
	// Stop ends the stream without a finish reason: the client receives
	// nothing more for the request (Glide's behaviour, section 4.3).
	Stop bool
}

// Peer is the reference Glide router, an http.Handler.
type Peer struct {
	cfg Config
	mux *http.ServeMux
	up  websocket.Upgrader

	mu       sync.Mutex
	latches  map[string]chan struct{}
	received [][]byte
	conns    map[*websocket.Conn]struct{}
	accepted int
	closed   bool
	handlers sync.WaitGroup
}

// New returns a peer.
func New(cfg Config) *Peer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Peer{cfg: cfg, mux: http.NewServeMux(), latches: map[string]chan struct{}{}, conns: map[*websocket.Conn]struct{}{}}
	p.mux.HandleFunc("GET /v1/language/{router}/chatStream", p.serveChatStream)
	return p
}

// ServeHTTP implements http.Handler.
func (p *Peer) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

// Release opens latch name: steps waiting on it proceed, and later ones
// do not wait.
func (p *Peer) Release(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := p.latch(name)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (p *Peer) latch(name string) chan struct{} {
	ch := p.latches[name]
	if ch == nil {
		ch = make(chan struct{})
		p.latches[name] = ch
	}
	return ch
}

// Received returns the request frames received so far, in arrival order.
func (p *Peer) Received() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.received...)
}

// Connections returns how many WebSocket connections the peer accepted.
func (p *Peer) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Disconnect closes the open connections with 1001 (a rollout, as GEP-8
// describes it) and keeps serving new ones.
func (p *Peer) Disconnect() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "peer closing"), time.Now().Add(time.Second))
		_ = c.Close()
	}
}

// Close disconnects every connection, refuses new ones and waits for the
// handlers to return.
func (p *Peer) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Disconnect()
	p.handlers.Wait()
}

// writeOptions write frames as Glide's WriteJSON (encoding/json) does, byte
// for byte (testdata/peer.golden): <, >, &, U+2028 and U+2029 escaped,
// invalid UTF-8 as U+FFFD, map keys sorted, nil as null.
var writeOptions = json.JoinOptions(json.EscapeForHTML(true), json.EscapeForJS(true), json.AllowInvalidUTF8(true),
	json.Deterministic(true), json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true))

// readOptions read requests as encoding/json did: names match ignoring
// case, of duplicates the last wins, invalid UTF-8 becomes U+FFFD, a value
// of the wrong type does not stop the rest (a payload_parse_error reply
// echoes the id and metadata) and errors are worded as it worded them.
var readOptions = json.JoinOptions(json.MatchCaseInsensitiveNames(true), json.MatchCaseSensitiveDelimiter(true),
	json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true), json.ReportErrorsWithLegacySemantics(true))

// writeJSON is v as WriteJSON sends it: JSON and a newline.
func writeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v, writeOptions)
	return append(b, '\n'), err
}

type errorBody struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

func (p *Peer) serveChatStream(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUpgradeRequired)
		_, _ = w.Write([]byte("Upgrade Required"))
		return
	}
	routerID := r.PathValue("router")
	router, ok := p.cfg.Routers[routerID]
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		if b, err := writeJSON(errorBody{"router_not_found", "router is not found"}); err == nil {
			_, _ = w.Write(b)
		}
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	p.handlers.Add(1)
	p.mu.Unlock()
	defer p.handlers.Done()
	ws, err := p.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns[ws] = struct{}{}
	p.accepted++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, ws)
		p.mu.Unlock()
		_ = ws.Close()
	}()
	p.serveConn(ws, routerID, router)
}

// chatStreamRequest is Glide's ChatStreamRequest.
type chatStreamRequest struct {
	ID             string                   `json:"id"`
	Message        *chatMessage             `json:"message"`
	MessageHistory []chatMessage            `json:"message_history"`
	OverrideParams map[string]modelOverride `json:"override_params"`
	Metadata       *map[string]any          `json:"metadata"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type modelOverride struct {
	Message *chatMessage `json:"message"`
}

// chatStreamMessage is Glide's ChatStreamMessage.
type chatStreamMessage struct {
	ID        string           `json:"id"`
	CreatedAt int              `json:"created_at"`
	RouterID  string           `json:"router_id"`
	Metadata  *map[string]any  `json:"metadata,omitzero"`
	Chunk     *chatStreamChunk `json:"chunk,omitzero"`
	Error     *chatStreamError `json:"error,omitzero"`
}

type chatStreamChunk struct {
	ModelID       string             `json:"model_id"`
	Provider      string             `json:"provider_id"`
	ModelName     string             `json:"model_name"`
	Cached        bool               `json:"cached"`
	ModelResponse modelChunkResponse `json:"model_response"`
	FinishReason  *string            `json:"finish_reason,omitzero"`
}

type modelChunkResponse struct {
	Metadata *map[string]any `json:"metadata,omitzero"`
	Message  chatMessage     `json:"message"`
}

type chatStreamError struct {
	Name         string  `json:"name"`
	Message      string  `json:"message"`
	FinishReason *string `json:"finish_reason,omitzero"`
}

// serveConn is the connection's control goroutine: it reads requests and
// starts one goroutine per request; the writer goroutine is the only one
// writing. It returns when the client has gone and every goroutine ended.
func (p *Peer) serveConn(ws *websocket.Conn, routerID string, router Router) {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan *chatStreamMessage)
	writerDone := make(chan struct{})
	go func() { // writer
		defer close(writerDone)
		for m := range out {
			b, err := writeJSON(m)
			if err == nil {
				err = ws.WriteMessage(websocket.TextMessage, b)
			}
			if err != nil {
				cancel()
				for range out { // drain until closed
				}
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			break
		}
		p.mu.Lock()
		p.received = append(p.received, append([]byte(nil), data...))
		p.mu.Unlock()
		var req chatStreamRequest
		if err := json.Unmarshal(data, &req, readOptions); err != nil || req.Message == nil {
			msg := "message is required"
			if err != nil {
				msg = err.Error()
			}
			m := p.errorMsg(req.ID, routerID, req.Metadata, "payload_parse_error", msg, true)
			select {
			case out <- m:
			case <-ctx.Done():
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.chatStream(ctx, routerID, router, &req, out)
		}()
	}
	cancel()
	wg.Wait()
	close(out)
	<-writerDone
}

func (p *Peer) errorMsg(id, routerID string, md *map[string]any, name, msg string, terminal bool) *chatStreamMessage {
	m := &chatStreamMessage{ID: id, CreatedAt: int(p.cfg.Now().UTC().Unix()), RouterID: routerID, Metadata: md,
		Error: &chatStreamError{Name: name, Message: msg}}
	if terminal {
		reason := "error"
		m.Error.FinishReason = &reason
	}
	return m
}

// chatStream is LangRouter.ChatStream over the scripted models.
func (p *Peer) chatStream(ctx context.Context, routerID string, router Router, req *chatStreamRequest, out chan<- *chatStreamMessage) {
	send := func(m *chatStreamMessage) bool {
		select {
		case out <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if len(router.Models) == 0 {
		send(p.errorMsg(req.ID, routerID, req.Metadata, "no_model_configured", "no models configured for router", true))
		return
	}
	for _, m := range router.Models {
		provider := or(m.Provider, "openai")
		name := or(m.Name, "gpt-3.5-turbo-0125")
		chunk := func(content string, finish *string) *chatStreamMessage {
			md := map[string]any{
				"response_id":        "chatcmpl-" + req.ID + "-" + m.ID,
				"system_fingerprint": "fp_peer",
				"generated_at":       p.cfg.Now().UTC().Unix(),
			}
			return &chatStreamMessage{ID: req.ID, CreatedAt: int(p.cfg.Now().UTC().Unix()), RouterID: routerID, Metadata: req.Metadata,
				Chunk: &chatStreamChunk{ModelID: m.ID, Provider: provider, ModelName: name,
					ModelResponse: modelChunkResponse{Metadata: &md, Message: chatMessage{Role: or(m.Role, "assistant"), Content: content}},
					FinishReason:  finish}}
		}
		failed := false
	steps:
		for _, st := range m.Steps {
			if st.Delay > 0 {
				t := time.NewTimer(st.Delay)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				}
			}
			if st.Wait != "" {
				p.mu.Lock()
				ch := p.latch(st.Wait)
				p.mu.Unlock()
				select {
				case <-ch:
				case <-ctx.Done():
					return
				}
			}
			switch {
			case st.Stop:
				return
			case st.Unavailable != "":
				if !send(p.errorMsg(req.ID, routerID, req.Metadata, "model_unavailable", st.Unavailable, false)) {
					return
				}
				failed = true
				break steps
			case st.Echo:
				for _, w := range words(effective(req, m.ID, name).Content) {
					if !send(chunk(w, nil)) {
						return
					}
				}
			default:
				if !send(chunk(st.Text, nil)) {
					return
				}
			}
		}
		if !failed {
			finish := or(m.Finish, "complete")
			send(chunk("", &finish))
			return
		}
	}
	send(p.errorMsg(req.ID, routerID, req.Metadata, "all_models_unavailable", "all providers are unavailable", true))
}

// effective is the message for a model: the override for its id, else for
// its name, else the request's.
func effective(req *chatStreamRequest, id, name string) chatMessage {
	if o, ok := req.OverrideParams[id]; ok && o.Message != nil {
		return *o.Message
	}
	if o, ok := req.OverrideParams[name]; ok && o.Message != nil {
		return *o.Message
	}
	return *req.Message
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

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
