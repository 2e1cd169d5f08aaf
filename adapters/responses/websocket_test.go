package responses_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// socket is a client of WebSocket mode (GET /v1/responses, upgraded).
type socket struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialSocket(t *testing.T, base, key string) *socket {
	t.Helper()
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/v1/responses", h)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (HTTP %d)", err, status)
	}
	t.Cleanup(func() { ws.Close() })
	return &socket{t: t, ws: ws}
}

func (s *socket) send(msg string) {
	s.t.Helper()
	if err := s.ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		s.t.Fatal(err)
	}
}

// next is the next message, within 10 s.
func (s *socket) next() []byte {
	s.t.Helper()
	_ = s.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, data, err := s.ws.ReadMessage()
	if err != nil || typ != websocket.TextMessage {
		s.t.Fatalf("read: type %d, %v", typ, err)
	}
	return data
}

// response reads a response's messages to its terminal event.
func (s *socket) response() [][]byte {
	s.t.Helper()
	var out [][]byte
	for {
		m := s.next()
		out = append(out, m)
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(m, &ev); err != nil {
			s.t.Fatalf("%s: %v", m, err)
		}
		switch ev.Type {
		case "response.completed", "response.failed", "response.incomplete", "error":
			return out
		}
	}
}

// terminal is a response's last message's response id and status.
func terminal(t *testing.T, msgs [][]byte) (id, status string) {
	t.Helper()
	var ev struct {
		Response struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"response"`
	}
	if err := json.Unmarshal(msgs[len(msgs)-1], &ev); err != nil {
		t.Fatal(err)
	}
	return ev.Response.ID, ev.Response.Status
}

// TestWebSocketStreamIsTheSSEStream: over a WebSocket, a response.create
// is answered with the events POST /v1/responses streams for the same
// body, one message each, byte for byte as the SSE stream's data (the
// golden of TestE2EEcho), with no [DONE].
func TestWebSocketStreamIsTheSSEStream(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	s := dialSocket(t, inst.URL, "")
	s.send(`{"type":"response.create","model":"echo","input":[{"role":"user","content":[{"type":"input_text","text":"stream it"}]}]}`)
	got := bytes.Join(s.response(), []byte("\n"))
	sse, err := os.ReadFile(filepath.Join("testdata", "e2e", "echo_stream.sse"))
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for _, line := range bytes.Split(sse, []byte("\n")) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && string(data) != "[DONE]" {
			want = append(want, data)
		}
	}
	if w, g := string(bytes.Join(want, []byte("\n"))), string(normalize(got)); w != g {
		t.Fatalf("socket messages differ from the SSE stream's data:\nwant %s\ngot  %s", w, g)
	}
}

// TestWebSocketContinuesItsLastResponse: a socket continues the response
// it answered last by previous_response_id with store false (its input
// and output reach the backend before the new input), and a warm-up
// (generate false) runs nothing and is continued the same way; another
// socket cannot continue a response that was not stored, and another API
// key cannot continue one that was.
func TestWebSocketContinuesItsLastResponse(t *testing.T) {
	p := startPeer(t)
	cfg := peerConfig(t, p)
	cfg.Auth.Keys = aliceAndBob()
	inst := bridgetest.Start(t, &cfg)
	s := dialSocket(t, inst.URL, "key-a")

	s.send(`{"type":"response.create","model":"gpt-test","store":false,"input":"first"}`)
	first, status := terminal(t, s.response())
	if status != "completed" {
		t.Fatalf("first response %s", status)
	}
	s.send(`{"type":"response.create","model":"gpt-test","store":false,"previous_response_id":"` + first + `","input":"second"}`)
	if _, status := terminal(t, s.response()); status != "completed" {
		t.Fatalf("continued response %s", status)
	}
	reqs := p.requests()
	jsonEqual(t, "the continued response's input upstream", []byte(`[
		{"type":"message","role":"user","content":[{"type":"input_text","text":"first"}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"echo: first"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"second"}]}]`), upstreamInput(t, reqs[len(reqs)-1]))

	s.send(`{"type":"response.create","model":"gpt-test","store":false,"generate":false,"input":"warm"}`)
	msgs := s.response()
	warm, status := terminal(t, msgs)
	if len(msgs) != 3 || status != "completed" || len(p.requests()) != len(reqs) {
		t.Fatalf("warm-up: %d messages, %s, %d upstream requests (was %d)", len(msgs), status, len(p.requests()), len(reqs))
	}
	s.send(`{"type":"response.create","model":"gpt-test","store":false,"previous_response_id":"` + warm + `","input":"after"}`)
	if _, status := terminal(t, s.response()); status != "completed" {
		t.Fatalf("response after the warm-up %s", status)
	}
	jsonEqual(t, "the warmed-up response's input upstream", []byte(`[
		{"type":"message","role":"user","content":[{"type":"input_text","text":"warm"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"after"}]}]`), upstreamInput(t, p.requests()[len(reqs)]))

	other := dialSocket(t, inst.URL, "key-a")
	other.send(`{"type":"response.create","model":"gpt-test","previous_response_id":"` + first + `","input":"x"}`)
	jsonEqual(t, "another socket continuing a response not stored", []byte(`{"type":"error","status":400,"error":{
		"message":"Previous response with id '`+first+`' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`), other.next())

	s.send(`{"type":"response.create","model":"gpt-test","input":"stored"}`)
	stored, _ := terminal(t, s.response())
	bob := dialSocket(t, inst.URL, "key-b")
	bob.send(`{"type":"response.create","model":"gpt-test","previous_response_id":"` + stored + `","input":"x"}`)
	jsonEqual(t, "another key continuing a stored response", []byte(`{"type":"error","status":400,"error":{
		"message":"Previous response with id '`+stored+`' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`), bob.next())
}

// upstreamInput is the input of a request the peer got, each message's
// content without the members the test does not set.
func upstreamInput(t *testing.T, body []byte) []byte {
	t.Helper()
	var req struct {
		Input []struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(req.Input)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWebSocketRefusals: a request refused before its response begins is
// an error message with the status HTTP would answer (as OpenAI's
// WebSocket mode sends it), and the socket goes on: the next
// response.create is answered. Codex's response.processed is answered
// with nothing. Without a key the upgrade is refused 401.
func TestWebSocketRefusals(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = aliceAndBob()
	inst := bridgetest.Start(t, &cfg)
	s := dialSocket(t, inst.URL, "key-a")
	for _, c := range []struct{ msg, want string }{
		{`{"type":"response.create","model":"nope","input":"x"}`,
			`{"type":"error","status":404,"error":{"message":"The model ` + "`nope`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
		{`{"type":"response.create","model":"echo","input":"x","background":true}`,
			`{"type":"error","status":400,"error":{"message":"Unsupported parameter: 'background' is not supported over a WebSocket.","type":"invalid_request_error","param":"background","code":"unsupported_parameter"}}`},
		{`{"type":"response.create","input":"x"}`,
			`{"type":"error","status":400,"error":{"message":"Missing required parameter: 'model'.","type":"invalid_request_error","param":"model","code":null}}`},
		{`{"type":"session.update"}`,
			`{"type":"error","status":400,"error":{"message":"Invalid value: 'session.update'. Supported values are: 'response.create'.","type":"invalid_request_error","param":"type","code":null}}`},
		{`{"type":`,
			`{"type":"error","status":400,"error":{"message":"We could not parse the JSON of your message: unexpected EOF within \"/type\" after offset 8","type":"invalid_request_error","param":null,"code":null}}`},
	} {
		s.send(c.msg)
		jsonEqual(t, c.msg, []byte(c.want), s.next())
	}
	s.send(`{"type":"response.processed","response_id":"resp_x"}`)
	s.send(`{"type":"response.create","model":"echo","input":"still here"}`)
	msgs := s.response()
	if _, status := terminal(t, msgs); status != "completed" || !bytes.Contains(msgs[0], []byte(`"type":"response.created"`)) {
		t.Fatalf("after the refusals: first %s, last %s", msgs[0], msgs[len(msgs)-1])
	}
	_, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(inst.URL, "http")+"/v1/responses", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("upgrade without a key: %v, %v", resp, err)
	}
}

// TestWebSocketClientLeaves: a client that closes its socket while its
// response waits for the backend cancels the run at once, and the stored
// response is recorded cancelled, as when an HTTP client leaves.
func TestWebSocketClientLeaves(t *testing.T) {
	p := startPeer(t)
	cfg := peerConfig(t, p)
	inst := bridgetest.Start(t, &cfg)
	s := dialSocket(t, inst.URL, "")
	s.send(`{"type":"response.create","model":"slow","input":"think"}`)
	var created struct {
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if err := json.Unmarshal(s.next(), &created); err != nil || created.Response.ID == "" {
		t.Fatalf("response.created: %v", err)
	}
	s.ws.Close()
	c := client{t: t, base: inst.URL}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := c.do("GET", "/v1/responses/"+created.Response.ID, "")
		if bytes.Contains(body, []byte(`"status":"cancelled"`)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the client left, the response is %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
