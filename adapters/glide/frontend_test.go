package glide

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// The frontend's golden transcripts (testdata/frontend/*.golden) record
// one connection each: "> " a frame the client sent, "< " a frame it
// received (byte for byte, with Glide's trailing newline), "x " the close
// or HTTP exchange. created_at needs no normalizing: the frontend's clock
// is fixed. Interleaving is deterministic: runs of target "lock" produce
// events only when the test pushes them, and the test reads the one frame
// each push produces before pushing the next, so the wire order is the
// order the test chose (the transcript then shows it).

type testServer struct {
	f   *Frontend
	run *fakeRunner
	srv *httptest.Server
}

func newTestServer(t *testing.T, cfg FrontendConfig) *testServer {
	t.Helper()
	ts := &testServer{run: newFakeRunner(t)}
	cfg.Runner = ts.run
	cfg.Now = fixedNow
	ts.f = NewFrontend(cfg)
	mux := http.NewServeMux()
	ts.f.Mount(mux)
	ts.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		ts.f.Close()
		ts.srv.Close()
	})
	return ts
}

func (ts *testServer) url(router string) string {
	return "ws" + strings.TrimPrefix(ts.srv.URL, "http") + "/v1/language/" + router + "/chatStream"
}

// client is a Glide application's connection, recording its transcript.
type client struct {
	t  *testing.T
	ws *websocket.Conn
	tr *bytes.Buffer
}

func (ts *testServer) dial(t *testing.T, router string, d *websocket.Dialer, tr *bytes.Buffer) *client {
	t.Helper()
	if d == nil {
		d = websocket.DefaultDialer
	}
	ws, resp, err := d.Dial(ts.url(router), nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", router, err, resp)
	}
	t.Cleanup(func() { _ = ws.Close() })
	fmt.Fprintf(tr, "x connect %s\n", router)
	return &client{t: t, ws: ws, tr: tr}
}

func (c *client) send(frame string) {
	c.t.Helper()
	c.tr.WriteString("> " + frame + "\n")
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) recv() string {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(timeout))
	typ, p, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if typ != websocket.TextMessage {
		c.t.Fatalf("message type %d, want text", typ)
	}
	c.tr.WriteString("< ")
	c.tr.Write(p) // ends with the frame's own newline
	checkGlideSchema(c.t, p)
	return string(p)
}

// glideMessage mirrors Glide's schemas.ChatStreamMessage (0.1.0-rc.1,
// pkg/api/schemas/chat_stream.go) field for field.
type glideMessage struct {
	ID        string          `json:"id"`
	CreatedAt int             `json:"created_at"`
	RouterID  string          `json:"router_id"`
	Metadata  *map[string]any `json:"metadata,omitempty"`
	Chunk     *struct {
		ModelID       string `json:"model_id"`
		Provider      string `json:"provider_id"`
		ModelName     string `json:"model_name"`
		Cached        bool   `json:"cached"`
		ModelResponse struct {
			Metadata *map[string]any `json:"metadata,omitempty"`
			Message  struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
		} `json:"model_response"`
		FinishReason *string `json:"finish_reason,omitempty"`
	} `json:"chunk,omitempty"`
	Error *struct {
		Name         string  `json:"name"`
		Message      string  `json:"message"`
		FinishReason *string `json:"finish_reason,omitempty"`
	} `json:"error,omitempty"`
}

// checkGlideSchema decodes a frame strictly as Glide's own type: no field
// Glide does not have, exactly one of chunk and error, known finish
// reasons, and the trailing newline of Glide's WriteJSON.
func checkGlideSchema(t *testing.T, p []byte) {
	t.Helper()
	var m glideMessage
	if err := json.Unmarshal(p, &m, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("frame is not a Glide ChatStreamMessage: %v\n%s", err, p)
	}
	if (m.Chunk == nil) == (m.Error == nil) {
		t.Fatalf("frame must carry exactly one of chunk and error: %s", p)
	}
	if m.Chunk != nil && m.Chunk.FinishReason != nil {
		switch *m.Chunk.FinishReason {
		case "complete", "max_tokens", "content_filtered", "other":
		default:
			t.Fatalf("chunk finish_reason %q", *m.Chunk.FinishReason)
		}
	}
	if m.Error != nil && m.Error.FinishReason != nil && *m.Error.FinishReason != "error" {
		t.Fatalf("error finish_reason %q", *m.Error.FinishReason)
	}
	if !bytes.HasSuffix(p, []byte("}\n")) {
		t.Fatalf("frame does not end with WriteJSON's newline: %q", p)
	}
}

