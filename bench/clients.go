package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// client is a frontend protocol's client. stream sends one streaming
// request for slot i (0..streams-1; a slot runs one stream at a time)
// with prompt, records each text delta in rec, and returns when the
// response ends; an error is a failed or broken stream.
type client interface {
	stream(ctx context.Context, i int, prompt string, rec *recorder) error
	close()
}

// clientSpec is where a client sends and what it asks for.
type clientSpec struct {
	base    string         // http://host:port
	target  string         // model, router or target id
	params  map[string]any // request parameters (scripted stream target)
	streams int
	// mode names the path ("direct", "bridged"): where a protocol names
	// server-side state (agent threads), the paths use different names,
	// since the bridge passes its thread ids on to the same upstream.
	mode string
}

func newClient(protocol string, cs clientSpec) (client, error) {
	switch protocol {
	case "triton":
		return newTritonClient(cs), nil
	case "glide":
		return &glideClient{cs: cs, conns: make([]*websocket.Conn, cs.streams)}, nil
	case "evergreen":
		return newEvergreenClient(cs)
	case "xml":
		return &xmlClient{cs: cs, hc: httpClient(cs.streams)}, nil
	case "native":
		return &nativeClient{cs: cs, hc: httpClient(cs.streams)}, nil
	case "anthropic":
		return &anthropicClient{cs: cs, hc: httpClient(cs.streams)}, nil
	case "openai":
		return newOpenAIClient(cs)
	case "responses":
		return newResponsesClient(cs)
	case "agent":
		return &agentClient{cs: cs, hc: httpClient(2 * cs.streams), seq: make([]uint64, cs.streams)}, nil
	}
	return nil, fmt.Errorf("no client for frontend %q", protocol)
}

func httpClient(streams int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: streams + 16, MaxIdleConnsPerHost: streams + 16, MaxConnsPerHost: 0,
		DisableCompression: true, IdleConnTimeout: time.Minute,
		WriteBufferSize: 4 << 10, ReadBufferSize: 32 << 10,
	}}
}

// readPool recycles the SSE/NDJSON line readers.
var readPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// maxLine bounds one line a client reads (an agent-protocol block finish
// carries the block's whole text).
const maxLine = 64 << 20

