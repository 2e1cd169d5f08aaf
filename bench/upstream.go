package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/canonical"
	glidepeer "github.com/interlingua-dev/interlingua/conformance/peers/glide"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
	"github.com/interlingua-dev/interlingua/internal/metrics"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// benchTarget is the target (Triton model, Glide router, Evergreen
// target id) every upstream serves and every bridge route names.
const benchTarget = "bench"

// upstream is a backend protocol's peer: what the bridge's backend calls,
// and what a client of the same protocol calls directly.
type upstream interface {
	// backend is the bridge's backend config that reaches the peer.
	backend() (bridge.BackendConfig, error)
	// base is the URL a client of the peer's protocol uses directly.
	base() string
	// book holds the send stamps of the peer's deltas by stream key.
	book() *stampBook
	close()
}

// script is what every upstream streams per request.
type script struct {
	deltas   int
	text     string
	interval time.Duration // before each delta; 0 as fast as possible
	streams  int
}

// server is a loopback HTTP server owned by an upstream.
type server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

func serve(h http.Handler, h2c bool) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan struct{})}
	if h2c {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		s.srv.Protocols = &p
	}
	go s.run()
	return s, nil
}

func (s *server) run() {
	defer close(s.done)
	_ = s.srv.Serve(s.ln)
}

func (s *server) addr() string { return s.ln.Addr().String() }

func (s *server) close() {
	_ = s.srv.Close()
	<-s.done
}

// options turns a map into a backend options node.
func options(m map[string]any) (yaml.Node, error) {
	data, err := yaml.Marshal(m)
	if err != nil {
		return yaml.Node{}, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return yaml.Node{}, err
	}
	return *doc.Content[0], nil
}

// --- Triton: conformance/peers/triton, its SSE frames stamped ---

type tritonUp struct {
	peer  *tritonpeer.Server
	srv   *server
	stamp *stampBook
}

func newTritonUp(sc script) (upstream, error) {
	chunks := make([]string, sc.deltas)
	for i := range chunks {
		chunks[i] = sc.text
	}
	u := &tritonUp{
		peer:  tritonpeer.New(tritonpeer.Model{Name: benchTarget, Chunks: chunks, Delay: sc.interval}),
		stamp: newStampBook(sc.deltas),
	}
	var err error
	if u.srv, err = serve(u, false); err != nil {
		return nil, err
	}
	return u, nil
}

func (u *tritonUp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/generate_stream") {
		u.peer.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	st := u.stamp.get(textInput(body))
	if st == nil {
		u.peer.ServeHTTP(w, r)
		return
	}
	defer st.finish()
	u.peer.ServeHTTP(&stampWriter{ResponseWriter: w, st: st}, r)
}

