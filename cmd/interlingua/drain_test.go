package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
)

// shuttingDown is the message every hanging run ends with when the
// server shuts down (issue 32 #9), in its protocol's form, not "context
// canceled": its client did not cancel the run, and may run it elsewhere.
const shuttingDown = "the server is shutting down"

// drainOpener starts a hanging stream on one frontend and waits for its
// first output; the function it returns reads the stream to its end after
// SIGTERM and checks that it ends its protocol's way.
type drainOpener func(t *testing.T, ctx context.Context, addr string) (ended func(t *testing.T))

// SIGTERM with a live, hanging stream on each frontend: once the shutdown
// timeout passes, each stream ends its protocol's way, and the process
// exits 0.
func TestSIGTERMDrainsEveryFrontend(t *testing.T) {
	bin := buildBinary(t)
	addr := freeAddr(t)
	// Requests that carry no parameters (Glide's, OpenAI's, ...) get the
	// fault from a route.
	cfgFile := filepath.Join(t.TempDir(), "drain.yaml")
	if err := os.WriteFile(cfgFile, []byte(`backends: {scripted: {type: scripted}}
routes:
  - {target: echo, backend: scripted}
  - {target: hanging, backend: scripted, model: echo, parameters: {hang: true}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := startProcess(t, bin, "serve", "--config", cfgFile, "--listen", addr, "--data-dir", t.TempDir(), "--shutdown-timeout", "500ms")
	waitReady(t, "http://"+addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	frontends := []struct {
		name string
		open drainOpener
	}{
		{"native", drainNative}, {"triton", drainTriton}, {"evergreen", drainEvergreen}, {"glide", drainGlide},
		{"openai", drainOpenAI}, {"anthropic", drainAnthropic}, {"responses", drainResponses}, {"xml", drainXML},
		{"agent", drainAgent},
	}
	ends := make([]func(t *testing.T), len(frontends))
	for i, f := range frontends {
		ends[i] = f.open(t, ctx, addr) // every stream is live
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i, f := range frontends {
		t.Run(f.name, ends[i])
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// drainNative: the last event is the run's failed lifecycle event.
func drainNative(t *testing.T, _ context.Context, addr string) func(*testing.T) {
	native := openStream(t, "POST", "http://"+addr+"/v1/runs", `{"target":"echo","parameters":{"hang":true},"inputs":[]}`)
	native.next()
	return func(t *testing.T) {
		evs := native.untilTerminal()
		if lc := evs[len(evs)-1].GetLifecycle(); lc.GetStatus().String() != "RUN_STATUS_FAILED" || lc.GetError().GetMessage() != shuttingDown {
			t.Errorf("native ended %v", lc)
		}
	}
}

// drainTriton: after the first response, the error comes in band, then
// the body ends.
func drainTriton(t *testing.T, _ context.Context, addr string) func(*testing.T) {
	resp, err := client.Post("http://"+addr+"/v2/models/echo/generate_stream", "application/json",
		strings.NewReader(`{"text_input":"a b","stream":true,"hang":true}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "data: {") {
		t.Fatalf("triton first line %q", sc.Text())
	}
	return func(t *testing.T) {
		var last string
		for sc.Scan() {
			if sc.Text() != "" {
				last = sc.Text()
			}
		}
		if last != `data: {"error":"`+shuttingDown+`"}` {
			t.Errorf("triton's last event %q, want the in-band error %q", last, shuttingDown)
		}
	}
}

// drainEvergreen (gRPC over h2c): the stream ends with a non-OK status.
func drainEvergreen(t *testing.T, ctx context.Context, addr string) func(*testing.T) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
	t.Cleanup(hc.CloseIdleConnections)
	es := evergreenv2connect.NewEvergreenServiceClient(hc, "http://"+addr, connect.WithGRPC()).StartSession(ctx)
	params, _ := structpb.NewStruct(map[string]any{"hang": true})
	cfg, _ := anypb.New(params)
	if err := es.Send(&ev.SessionMessage{
		NodeFragments: []*ev.NodeFragment{{Id: "p", ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain", Role: "user"}, Payload: &ev.Chunk_Data{Data: []byte("hi")}}}},
		Actions: []*ev.Action{{Name: "GENERATE", TargetSpec: &ev.TargetSpec{Id: "echo"}, Configs: []*anypb.Any{cfg},
			Inputs: []*ev.NamedParameter{{Name: "prompt", Id: "p"}}, Outputs: []*ev.NamedParameter{{Name: "response", Id: "r"}}}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := es.Receive(); err != nil {
		t.Fatalf("evergreen first message: %v", err)
	}
	return func(t *testing.T) {
		var err error
		for err == nil {
			_, err = es.Receive()
		}
		if errors.Is(err, io.EOF) {
			err = es.CloseResponse()
		}
		if code := connect.CodeOf(err); code != connect.CodeUnavailable || !strings.Contains(err.Error(), shuttingDown) {
			t.Errorf("evergreen ended with %v, want unavailable: %s", err, shuttingDown)
		}
	}
}

// drainGlide (WebSocket): an error reply for the request, then close 1001.
func drainGlide(t *testing.T, ctx context.Context, addr string) func(*testing.T) {
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+addr+"/v1/language/hanging/chatStream", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"id":"g1","message":{"role":"user","content":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, m, err := ws.ReadMessage(); err != nil || !strings.Contains(string(m), `"chunk"`) {
		t.Fatalf("glide first frame %s %v", m, err)
	}
	return func(t *testing.T) {
		var sawError bool
		for {
			_, m, err := ws.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
					t.Errorf("glide closed with %v, want 1001", err)
				}
				break
			}
			if strings.Contains(string(m), `"error"`) {
				sawError = true
				if !strings.Contains(string(m), shuttingDown) {
					t.Errorf("glide error reply %s does not say %q", m, shuttingDown)
				}
			}
		}
		if !sawError {
			t.Error("glide sent no error reply before closing")
		}
	}
}

// drainOpenAI: the error object as the last data: line, with no finish
// reason before it (reference openai-chat 10.1).
func drainOpenAI(t *testing.T, ctx context.Context, addr string) func(*testing.T) {
	sse := openSSE(t, ctx, "http://"+addr+"/v1/chat/completions", nil,
		`{"model":"hanging","stream":true,"messages":[{"role":"user","content":"a b"}]}`).first(t)
	return func(t *testing.T) {
		evs := sse.rest(t)
		last := evs[len(evs)-1]
		assertJSON(t, last.data, `{"error":{"message":"`+shuttingDown+`","type":"server_error","param":null,"code":"unavailable"}}`)
		for _, e := range evs {
			if strings.Contains(e.data, `"finish_reason":"`) {
				t.Errorf("a finish reason before the error: %s", e.data)
			}
		}
	}
}

// drainAnthropic: an event: error with overloaded_error (unavailable).
func drainAnthropic(t *testing.T, ctx context.Context, addr string) func(*testing.T) {
	sse := openSSE(t, ctx, "http://"+addr+"/v1/messages", map[string]string{"anthropic-version": "2023-06-01"},
		`{"model":"hanging","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"a b"}]}`).first(t)
	return func(t *testing.T) {
		evs := sse.rest(t)
		last := evs[len(evs)-1]
		if last.event != "error" {
			t.Errorf("last event %q, want error", last.event)
		}
		assertJSON(t, last.data, `{"type":"error","error":{"type":"overloaded_error","message":"`+shuttingDown+`"}}`)
	}
}

// drainResponses: an error event, then response.failed carrying the
// error, then [DONE].
func drainResponses(t *testing.T, ctx context.Context, addr string) func(*testing.T) {
	sse := openSSE(t, ctx, "http://"+addr+"/v1/responses", nil, `{"model":"hanging","stream":true,"input":"a b"}`).first(t)
	return func(t *testing.T) {
		evs := sse.rest(t)
		if n := len(evs); n < 3 || evs[n-1].data != "[DONE]" || evs[n-3].event != "error" || evs[n-2].event != "response.failed" {
			t.Fatalf("events end %+v, want error, response.failed, [DONE]", evs[max(len(evs)-3, 0):])
		}
		var failed struct {
			Response struct {
				Status string          `json:"status"`
				Error  json.RawMessage `json:"error"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(evs[len(evs)-2].data), &failed); err != nil || failed.Response.Status != "failed" {
			t.Fatalf("response.failed %s: %v", evs[len(evs)-2].data, err)
		}
		assertJSON(t, string(failed.Response.Error), `{"code":"unavailable","message":"`+shuttingDown+`"}`)
	}
}

// drainXML: an <error> element with the failed status.
func drainXML(t *testing.T, ctx context.Context, addr string) func(*testing.T) {
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/xml/stream", strings.NewReader(`{"target":"hanging","input":"a b"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	first := make([]byte, len("<response>"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "<response>" {
		t.Fatalf("xml first bytes %q, %v", first, err)
	}
	return func(t *testing.T) {
		rest, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if want := `<error code="unavailable" status="failed">` + shuttingDown + `</error>`; !strings.HasSuffix(strings.TrimSpace(string(rest)), want) {
			t.Errorf("xml stream ended %q, want %s", rest, want)
		}
	}
}

// drainAgent: the thread's stream goes on until the run has ended, with
// its failed lifecycle event the last, then ends.
func drainAgent(t *testing.T, ctx context.Context, addr string) func(*testing.T) {
	base := "http://" + addr + "/threads/t-drain"
	sse := openSSE(t, ctx, base+"/stream", nil, `{"channels":["lifecycle","messages"]}`)
	resp, err := client.Post(base+"/commands", "application/json", strings.NewReader(
		`{"id":1,"method":"run.start","params":{"assistant_id":"hanging","input":{"messages":[{"role":"user","content":"a b"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"type":"success"`) {
		t.Fatalf("run.start: %s", body)
	}
	for e, ok := sse.next(); !strings.Contains(e.data, `"content-block-delta"`); e, ok = sse.next() {
		if !ok {
			t.Fatal("the agent stream ended before the run's first delta")
		}
	}
	return func(t *testing.T) {
		evs := sse.rest(t)
		last := evs[len(evs)-1]
		if last.event != "lifecycle" || !strings.Contains(last.data, `"event":"failed"`) || !strings.Contains(last.data, shuttingDown) {
			t.Errorf("the agent stream's last event %s %s, want the run's failed lifecycle saying %q", last.event, last.data, shuttingDown)
		}
	}
}

// sseEvent is one server-sent event: its event: and data: lines.
type sseEvent struct{ event, data string }

// sseReader reads a POSTed SSE response.
type sseReader struct{ sc *bufio.Scanner }

// openSSE POSTs body to url; it fails unless the answer is 200.
func openSSE(t *testing.T, ctx context.Context, url string, headers map[string]string, body string) *sseReader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s %s", url, resp.Status, b)
	}
	return &sseReader{sc: bufio.NewScanner(resp.Body)}
}

// first waits for the first event.
func (r *sseReader) first(t *testing.T) *sseReader {
	t.Helper()
	if _, ok := r.next(); !ok {
		t.Fatal("the stream ended before its first event")
	}
	return r
}

// next reads the next event; false at the end of the body.
func (r *sseReader) next() (sseEvent, bool) {
	var e sseEvent
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" && e != (sseEvent{}) {
			return e, true
		}
		if strings.HasPrefix(line, ":") { // a comment: an event of its own here
			return sseEvent{event: ":"}, true
		}
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			e.event = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			e.data = v
		}
	}
	return e, e != (sseEvent{})
}

// rest reads the events left, at least one.
func (r *sseReader) rest(t *testing.T) []sseEvent {
	t.Helper()
	var evs []sseEvent
	for e, ok := r.next(); ok; e, ok = r.next() {
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		t.Fatal("the stream ended with no event after the first")
	}
	return evs
}

// assertJSON fails unless got and want are the same JSON value.
func assertJSON(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// startProcess starts a daemon; cleanup kills it if a test left it running.
func startProcess(t *testing.T, bin string, args ...string) *execCmd {
	t.Helper()
	c := newCmd(bin, args...)
	log := &syncBuffer{}
	c.Stderr = log
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("daemon log:\n%s", log)
		}
	})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	return c
}