// recvClose reads until the server's close frame.
func (c *client) recvClose() *websocket.CloseError {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(timeout))
	for {
		_, p, err := c.ws.ReadMessage()
		if err == nil {
			c.tr.WriteString("< ")
			c.tr.Write(p)
			checkGlideSchema(c.t, p)
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			c.t.Fatalf("read: %v, want a close frame", err)
		}
		fmt.Fprintf(c.tr, "x close %d %q\n", ce.Code, ce.Text)
		return ce
	}
}

// push pushes what build appends to run and receives the one frame it
// produces.
func (c *client) push(run *fakeRun, build func(b *canonical.Builder, out []*canonical.Event) []*canonical.Event) {
	c.t.Helper()
	run.send(build)
	c.recv()
}

func (c *client) text(run *fakeRun, s string) {
	c.t.Helper()
	run.text(s)
	c.recv()
}

func (c *client) complete(run *fakeRun) {
	c.t.Helper()
	run.complete()
	c.recv()
}

func TestTranscriptOneRequest(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	var tr bytes.Buffer
	c := ts.dial(t, "lock", nil, &tr)
	c.send(`{"id":"req-1","message":{"role":"user","content":"tell me a dad joke"},"message_history":[{"role":"system","content":"You are funny."}],"metadata":{"user_id":42,"anything":"goes"}}`)
	r := ts.run.await(1)["req-1"]
	if got := canonical.PromptText(r.req); got != "tell me a dad joke" {
		t.Fatalf("prompt %q", got)
	}
	c.text(r, "Why")
	c.text(r, " did the \"scarecrow\" <win>?\n🌾")
	c.complete(r)
	golden(t, "testdata/frontend/one_request.golden", tr.Bytes())
}

func TestTranscriptThreeInterleaved(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	var tr bytes.Buffer
	c := ts.dial(t, "lock", nil, &tr)
	c.send(`{"id":"a","message":{"role":"user","content":"one"},"metadata":{"n":1}}`)
	c.send(`{"id":"b","message":{"role":"user","content":"two"},"metadata":{"n":2}}`)
	c.send(`{"id":"c","message":{"role":"user","content":"three"}}`)
	runs := ts.run.await(3)
	a, b, cc := runs["a"], runs["b"], runs["c"]
	c.text(b, "B1")
	c.text(a, "A1")
	c.text(cc, "C1")
	c.text(a, "A2")
	c.complete(cc)
	c.text(b, "B2")
	c.complete(a)
	c.complete(b)
	golden(t, "testdata/frontend/three_interleaved.golden", tr.Bytes())
}

func TestTranscriptFallback(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	var tr bytes.Buffer
	c := ts.dial(t, "lock", nil, &tr)
	c.send(`{"id":"req-1","message":{"role":"user","content":"joke"}}`)
	r := ts.run.await(1)["req-1"]
	c.push(r, func(b *canonical.Builder, out []*canonical.Event) []*canonical.Event {
		out = b.Lifecycle(out, canonical.StatusRunning)
		out = startModel(out, b, "openai-gpt", "openai", "gpt-3.5-turbo-0125")
		return b.Text(out, "Bill")
	})
	c.text(r, " Ga")
	c.push(r, func(b *canonical.Builder, out []*canonical.Event) []*canonical.Event {
		out = b.FinishMessage(out, canonical.FinishError, nil)
		return b.Emit(out, &canonical.Event{Kind: &canonical.KindError{Error: &canonical.ErrorProto{Code: uint32(canonical.CodeUnavailable), Message: "provider is not available"}}})
	})
	c.push(r, func(b *canonical.Builder, out []*canonical.Event) []*canonical.Event {
		out = startModel(out, b, "cohere", "cohere", "command-light")
		return b.Text(out, "Bill Gates entered the bar")
	})
	c.complete(r)
	golden(t, "testdata/frontend/fallback.golden", tr.Bytes())
}

