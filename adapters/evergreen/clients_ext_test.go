package evergreen_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/adapters/evergreen"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// TestGRPCGoClient drives a bidi session with grpc-go (no generated grpc
// stubs: a raw stream on the method path, as any gRPC client would).
func TestGRPCGoClient(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	conn, err := grpc.NewClient("passthrough:///"+strings.TrimPrefix(inst.URL, "http://"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	desc := &grpc.StreamDesc{StreamName: "StartSession", ServerStreams: true, ClientStreams: true}
	run := func(msgs ...*ev.SessionMessage) ([]*ev.SessionMessage, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := conn.NewStream(ctx, desc, startSession)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if err := cs.SendMsg(m); err != nil {
				break
			}
		}
		if err := cs.CloseSend(); err != nil {
			return nil, err
		}
		var got []*ev.SessionMessage
		for {
			m := &ev.SessionMessage{}
			err := cs.RecvMsg(m)
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			if err != nil {
				return got, err
			}
			got = append(got, m)
		}
	}
	msgs, err := run(generate("echo", "p1", "response=r1", "text=r2"), frags(textNode("p1", "grpc go says hi", "user")))
	if err != nil {
		t.Fatal(err)
	}
	r := reassemble(t, msgs, true)
	if a, b := r.mustText("r1"), r.mustText("r2"); a != "grpc go says hi" || b != a {
		t.Errorf("outputs %q %q", a, b)
	}
	// Half-close right after the action: the input arrives, the run
	// completes and streams, then the status is OK.
	_, err = run(generate("echo", "p1", "response=r1"))
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("half-close before the input: %v, want FAILED_PRECONDITION", err)
	}
	_, err = run(generate("nope", "p1", "response=r1"))
	if s, _ := status.FromError(err); s.Code() != codes.NotFound || !strings.Contains(s.Message(), `"nope"`) {
		t.Errorf("unknown target: %v", err)
	}
}

// repoRoot is the module root (two levels up from this package).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestBufCurl is the README's example: buf curl runs a GENERATE on echo
// over gRPC (h2c) and prints the streamed fragments.
func TestBufCurl(t *testing.T) {
	root := repoRoot(t)
	buf := filepath.Join(root, "bin", "buf")
	if _, err := os.Stat(buf); err != nil {
		t.Skipf("%s not found (make installs it): %v", buf, err)
	}
	inst := bridgetest.Start(t, nil)
	data := `{"actions":[{"name":"GENERATE","targetSpec":{"id":"echo"},"inputs":[{"name":"prompt","id":"p1"}],"outputs":[{"name":"response","id":"r1"}]}],
 "nodeFragments":[{"id":"p1","chunkFragment":{"metadata":{"mimetype":"text/plain","role":"user"},"data":"` + base64.StdEncoding.EncodeToString([]byte("Hello from buf curl")) + `"}}]}`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, buf, "curl", "--protocol", "grpc", "--http2-prior-knowledge",
		"--schema", ".", "-d", data, inst.URL+startSession)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("buf curl: %v\n%s", err, stderr.String())
	}
	var msgs []*ev.SessionMessage
	dec := json.NewDecoder(&stdout)
	for {
		raw, err := dec.ReadValue()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		m := &ev.SessionMessage{}
		if err := protojson.Unmarshal(raw, m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) != 5 { // Hello, from, buf, curl, final
		t.Errorf("%d messages, want 5", len(msgs))
	}
	if got := reassemble(t, msgs, true).mustText("r1"); got != "Hello from buf curl" {
		t.Errorf("response %q", got)
	}
	// An abort is buf curl's error exit with the status.
	cmd = exec.CommandContext(ctx, buf, "curl", "--protocol", "grpc", "--http2-prior-knowledge", "--schema", ".",
		"-d", `{"actions":[{"name":"GENERATE","targetSpec":{"id":"nope"},"inputs":[{"name":"prompt","id":"p"}],"outputs":[{"name":"response","id":"r"}]}]}`,
		inst.URL+startSession)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not_found") {
		t.Errorf("unknown target: %v\n%s", err, out)
	}
}