// textInput is a generate body's text_input ("x", ["x"] or [["x"]]).
func textInput(body []byte) string {
	var b struct {
		TextInput json.RawMessage `json:"text_input"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	raw := b.TextInput
	for len(raw) > 0 && raw[0] == '[' {
		var l []json.RawMessage
		if json.Unmarshal(raw, &l) != nil || len(l) == 0 {
			return ""
		}
		raw = l[0]
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// stampWriter stamps each SSE frame the peer writes.
type stampWriter struct {
	http.ResponseWriter
	st *stamps
}

func (w *stampWriter) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("data:")) && !bytes.Contains(p, []byte(`{"error"`)) {
		w.st.add()
	}
	return w.ResponseWriter.Write(p)
}

func (w *stampWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *stampWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (u *tritonUp) backend() (bridge.BackendConfig, error) {
	o, err := options(map[string]any{"url": "http://" + u.srv.addr()})
	return bridge.BackendConfig{Type: "triton", Options: o}, err
}

func (u *tritonUp) base() string     { return "http://" + u.srv.addr() }
func (u *tritonUp) book() *stampBook { return u.stamp }
func (u *tritonUp) close()           { u.srv.close() }

// --- Glide: conformance/peers/glide, its WebSocket frames stamped ---

type glideUp struct {
	peer    *glidepeer.Peer
	srv     *server
	stamp   *stampBook
	streams int
	deltas  int
}

// newGlideUp scripts router "bench": the first chunk echoes the request's
// message (the stream key, which is how frames are matched to streams
// whatever request id the bridge gives them), then deltas-1 chunks of text.
func newGlideUp(sc script) (upstream, error) {
	steps := make([]glidepeer.Step, sc.deltas)
	steps[0] = glidepeer.Step{Echo: true, Delay: sc.interval}
	for i := 1; i < len(steps); i++ {
		steps[i] = glidepeer.Step{Text: sc.text, Delay: sc.interval}
	}
	u := &glideUp{
		peer: glidepeer.New(glidepeer.Config{Routers: map[string]glidepeer.Router{
			benchTarget: {Models: []glidepeer.Model{{ID: "m", Steps: steps}}},
		}}),
		stamp:   newStampBook(sc.deltas),
		streams: sc.streams,
		deltas:  sc.deltas,
	}
	var err error
	if u.srv, err = serve(u, false); err != nil {
		return nil, err
	}
	return u, nil
}

func (u *glideUp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.peer.ServeHTTP(&hijackWriter{ResponseWriter: w, book: u.stamp}, r)
}

// hijackWriter hands the peer's WebSocket a conn that stamps its frames.
type hijackWriter struct {
	http.ResponseWriter
	book *stampBook
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &stampConn{Conn: c, book: w.book, byID: map[string]*stamps{}}, rw, nil
}

// stampConn reads each WebSocket frame the peer writes (server frames
// are unmasked, one frame per Write for small messages): the request id,
// then the first chunk's content names the stream; text chunks are
// stamped, a chunk with finish_reason or an error frame ends the stream.
// Only the peer's writer goroutine calls Write.
type stampConn struct {
	net.Conn
	book *stampBook
	byID map[string]*stamps
}

var (
	idKey      = []byte(`{"id":"`)
	contentKey = []byte(`"content":"`)
	finishKey  = []byte(`"finish_reason":"`)
	errorKey   = []byte(`"error":{`)
)

func (c *stampConn) Write(p []byte) (int, error) {
	c.observe(p)
	return c.Conn.Write(p)
}

func (c *stampConn) observe(p []byte) {
	i := bytes.Index(p, idKey)
	if i < 0 {
		return
	}
	id, ok := quoted(p[i+len(idKey):])
	if !ok {
		return
	}
	st := c.byID[string(id)]
	end := bytes.Contains(p, finishKey) || bytes.Contains(p, errorKey)
	if st == nil {
		if end {
			return
		}
		j := bytes.Index(p, contentKey)
		if j < 0 {
			return
		}
		key, ok := quoted(p[j+len(contentKey):])
		if !ok {
			return
		}
		if st = c.book.get(string(key)); st == nil {
			return
		}
		c.byID[string(id)] = st
	}
	if end {
		delete(c.byID, string(id))
		st.finish()
		return
	}
	st.add()
}

// quoted returns the JSON string body up to its closing quote (no
// escapes expected in ids and keys).
func quoted(p []byte) ([]byte, bool) {
	j := bytes.IndexByte(p, '"')
	if j < 0 {
		return nil, false
	}
	return p[:j], true
}

func (u *glideUp) backend() (bridge.BackendConfig, error) {
	o, err := options(map[string]any{
		"url":           "ws://" + u.srv.addr() + "/v1/language/" + benchTarget + "/chatStream",
		"max_in_flight": max(256, 2*u.streams),
		// Runs share the one upstream connection, so the backend cannot
		// push back on one run: it buffers up to this many frames per run
		// and fails the run past it. An unpaced peer gets that far ahead.
		"max_buffered_frames": max(1024, u.deltas+64),
	})
	return bridge.BackendConfig{Type: "glide", Options: o}, err
}

func (u *glideUp) base() string     { return "ws://" + u.srv.addr() }
func (u *glideUp) book() *stampBook { return u.stamp }
func (u *glideUp) close() {
	u.peer.Close()
	u.srv.close()
}

// --- Evergreen: the adapters/evergreen frontend in front of a producer ---

type evergreenUp struct {
	prod *producer
	srv  *server
}

func newEvergreenUp(sc script) (upstream, error) {
	p := &producer{sc: sc, stamp: newStampBook(sc.deltas)}
	fe, err := mountUpstream("evergreen", p, map[string]any{"max_running": 1024})
	if err != nil {
		return nil, err
	}
	u := &evergreenUp{prod: p}
	if u.srv, err = serve(fe.mux, true); err != nil {
		fe.close()
		return nil, err
	}
	return u, nil
}

func (u *evergreenUp) backend() (bridge.BackendConfig, error) {
	o, err := options(map[string]any{"url": "http://" + u.srv.addr()})
	return bridge.BackendConfig{Type: "evergreen", Options: o}, err
}

func (u *evergreenUp) base() string     { return "http://" + u.srv.addr() }
func (u *evergreenUp) book() *stampBook { return u.prod.stamp }
func (u *evergreenUp) close()           { u.srv.close() }

// mountedFrontend is a protocol's frontend (protocol.Protocol.Mount) on a
// mux of its own, with the hooks it registered.
type mountedFrontend struct {
	mux                 *http.ServeMux
	onShutdown, onClose []func()
}

// mountUpstream mounts protocol name's frontend in front of runner, with
// opts as its frontends.<name> config block.
func mountUpstream(name string, runner canonical.Runner, opts map[string]any) (*mountedFrontend, error) {
	p := protocols.Get(name)
	if p == nil || p.Mount == nil {
		return nil, errors.New("no frontend for " + name)
	}
	m := &mountedFrontend{mux: http.NewServeMux()}
	d := protocol.FrontendDeps{Runner: runner, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(),
		OnShutdown: func(f func()) { m.onShutdown = append(m.onShutdown, f) },
		OnClose:    func(f func()) { m.onClose = append(m.onClose, f) }}
	if opts != nil {
		node, err := options(opts)
		if err != nil {
			return nil, err
		}
		d.Options = &node
	}
	if err := p.Mount(m.mux, d); err != nil {
		return nil, err
	}
	return m, nil
}

// shutdown runs the frontend's shutdown hooks (idle connections close).
func (m *mountedFrontend) shutdown() {
	for _, f := range m.onShutdown {
		f()
	}
}

// close runs its close hooks.
func (m *mountedFrontend) close() {
	for _, f := range m.onClose {
		f()
	}
}

// producer is a canonical.Runner that streams the script for any target:
// one assistant message of sc.deltas text deltas, paced on an absolute
// schedule, each stamped as it is handed to the frontend. The stream key
// is the request's prompt text.
type producer struct {
	sc    script
	stamp *stampBook
}

func (p *producer) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	key := canonical.PromptText(req)
	ctx, cancel := context.WithCancel(ctx)
	s := &prodStream{ctx: ctx, cancel: cancel, sc: p.sc, st: p.stamp.get(key), b: canonical.NewBuilder()}
	s.out = s.b.Lifecycle(s.out, canonical.StatusRunning)
	s.start = time.Now()
	return s, nil
}

func (p *producer) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name, Backend: "producer"}, true
}