func TestTranscriptUnknownRouter(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	var tr bytes.Buffer
	record := func(resp *http.Response) {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&tr, "x HTTP %d Content-Type=%q Upgrade=%q\n%s\n", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Upgrade"), body)
	}
	for _, router := range []string{"nope", "lock"} {
		fmt.Fprintf(&tr, "x GET /v1/language/%s/chatStream without upgrade\n", router)
		resp, err := http.Get(ts.srv.URL + "/v1/language/" + router + "/chatStream")
		if err != nil {
			t.Fatal(err)
		}
		record(resp)
	}
	tr.WriteString("x WebSocket upgrade to /v1/language/nope/chatStream\n")
	_, resp, err := websocket.DefaultDialer.Dial(ts.url("nope"), nil)
	if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
		t.Fatalf("dial unknown router: %v", err)
	}
	record(resp)
	golden(t, "testdata/frontend/unknown_router.golden", tr.Bytes())
}

// malformedThenGood is one connection: bad frames each get an error reply
// and the connection still serves the good request after them.
func malformedThenGood(t *testing.T, ts *testServer, d *websocket.Dialer) []byte {
	var tr bytes.Buffer
	c := ts.dial(t, "echo", d, &tr)
	for _, bad := range []string{
		`{"id":"r1","message":`,
		`{"id":"r2"}`,
		`{"id":"r3","message":{"role":"user","content":42},"metadata":{"k":"v"}}`,
		`[1,2]`,
		`{"message":{"role":"user","content":"no id"}}`,
		`{"id":"r5","message":{"role":"user","content":"x"},"override_params":{"m":{"message":{"content":null}}}}`,
	} {
		c.send(bad)
		c.recv()
	}
	c.send(`{"id":"r6","message":{"role":"user","content":"still here"},"metadata":{"k":"v"}}`)
	for i := 0; i < 3; i++ {
		c.recv()
	}
	return tr.Bytes()
}

func TestTranscriptMalformedThenGood(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	golden(t, "testdata/frontend/malformed_then_good.golden", malformedThenGood(t, ts, nil))
}

// TestFragmentedFrames is the re-chunking property on this wire: request
// frames cut into WebSocket continuation frames give the same transcript.
func TestFragmentedFrames(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	for _, size := range []int{1, 7, 64} {
		d := &websocket.Dialer{WriteBufferSize: size}
		got := malformedThenGood(t, ts, d)
		want, err := readFile("testdata/frontend/malformed_then_good.golden")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("write buffer %d: transcript differs:\n%s", size, got)
		}
	}
}

func TestTranscriptDisconnectCancelsRuns(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ts := newTestServer(t, FrontendConfig{})
	var tr bytes.Buffer
	c := ts.dial(t, "lock", nil, &tr)
	c.send(`{"id":"r1","message":{"role":"user","content":"one"}}`)
	c.send(`{"id":"r2","message":{"role":"user","content":"two"}}`)
	runs := ts.run.await(2)
	c.text(runs["r1"], "partial")
	c.text(runs["r2"], "partial")
	tr.WriteString("x client drops the TCP connection\n")
	_ = c.ws.NetConn().Close()
	for _, r := range runs {
		if err := r.cancelled(); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		ts.f.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatal("connection handler still running after the client left")
	}
	golden(t, "testdata/frontend/disconnect_cancels_runs.golden", tr.Bytes())
	ts.f.Close()
	ts.srv.Close()
}

func TestTranscriptCancel(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	var tr bytes.Buffer
	c := ts.dial(t, "lock", nil, &tr)
	c.send(`{"id":"r1","message":{"role":"user","content":"long story"},"metadata":{"k":"v"}}`)
	r1 := ts.run.await(1)["r1"]
	c.text(r1, "Once upon")
	c.send(`{"id":"r1","cancel":true}`)
	c.recv() // the cancelled run's terminal error
	if err := r1.cancelled(); err != nil {
		t.Fatal(err)
	}
	c.send(`{"id":"nope","cancel":true}`) // not in flight: ignored
	c.send(`{"id":"r2","message":{"role":"user","content":"next"}}`)
	r2 := ts.run.await(1)["r2"]
	c.text(r2, "next") // the first frame after the ignored cancel is r2's
	c.complete(r2)
	golden(t, "testdata/frontend/cancel.golden", tr.Bytes())
}