// wsDial opens the WebSocket transport as actionengine-ts does: one full
// URL with ?key=, no subprotocol, no custom headers.
func wsDial(t *testing.T, base, query string) *websocket.Conn {
	t.Helper()
	u := "ws" + strings.TrimPrefix(base, "http") + evergreen.WebSocketPath + query
	c, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The frames actionengine-ts sends for a one-chunk text prompt
// (reference section 6.2): the action alone, one fragment per chunk with
// metadata every time, then an empty closing fragment.
var aeFrames = []string{
	`{"actions":[{"targetSpec":{"id":"echo"},"name":"GENERATE","inputs":[{"name":"prompt","id":"7b0e2a4c-1f7e-4f8e-9c39-0c5a3b1c2d11"}],"outputs":[{"name":"response","id":"c3d9f6a2-88b1-4c0e-a3a5-5b2f7e9d1a40"}]}]}`,
	`{"nodeFragments":[{"id":"7b0e2a4c-1f7e-4f8e-9c39-0c5a3b1c2d11","chunkFragment":{"metadata":{"mimetype":"text/plain","role":"user"},"data":"SGVsbG8gZnJvbSA="},"seq":0,"continued":true}]}`,
	`{"nodeFragments":[{"id":"7b0e2a4c-1f7e-4f8e-9c39-0c5a3b1c2d11","chunkFragment":{"metadata":{"mimetype":"text/plain","role":"user"},"data":"dGhlIGJyb3dzZXI="},"seq":1,"continued":true}]}`,
	`{"nodeFragments":[{"id":"7b0e2a4c-1f7e-4f8e-9c39-0c5a3b1c2d11","seq":2,"continued":false}]}`,
}

// readFrames reads JSON frames until node id's final fragment.
func readFrames(t *testing.T, c *websocket.Conn, id string) []*ev.SessionMessage {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var got []*ev.SessionMessage
	for {
		typ, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if typ != websocket.TextMessage {
			t.Fatalf("frame type %d, want text", typ)
		}
		m := &ev.SessionMessage{}
		if err := protojson.Unmarshal(data, m); err != nil {
			t.Fatalf("frame %s: %v", data, err)
		}
		got = append(got, m)
		for _, f := range m.GetNodeFragments() {
			if f.GetId() == id && !f.GetContinued() {
				return got
			}
		}
	}
}

// TestWebSocketActionEngine serves the actionengine-ts client's frames: the
// answer streams as JSON text frames with metadata on every fragment, the
// session outlives the action, and the client's close ends it (echoed).
func TestWebSocketActionEngine(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := wsDial(t, inst.URL, "?key=mykey")
	for i, f := range aeFrames {
		typ := websocket.TextMessage
		if i == 2 {
			typ = websocket.BinaryMessage // a Blob/ArrayBuffer of UTF-8 JSON
		}
		if err := c.WriteMessage(typ, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	out := "c3d9f6a2-88b1-4c0e-a3a5-5b2f7e9d1a40"
	msgs := readFrames(t, c, out)
	for _, m := range msgs {
		for _, f := range m.GetNodeFragments() {
			if f.GetChunkFragment() != nil && f.GetChunkFragment().GetMetadata().GetMimetype() != "text/plain" {
				t.Errorf("fragment seq %d without text/plain metadata (JSON clients read it from every fragment)", f.GetSeq())
			}
		}
	}
	if got := reassemble(t, msgs, false).mustText(out); got != "Hello from the browser" {
		t.Errorf("response %q", got)
	}
	golden(t, "websocket-actionengine.golden", normalize(t, msgs, out))
	// A second action on the same socket (several actions per socket).
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"actions":[{"targetSpec":{"id":"echo"},"name":"GENERATE","inputs":[{"name":"prompt","id":"7b0e2a4c-1f7e-4f8e-9c39-0c5a3b1c2d11"}],"outputs":[{"name":"response","id":"second"}]}]}`)); err != nil {
		t.Fatal(err)
	}
	if got := reassemble(t, readFrames(t, c, "second"), false).mustText("second"); got != "Hello from the browser" {
		t.Errorf("second response %q", got)
	}
	if err := c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after close: %v, want the echoed 1000", err)
	}
}

// TestWebSocketAborts: an abort closes with 4000 + the gRPC code and the
// message as the reason.
func TestWebSocketAborts(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	for _, tc := range []struct {
		frame  string
		code   int
		reason string
	}{
		{`{"actions":[{"name":"GENERATE","targetSpec":{"id":"gpt-9"},"inputs":[{"name":"prompt","id":"p"}],"outputs":[{"name":"response","id":"r"}]}]}`, 4005, `target_spec.id "gpt-9": unknown target`},
		{`{"nodeFragments":[{"id":"a","seq":-1}]}`, 4003, `node "a": seq -1 is negative`},
		{`not json`, 4003, "frame is not a proto3-JSON SessionMessage"},
		{`{"nodeFragments":[{"id":"a","childIds":["a"]}]}`, 4003, `cycle: node "a" lists itself`},
	} {
		c := wsDial(t, inst.URL, "")
		if err := c.WriteMessage(websocket.TextMessage, []byte(tc.frame)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, _, err := c.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != tc.code || !strings.Contains(ce.Text, tc.reason) {
			t.Errorf("frame %s: got %v, want close %d %q", tc.frame, err, tc.code, tc.reason)
		}
	}
}

// TestWebSocketKey: with Keys configured, ?key= must match one.
func TestWebSocketKey(t *testing.T) {
	srv, _ := standalone(t, evergreen.FrontendConfig{Keys: []string{"mykey"}})
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + evergreen.WebSocketPath
	if _, resp, err := websocket.DefaultDialer.Dial(u+"?key=wrong", nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("wrong key: %v %v", err, resp)
	}
	c := wsDial(t, srv.URL, "?key=mykey")
	for _, f := range aeFrames {
		if err := c.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	if got := reassemble(t, readFrames(t, c, "c3d9f6a2-88b1-4c0e-a3a5-5b2f7e9d1a40"), false).mustText("c3d9f6a2-88b1-4c0e-a3a5-5b2f7e9d1a40"); got != "Hello from the browser" {
		t.Errorf("response %q", got)
	}
}

// TestWebSocketSnakeCase: proto3 JSON parsers accept the original field
// names and URL-safe, unpadded base64; unknown fields are ignored.
func TestWebSocketSnakeCase(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := wsDial(t, inst.URL, "")
	for _, f := range []string{
		`{"actions":[{"name":"GENERATE","target_spec":{"id":"echo"},"inputs":[{"name":"prompt","id":"p"}],"outputs":[{"name":"response","id":"r"}],"client_extra":1}]}`,
		`{"node_fragments":[{"id":"p","child_ids":["t"]},{"id":"t","chunk_fragment":{"metadata":{"mimetype":"text/plain","original_file_name":"q.txt"},"data":"c25ha2U_IHllcw"}}]}`,
	} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	if got := reassemble(t, readFrames(t, c, "r"), false).mustText("r"); got != "snake? yes" {
		t.Errorf("response %q", got)
	}
}

// TestWebSocketBurst: a client reading as fast as it can gets a burst of
// far more messages than the connection queues (256 frames) whole: the
// session waits for room, as gRPC's flow control makes it, and cuts off
// only a client that stops reading (audit: 8 of 9 such sessions were
// closed 1008 "send queue full" within milliseconds).
func TestWebSocketBurst(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := wsDial(t, inst.URL, "")
	for _, m := range []*ev.SessionMessage{
		withParams(generate("stream", "p", "response=r"), map[string]any{"deltas": 5000}),
		frags(textNode("p", "go")),
	} {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WriteMessage(websocket.TextMessage, b); err != nil {
			t.Fatal(err)
		}
	}
	if got := reassemble(t, readFrames(t, c, "r"), false).mustText("r"); got != strings.Repeat("tok ", 5000) {
		t.Fatalf("the burst's text: %d bytes, want %d", len(got), 5000*len("tok "))
	}
}
