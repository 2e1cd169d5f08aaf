package glide

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/bench/load"
	glidepeer "github.com/interlingua-dev/interlingua/conformance/peers/glide"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// loadProfile is Glide's part in the load harness: a client holding one
// chatStream WebSocket per stream, kept across rounds; the reference peer
// (conformance/peers/glide) with its WebSocket frames stamped; idle
// chatStream WebSockets. Glide requests carry no parameters, and the
// frontend takes 1,024 connections.
var loadProfile = &load.Load{
	Title:       "Glide WebSocket",
	NewClient:   newLoadClient,
	NewUpstream: newLoadUpstream,
	Echo:        true,
	MaxStreams:  1000,
	RatioDeltas: 10_000,
	Idle: &load.Idle{Transport: load.WebSocket, Max: 1000, Text: "Glide chatStream WebSockets", Open: func(ctx context.Context, addr string, _ int) (io.Closer, error) {
		return load.DialIdle(ctx, "ws://"+addr+"/v1/language/stream/chatStream")
	}},
}

var loadDialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 16 << 10, WriteBufferSize: 4 << 10}

type loadClient struct {
	cs    load.ClientSpec
	mu    sync.Mutex
	conns []*websocket.Conn
}

func newLoadClient(cs load.ClientSpec) (load.Client, error) {
	return &loadClient{cs: cs, conns: make([]*websocket.Conn, cs.Streams)}, nil
}

func (c *loadClient) conn(ctx context.Context, i int) (*websocket.Conn, error) {
	c.mu.Lock()
	ws := c.conns[i]
	c.mu.Unlock()
	if ws != nil {
		return ws, nil
	}
	u := strings.Replace(c.cs.Base, "http://", "ws://", 1) + "/v1/language/" + c.cs.Target + "/chatStream"
	ws, resp, err := loadDialer.DialContext(ctx, u, nil)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %v (HTTP %d)", u, err, resp.StatusCode)
		}
		return nil, fmt.Errorf("dial %s: %v", u, err)
	}
	c.mu.Lock()
	c.conns[i] = ws
	c.mu.Unlock()
	return ws, nil
}

// loadRequest is the chatStream request the client sends.
type loadRequest struct {
	ID      string      `json:"id"`
	Message loadMessage `json:"message"`
}

type loadMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

var (
	loadIDKey      = []byte(`{"id":"`)
	loadContentKey = []byte(`"content":"`)
	loadFinishKey  = []byte(`"finish_reason":"`)
	loadErrorKey   = []byte(`"error":{`)
)

func (c *loadClient) Stream(ctx context.Context, i int, prompt string, rec *load.Recorder) error {
	rec.Begin()
	ws, err := c.conn(ctx, i)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		c.mu.Lock()
		c.conns[i] = nil
		c.mu.Unlock()
		_ = ws.Close()
		return err
	}
	msg, err := json.Marshal(loadRequest{ID: "1", Message: loadMessage{Role: "user", Content: prompt}})
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = ws.SetReadDeadline(dl)
	}
	if err := ws.WriteMessage(websocket.TextMessage, msg); err != nil {
		return fail(err)
	}
	buf := make([]byte, 0, 4096)
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			return fail(err)
		}
		if buf, err = readMessage(r, buf[:0]); err != nil {
			return fail(err)
		}
		switch {
		case bytes.Contains(buf, loadErrorKey):
			return fmt.Errorf("error frame: %s", bytes.TrimSpace(buf))
		case bytes.Contains(buf, loadFinishKey):
			return nil
		}
		if j := bytes.Index(buf, loadContentKey); j >= 0 && j+len(loadContentKey) < len(buf) && buf[j+len(loadContentKey)] != '"' {
			rec.Delta()
		}
	}
}

// readMessage appends the message r reads to buf.
func readMessage(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func (c *loadClient) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ws := range c.conns {
		if ws != nil {
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			_ = ws.Close()
			c.conns[i] = nil
		}
	}
}

// newLoadUpstream scripts router sc.Target on the reference peer: the
// first chunk echoes the request's message (the stream key, which is how
// frames are matched to streams whatever request id the bridge gives
// them), then sc.Deltas-1 chunks of text.
func newLoadUpstream(sc load.Script) (*load.Upstream, error) {
	steps := make([]glidepeer.Step, sc.Deltas)
	steps[0] = glidepeer.Step{Echo: true, Delay: sc.Interval}
	for i := 1; i < len(steps); i++ {
		steps[i] = glidepeer.Step{Text: sc.Text, Delay: sc.Interval}
	}
	peer := glidepeer.New(glidepeer.Config{Routers: map[string]glidepeer.Router{
		sc.Target: {Models: []glidepeer.Model{{ID: "m", Steps: steps}}},
	}})
	book := load.NewStampBook(sc.Deltas)
	srv, err := load.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer.ServeHTTP(&hijackWriter{ResponseWriter: w, book: book}, r)
	}), false)
	if err != nil {
		peer.Close()
		return nil, err
	}
	u := &load.Upstream{Base: "ws://" + srv.Addr(), Book: book, Close: func() { peer.Close(); srv.Close() }}
	u.Backend = map[string]any{
		"url":           "ws://" + srv.Addr() + "/v1/language/" + sc.Target + "/chatStream",
		"max_in_flight": max(256, 2*sc.Streams),
		// Runs share the pool's upstream connections, so the backend
		// cannot push back on one run: it buffers up to this many frames
		// per run and fails the run past it. An unpaced peer gets that far
		// ahead.
		"max_buffered_frames": max(1024, sc.Deltas+64),
	}
	if sc.Deltas+64 > 1024 {
		u.Notes = append(u.Notes, fmt.Sprintf("the bridge's Glide backend runs with max_buffered_frames %d: at its default, 1,024, an unpaced peer that gets more than 1,024 frames ahead of the client fails the run (resource_exhausted), since runs sharing an upstream connection cannot be pushed back one by one", sc.Deltas+64))
	}
	return u, nil
}

// hijackWriter hands the peer's WebSocket a conn that stamps its frames.
type hijackWriter struct {
	http.ResponseWriter
	book *load.StampBook
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &stampConn{Conn: c, book: w.book, byID: map[string]*load.Stamps{}}, rw, nil
}

// stampConn reads each WebSocket frame the peer writes (server frames
// are unmasked, one frame per Write for small messages): the request id,
// then the first chunk's content names the stream; text chunks are
// stamped, a chunk with finish_reason or an error frame ends the stream.
// Only the peer's writer goroutine calls Write.
type stampConn struct {
	net.Conn
	book *load.StampBook
	byID map[string]*load.Stamps
}

func (c *stampConn) Write(p []byte) (int, error) {
	c.observe(p)
	return c.Conn.Write(p)
}

func (c *stampConn) observe(p []byte) {
	i := bytes.Index(p, loadIDKey)
	if i < 0 {
		return
	}
	id, ok := quoted(p[i+len(loadIDKey):])
	if !ok {
		return
	}
	st := c.byID[string(id)]
	end := bytes.Contains(p, loadFinishKey) || bytes.Contains(p, loadErrorKey)
	if st == nil {
		if end {
			return
		}
		j := bytes.Index(p, loadContentKey)
		if j < 0 {
			return
		}
		key, ok := quoted(p[j+len(loadContentKey):])
		if !ok {
			return
		}
		if st = c.book.Get(string(key)); st == nil {
			return
		}
		c.byID[string(id)] = st
	}
	if end {
		delete(c.byID, string(id))
		st.Finish()
		return
	}
	st.Add()
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