func (p *producer) Targets() []canonical.TargetInfo {
	return []canonical.TargetInfo{{Name: benchTarget, Backend: "producer"}}
}

type prodStream struct {
	ctx    context.Context
	cancel context.CancelFunc
	sc     script
	st     *stamps
	b      *canonical.Builder
	out    []*canonical.Event
	next   int
	sent   int
	start  time.Time
	timer  *time.Timer
	seq    uint64
}

func (s *prodStream) Recv() (*canonical.Event, error) {
	for s.next == len(s.out) {
		if s.b.Ended() {
			if s.st != nil {
				s.st.finish()
			}
			return nil, io.EOF
		}
		s.out, s.next = s.out[:0], 0
		switch {
		case s.ctx.Err() != nil:
			s.out = s.b.End(s.out, canonical.StatusCancelled, canonical.AsError(s.ctx.Err()))
		case s.sent == s.sc.deltas:
			s.out = s.b.FinishMessage(s.out, canonical.FinishStop, nil)
			s.out = s.b.End(s.out, canonical.StatusCompleted, nil)
		default:
			if !s.wait() {
				continue
			}
			s.out = s.b.Text(s.out, s.sc.text)
			s.sent++
		}
	}
	ev := s.out[s.next]
	s.next++
	s.seq++
	ev.Seq = s.seq
	if _, ok := ev.GetKind().(*canonical.KindBlockDelta); ok && s.st != nil {
		s.st.add()
	}
	return ev, nil
}

// wait sleeps until the next delta is due; false when cancelled.
func (s *prodStream) wait() bool {
	if s.sc.interval <= 0 {
		return true
	}
	d := time.Until(s.start.Add(time.Duration(s.sent+1) * s.sc.interval))
	if d <= 0 {
		return true
	}
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.timer.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *prodStream) Close() error {
	s.cancel()
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.st != nil {
		s.st.finish()
	}
	return nil
}

// --- agent protocol: the adapters/agent frontend in front of a producer ---

type agentUp struct {
	prod *producer
	fe   *mountedFrontend
	srv  *server
}

func newAgentUp(sc script) (upstream, error) {
	p := &producer{sc: sc, stamp: newStampBook(sc.deltas)}
	fe, err := mountUpstream("agent", p, nil)
	if err != nil {
		return nil, err
	}
	u := &agentUp{prod: p, fe: fe}
	if u.srv, err = serve(fe.mux, false); err != nil {
		fe.close()
		return nil, err
	}
	return u, nil
}

func (u *agentUp) backend() (bridge.BackendConfig, error) {
	o, err := options(map[string]any{"url": "http://" + u.srv.addr()})
	return bridge.BackendConfig{Type: "agent", Options: o}, err
}

func (u *agentUp) base() string     { return "http://" + u.srv.addr() }
func (u *agentUp) book() *stampBook { return u.prod.stamp }
func (u *agentUp) close() {
	u.fe.shutdown()
	u.srv.close()
	u.fe.close()
}

// newUpstream builds the peer of a backend protocol.
func newUpstream(protocol string, sc script) (upstream, error) {
	switch protocol {
	case "agent":
		return newAgentUp(sc)
	case "triton":
		return newTritonUp(sc)
	case "glide":
		return newGlideUp(sc)
	case "evergreen":
		return newEvergreenUp(sc)
	case "anthropic":
		return newAnthropicUp(sc)
	case "openai":
		return newOpenAIUp(sc)
	case "responses":
		return newResponsesUp(sc)
	}
	return nil, errors.New("no upstream peer for " + protocol)
}
