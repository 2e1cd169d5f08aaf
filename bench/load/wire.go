package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// HTTPClient is a client's HTTP transport for streams concurrent streams:
// an idle connection kept per stream, no compression, 32 KiB reads.
func HTTPClient(streams int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: streams + 16, MaxIdleConnsPerHost: streams + 16, MaxConnsPerHost: 0,
		DisableCompression: true, IdleConnTimeout: time.Minute,
		WriteBufferSize: 4 << 10, ReadBufferSize: 32 << 10,
	}}
}

// DataPrefix starts an SSE data line.
var DataPrefix = []byte("data:")

// SSEData returns an SSE data line's payload (leading spaces cut), or
// false for any other line.
func SSEData(line []byte) ([]byte, bool) {
	if !bytes.HasPrefix(line, DataPrefix) {
		return nil, false
	}
	return bytes.TrimLeft(line[len(DataPrefix):], " "), true
}

// readPool recycles the SSE/NDJSON line readers.
var readPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// MaxLine bounds one line a client reads (an agent-protocol block finish
// carries the block's whole text).
const MaxLine = 64 << 20

// Lines calls fn for each line of r (without its end) until EOF or fn's
// error.
func Lines(r io.Reader, fn func(line []byte) error) error {
	br := readPool.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() { br.Reset(nil); readPool.Put(br) }()
	var long []byte // a line longer than the reader's buffer
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(line) > MaxLine {
				return fmt.Errorf("line longer than %d bytes", MaxLine)
			}
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if len(line) > 0 {
			if ferr := fn(bytes.TrimRight(line, "\r\n")); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Post sends body as JSON (with accept as Accept, when set) and returns
// the response if its status is 200; otherwise an error with the status
// and the start of the body.
func Post(ctx context.Context, hc *http.Client, url string, body []byte, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return Do(hc, req)
}

// Do sends req and returns the response if its status is 200; otherwise an
// error with the status and the start of the body.
func Do(hc *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp, nil
}

// HTTPTarget is a client's streaming endpoint over HTTP: each stream POSTs
// a JSON body to one URL and reads the response line by line. It holds the
// client's connections (HTTPClient).
type HTTPTarget struct {
	hc     *http.Client
	url    string
	header http.Header
}

// NewHTTPTarget returns the target cs.Base+path for cs.Streams streams;
// header (nil: none) is set on every request beside Content-Type:
// application/json.
func NewHTTPTarget(cs ClientSpec, path string, header http.Header) *HTTPTarget {
	h := http.Header{}
	for k, vs := range header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return &HTTPTarget{hc: HTTPClient(cs.Streams), url: cs.Base + path, header: h}
}

// Post records the stream's start in rec, POSTs body and calls line for
// each line of the response (as Lines does) until its end or line's
// error; a status other than 200 is an error with the status and the
// start of the body.
func (t *HTTPTarget) Post(ctx context.Context, body []byte, rec *Recorder, line func(line []byte) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range t.header {
		req.Header[k] = vs
	}
	rec.Begin()
	resp, err := Do(t.hc, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return Lines(resp.Body, line)
}

// Close releases the target's connections.
func (t *HTTPTarget) Close() { t.hc.CloseIdleConnections() }

// HasText reports whether p holds key (a member name and its opening
// quote) followed by a non-empty string.
func HasText(p, key []byte) bool {
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

// ErrNoParameters refuses the scripted backend behind a frontend whose
// requests carry only the protocol's own members: the bench parameters
// (deltas, delta_text, delay_ms) would not reach it.
func ErrNoParameters(frontend string) error {
	return fmt.Errorf("the %s frontend carries no bench parameters (deltas, delta_text, delay_ms): use a backend with a peer, not scripted or xml", frontend)
}

// StructParams converts request parameters to protobuf values.
func StructParams(m map[string]any) (map[string]*structpb.Value, error) {
	out := map[string]*structpb.Value{}
	for k, v := range m {
		pv, err := structpb.NewValue(v)
		if err != nil {
			return nil, err
		}
		out[k] = pv
	}
	return out, nil
}

// RecvDeltas records the text deltas of a canonical stream; a terminal
// event other than completed is an error.
func RecvDeltas(s canonical.Stream, rec *Recorder) error {
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			return errors.New("stream ended without a terminal event")
		}
		if err != nil {
			return err
		}
		if d := ev.GetBlockDelta(); d != nil && d.GetText() != "" {
			rec.Delta()
			continue
		}
		if st, ok := canonical.TerminalOf(ev); ok {
			if st != canonical.StatusCompleted {
				return fmt.Errorf("run ended %v: %s", st, ev.GetLifecycle().GetError().GetMessage())
			}
			return nil
		}
	}
}

// LastUserText is a chat body's last turn's text: messages[-1].content, a
// string or the text of its first text block (the messages shape of the
// Chat Completions and Messages APIs); "" when there is none.
func LastUserText(body []byte) string {
	var b struct {
		Messages []struct {
			Content json.Value `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Messages) == 0 {
		return ""
	}
	m := b.Messages[len(b.Messages)-1]
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &blocks)
	for _, bl := range blocks {
		if bl.Type == "text" {
			return bl.Text
		}
	}
	return ""
}

// Server is a loopback HTTP server owned by an upstream or a hop.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Serve serves h on a free loopback port; with h2c also HTTP/2 without
// TLS.
func Serve(h http.Handler, h2c bool) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan struct{})}
	if h2c {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		s.srv.Protocols = &p
	}
	go s.run()
	return s, nil
}

func (s *Server) run() {
	defer close(s.done)
	_ = s.srv.Serve(s.ln)
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close closes the server and its connections and waits for it.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.done
}

// StampWriter stamps each write of a peer's response (one whole frame or
// event per write) that Match accepts.
type StampWriter struct {
	http.ResponseWriter
	St    *Stamps
	Match func(p []byte) bool
}

func (w *StampWriter) Write(p []byte) (int, error) {
	if w.Match(p) {
		w.St.Add()
	}
	return w.ResponseWriter.Write(p)
}

// Flush flushes the response.
func (w *StampWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is the wrapped writer (http.ResponseController).
func (w *StampWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// StampedPeer serves peer, stamping the deltas of each request that
// matches: key reads a request body's stream key, match tells a write that
// carries a delta; requests on other paths than path ("" any) go to peer
// unstamped.
func StampedPeer(peer http.Handler, book *StampBook, path string, key func(body []byte) string, match func(p []byte) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path != "" && !strings.HasSuffix(r.URL.Path, path) {
			peer.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		st := book.Get(key(body))
		if st == nil {
			peer.ServeHTTP(w, r)
			return
		}
		defer st.Finish()
		peer.ServeHTTP(&StampWriter{ResponseWriter: w, St: st, Match: match}, r)
	})
}

var idleDialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 512, WriteBufferSize: 512}

// DialIdle opens a WebSocket at url and returns its connection, to be
// held idle.
func DialIdle(ctx context.Context, url string) (io.Closer, error) {
	ws, resp, err := idleDialer.DialContext(ctx, url, nil)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%v (HTTP %d)", err, resp.StatusCode)
		}
		return nil, err
	}
	return ws.NetConn(), nil
}

// OpenSSE POSTs body to path on addr with a raw HTTP/1.1 request and
// returns the connection, to be held idle, once the response headers say
// 200.
func OpenSSE(addr, path, body string) (io.Closer, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", path, addr, len(body), body)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	var buf [2048]byte
	n := 0
	for !bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
		if n == len(buf) {
			c.Close()
			return nil, errors.New("response headers too long")
		}
		k, err := c.Read(buf[n:])
		n += k
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("reading response headers: %w", err)
		}
	}
	if !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 200")) {
		c.Close()
		line, _, _ := bytes.Cut(buf[:n], []byte("\r\n"))
		return nil, fmt.Errorf("%s: %s", path, line)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}
