package bridge_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// A chunked body that stops arriving is answered within body_timeout, in
// the path's protocol's error form, on every JSON-body path; a request
// whose body came in time streams its response for longer than the
// timeout, unharmed. Headers that say the body is a stream (a WebSocket
// upgrade, gRPC's content type) do not lift the timeout on a path that
// serves no such stream.
func TestBodyTimeout(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.BodyTimeout = 300 * time.Millisecond
	inst := bridgetest.Start(t, &cfg)
	addr := strings.TrimPrefix(inst.URL, "http://")
	const jsonBody = "Content-Type: application/json\r\n"
	for _, tc := range []struct{ path, header, first, bodyHas string }{
		{"/v1/runs", jsonBody, `{"target":"echo",`, "body_timeout"},
		{"/v2/models/echo/generate", jsonBody, `{"text_input":`, "body_timeout"},
		{"/v1/xml/stream", jsonBody, `{"target":"echo",`, "body_timeout"},
		{"/threads/slow/commands", jsonBody, `{"id":1,`, "body_timeout"},
		{"/v1/chat/completions", "Content-Type: application/grpc\r\n", `{"model":"echo",`, "body_timeout"},
		{"/v1/messages", "Content-Type: application/connect+json\r\n", `{"model":"echo",`, "body_timeout"},
		{"/v1/responses", jsonBody + "Connection: Upgrade\r\nUpgrade: websocket\r\n", `{"model":"echo",`, "body_timeout"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			_, err = io.WriteString(conn, "POST "+tc.path+" HTTP/1.1\r\nHost: "+addr+"\r\n"+tc.header+
				"Transfer-Encoding: chunked\r\n\r\n"+strconv.FormatInt(int64(len(tc.first)), 16)+"\r\n"+tc.first+"\r\n")
			if err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no response to a stalled body: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			took := time.Since(start)
			if resp.StatusCode < 400 || resp.StatusCode >= 500 || !strings.Contains(string(body), tc.bodyHas) {
				t.Fatalf("got %d %s, want a 4xx naming %s", resp.StatusCode, body, tc.bodyHas)
			}
			if took < cfg.BodyTimeout || took > 3*time.Second {
				t.Fatalf("answered after %v, want about %v", took, cfg.BodyTimeout)
			}
		})
	}
	// A body sent at once: the stream outlives the timeout.
	evs, code := bridgetest.PostRun(t, inst.URL, `{"target":"stream","parameters":{"deltas":8,"delay_ms":100},"inputs":[]}`)
	if code != 200 || len(evs) == 0 || evs[len(evs)-1].GetLifecycle().GetStatus().String() != "RUN_STATUS_COMPLETED" {
		t.Fatalf("a slow response after a prompt body: status %d, %d events", code, len(evs))
	}
}