// lines calls fn for each line of r (without its end) until EOF.
func lines(r io.Reader, fn func(line []byte) error) error {
	br := readPool.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() { br.Reset(nil); readPool.Put(br) }()
	var long []byte // a line longer than the reader's buffer
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(line) > maxLine {
				return fmt.Errorf("line longer than %d bytes", maxLine)
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

func post(ctx context.Context, hc *http.Client, url string, body []byte, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
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

// --- Triton: POST generate_stream, SSE scanned for text_output ---

type tritonClient struct {
	cs  clientSpec
	hc  *http.Client
	url string
}

func newTritonClient(cs clientSpec) *tritonClient {
	return &tritonClient{cs: cs, hc: httpClient(cs.streams), url: cs.base + "/v2/models/" + cs.target + "/generate_stream"}
}

var (
	dataPrefix     = []byte("data:")
	textOutputKey  = []byte(`"text_output":"`)
	sseErrorPrefix = []byte(`{"error"`)
)

func (c *tritonClient) stream(ctx context.Context, _ int, prompt string, rec *recorder) error {
	body := map[string]any{"text_input": prompt, "stream": true}
	for k, v := range c.cs.params {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	rec.start = now()
	resp, err := post(ctx, c.hc, c.url, b, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return lines(resp.Body, func(line []byte) error {
		if !bytes.HasPrefix(line, dataPrefix) {
			return nil
		}
		data := bytes.TrimLeft(line[len(dataPrefix):], " ")
		if bytes.HasPrefix(data, sseErrorPrefix) {
			return fmt.Errorf("in-band error: %s", data)
		}
		if i := bytes.Index(data, textOutputKey); i >= 0 && i+len(textOutputKey) < len(data) && data[i+len(textOutputKey)] != '"' {
			rec.delta()
		}
		return nil
	})
}

func (c *tritonClient) close() { c.hc.CloseIdleConnections() }

// --- Glide: one WebSocket per slot, kept across rounds ---

type glideClient struct {
	cs    clientSpec
	mu    sync.Mutex
	conns []*websocket.Conn
}

var glideDialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 16 << 10, WriteBufferSize: 4 << 10}

func (c *glideClient) conn(ctx context.Context, i int) (*websocket.Conn, error) {
	c.mu.Lock()
	ws := c.conns[i]
	c.mu.Unlock()
	if ws != nil {
		return ws, nil
	}
	u := strings.Replace(c.cs.base, "http://", "ws://", 1) + "/v1/language/" + c.cs.target + "/chatStream"
	ws, resp, err := glideDialer.DialContext(ctx, u, nil)
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

func (c *glideClient) stream(ctx context.Context, i int, prompt string, rec *recorder) error {
	rec.start = now()
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
	msg, _ := json.Marshal(map[string]any{"id": "1", "message": map[string]string{"role": "user", "content": prompt}})
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
		buf = buf[:0]
		for {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				return fail(err)
			}
		}
		switch {
		case bytes.Contains(buf, errorKey):
			return fmt.Errorf("error frame: %s", bytes.TrimSpace(buf))
		case bytes.Contains(buf, finishKey):
			return nil
		}
		if j := bytes.Index(buf, contentKey); j >= 0 && j+len(contentKey) < len(buf) && buf[j+len(contentKey)] != '"' {
			rec.delta()
		}
	}
}

func (c *glideClient) close() {
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

// --- Evergreen: the adapter's gRPC backend as the client ---

// evergreenPerConn streams share one client (one HTTP/2 connection).
const evergreenPerConn = 64

type evergreenClient struct {
	cs      clientSpec
	clients []canonical.Backend
	params  map[string]*structpb.Value
}

func newEvergreenClient(cs clientSpec) (*evergreenClient, error) {
	c := &evergreenClient{cs: cs}
	// The backend pointed at the server, configured as the bridge would
	// configure it with only a url.
	opts, err := options(map[string]any{"url": cs.base})
	if err != nil {
		return nil, err
	}
	deps := protocol.BackendDeps{Log: slog.New(slog.DiscardHandler)}
	for i := 0; i < (cs.streams+evergreenPerConn-1)/evergreenPerConn; i++ {
		b, err := protocols.Get("evergreen").NewBackend(&opts, deps)
		if err != nil {
			return nil, err
		}
		c.clients = append(c.clients, b)
	}
	if c.params, err = structParams(cs.params); err != nil {
		return nil, err
	}
	return c, nil
}

func structParams(m map[string]any) (map[string]*structpb.Value, error) {
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

func (c *evergreenClient) stream(ctx context.Context, i int, prompt string, rec *recorder) error {
	req := &canonical.Request{
		Target:     c.cs.target,
		Inputs:     []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", prompt)}},
		Parameters: c.params,
	}
	rec.start = now()
	s, err := c.clients[i/evergreenPerConn].Start(ctx, req)
	if err != nil {
		return err
	}
	defer s.Close()
	return recvDeltas(s, rec)
}

// recvDeltas records the text deltas of a canonical stream; a terminal
// event other than completed is an error.
func recvDeltas(s canonical.Stream, rec *recorder) error {
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			return errors.New("stream ended without a terminal event")
		}
		if err != nil {
			return err
		}
		if d := ev.GetBlockDelta(); d != nil && d.GetText() != "" {
			rec.delta()
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

func (c *evergreenClient) close() {}

// --- XML: POST /v1/xml/stream as SSE, one event per rendered piece ---

type xmlClient struct {
	cs clientSpec
	hc *http.Client
}

var xmlErrorTag = []byte("<error")

func (c *xmlClient) stream(ctx context.Context, _ int, prompt string, rec *recorder) error {
	b, _ := json.Marshal(map[string]any{"target": c.cs.target, "input": prompt, "parameters": c.cs.params})
	rec.start = now()
	resp, err := post(ctx, c.hc, c.cs.base+"/v1/xml/stream", b, "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return lines(resp.Body, func(line []byte) error {
		if !bytes.HasPrefix(line, dataPrefix) {
			return nil
		}
		data := bytes.TrimPrefix(line[len(dataPrefix):], []byte(" "))
		if bytes.Contains(data, xmlErrorTag) {
			return fmt.Errorf("error element: %s", data)
		}
		// A text delta's piece carries text; the closing "</response>"
		// alone does not.
		if len(data) > 0 && !(data[0] == '<' && bytes.IndexByte(data, '>') == len(data)-1) {
			rec.delta()
		}
		return nil
	})
}

func (c *xmlClient) close() { c.hc.CloseIdleConnections() }

// --- native: POST /v1/runs, NDJSON canonical events ---

type nativeClient struct {
	cs clientSpec
	hc *http.Client
}

var (
	blockDeltaKey = []byte(`"blockDelta"`)
	lifecycleKey  = []byte(`"lifecycle"`)
	errorField    = []byte(`"error"`)
)

func (c *nativeClient) stream(ctx context.Context, _ int, prompt string, rec *recorder) error {
	params, err := structParams(c.cs.params)
	if err != nil {
		return err
	}
	req := &canonical.Request{Target: c.cs.target, Parameters: params,
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", prompt)}}}
	b, err := protojson.Marshal(req)
	if err != nil {
		return err
	}
	rec.start = now()
	resp, err := post(ctx, c.hc, c.cs.base+"/v1/runs", b, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return lines(resp.Body, func(line []byte) error {
		switch {
		case bytes.Contains(line, blockDeltaKey):
			rec.delta()
		case bytes.Contains(line, lifecycleKey) && bytes.Contains(line, errorField):
			return fmt.Errorf("run failed: %s", line)
		}
		return nil
	})
}

func (c *nativeClient) close() { c.hc.CloseIdleConnections() }

// --- agent protocol: SSE thread stream, then run.start over HTTP ---

// agentClient opens an SSE stream on thread bench-<mode>-<slot> (lifecycle and
// messages channels) after the last seq it saw there, so earlier runs'
// buffered events are not replayed, starts a run with the run.start
// command (the parameters as config.configurable) and reads the stream
// until the root lifecycle event ends the run.
type agentClient struct {
	cs  clientSpec
	hc  *http.Client
	seq []uint64 // by slot: the last event seq seen on its thread
}

var (
	textDeltaKey   = []byte(`"text-delta"`)
	lifecycleEvent = []byte(`"method":"lifecycle"`)
	rootNamespace  = []byte(`"namespace":[]`)
	agentCompleted = []byte(`"event":"completed"`)
	agentEnded     = [][]byte{[]byte(`"event":"failed"`), []byte(`"event":"interrupted"`)}
	successKey     = []byte(`"type":"success"`)
	seqKey         = []byte(`"seq":`)
	errorTypeKey   = []byte(`{"type":"error"`)
)

// leadingUint parses the decimal digits at the start of b.
func leadingUint(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

func (c *agentClient) stream(ctx context.Context, i int, prompt string, rec *recorder) error {
	thread := c.cs.base + "/threads/bench-" + c.cs.mode + "-" + strconv.Itoa(i)
	rec.start = now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := fmt.Sprintf(`{"channels":["messages","lifecycle"],"since":%d}`, c.seq[i])
	resp, err := post(ctx, c.hc, thread+"/stream", []byte(sub), "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	cmd, _ := json.Marshal(map[string]any{"id": 1, "method": "run.start", "params": map[string]any{
		"assistant_id": c.cs.target,
		"input":        map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}}},
		"config":       map[string]any{"configurable": c.cs.params},
	}})
	cr, err := post(ctx, c.hc, thread+"/commands", cmd, "")
	if err != nil {
		return fmt.Errorf("run.start: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(cr.Body, 64<<10))
	cr.Body.Close()
	if !bytes.Contains(body, successKey) {
		return fmt.Errorf("run.start: %s", body)
	}
	errDone := errors.New("done")
	err = lines(resp.Body, func(line []byte) error {
		if !bytes.HasPrefix(line, dataPrefix) {
			return nil
		}
		if j := bytes.Index(line, seqKey); j >= 0 {
			if n := leadingUint(line[j+len(seqKey):]); n > c.seq[i] {
				c.seq[i] = n
			}
		}
		switch {
		case bytes.Contains(line, textDeltaKey):
			rec.delta()
		case bytes.Contains(line, errorTypeKey):
			return fmt.Errorf("error frame: %s", line)
		case bytes.Contains(line, lifecycleEvent) && bytes.Contains(line, rootNamespace):
			if bytes.Contains(line, agentCompleted) {
				return errDone
			}
			for _, k := range agentEnded {
				if bytes.Contains(line, k) {
					return fmt.Errorf("run ended: %s", line)
				}
			}
		}
		return nil
	})
	if err == errDone {
		return nil
	}
	if err == nil {
		return errors.New("stream ended before the run's terminal lifecycle event")
	}
	return err
}

func (c *agentClient) close() { c.hc.CloseIdleConnections() }