func TestTranscriptDuplicateID(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	var tr bytes.Buffer
	c := ts.dial(t, "lock", nil, &tr)
	c.send(`{"id":"r1","message":{"role":"user","content":"first"}}`)
	r1 := ts.run.await(1)["r1"]
	c.text(r1, "first")
	c.send(`{"id":"r1","message":{"role":"user","content":"second"}}`)
	c.recv() // refused
	c.complete(r1)
	c.send(`{"id":"r1","message":{"role":"user","content":"third"}}`) // no longer in flight
	r1 = ts.run.await(1)["r1"]
	c.complete(r1)
	golden(t, "testdata/frontend/duplicate_id.golden", tr.Bytes())
}

func TestTranscriptLimits(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{MaxInFlight: 1, MaxMessageBytes: 256})
	var tr bytes.Buffer
	c := ts.dial(t, "lock", nil, &tr)
	c.send(`{"id":"r1","message":{"role":"user","content":"one"}}`)
	r1 := ts.run.await(1)["r1"]
	c.send(`{"id":"r2","message":{"role":"user","content":"two"}}`)
	c.recv() // refused: MaxInFlight
	c.complete(r1)
	c.send(`{"id":"r3","message":{"role":"user","content":"` + strings.Repeat("x", 300) + `"}}`)
	if ce := c.recvClose(); ce.Code != websocket.CloseMessageTooBig {
		t.Fatalf("close %d, want 1009", ce.Code)
	}
	c2 := ts.dial(t, "refuse", nil, &tr)
	c2.send(`{"id":"r4","message":{"role":"user","content":"x"}}`)
	c2.recv()
	golden(t, "testdata/frontend/limits.golden", tr.Bytes())
}

// TestSlowConsumer: a client that stops reading is cut off with 1008 and
// its runs are cancelled; nothing grows without bound.
func TestSlowConsumer(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{SendQueue: 4, WriteTimeout: 200 * time.Millisecond})
	var tr bytes.Buffer
	c := ts.dial(t, "lock", nil, &tr)
	c.send(`{"id":"r1","message":{"role":"user","content":"flood"}}`)
	r1 := ts.run.await(1)["r1"]
	big := strings.Repeat("x", 64<<10)
	r1.send(func(b *canonical.Builder, out []*canonical.Event) []*canonical.Event {
		for i := 0; i < 512; i++ { // 32 MiB: more than socket buffers hold
			out = b.Text(out, big)
		}
		return out
	})
	if err := r1.cancelled(); err != nil {
		t.Fatal(err)
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(timeout))
	for {
		_, _, err := c.ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
			t.Fatalf("read: %v, want close 1008", err)
		}
		break
	}
}

func TestShutdownIdleAndBusy(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	var tr bytes.Buffer
	idle := ts.dial(t, "lock", nil, &tr)
	busy := ts.dial(t, "lock", nil, &tr)
	busy.send(`{"id":"r1","message":{"role":"user","content":"busy"}}`)
	r1 := ts.run.await(1)["r1"]
	busy.text(r1, "working")
	tr.WriteString("x Shutdown\n")
	ts.f.Shutdown()
	idle.recvClose()
	busy.send(`{"id":"r2","message":{"role":"user","content":"more"}}`)
	busy.recv() // refused: shutting down
	busy.text(r1, " still")
	busy.complete(r1)
	busy.recvClose()
	tr.WriteString("x WebSocket upgrade after Shutdown\n")
	_, resp, err := websocket.DefaultDialer.Dial(ts.url("lock"), nil)
	if err == nil || resp == nil {
		t.Fatalf("dial after shutdown: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Fprintf(&tr, "x HTTP %d %s\n", resp.StatusCode, body)
	golden(t, "testdata/frontend/shutdown.golden", tr.Bytes())
}
