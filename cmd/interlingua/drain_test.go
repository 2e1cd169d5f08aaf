package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

// SIGTERM with a live, hanging stream on each frontend: once the shutdown
// timeout passes, each stream ends its protocol's way, and the process
// exits 0.
func TestSIGTERMDrainsEveryFrontend(t *testing.T) {
	bin := buildBinary(t)
	addr := freeAddr(t)
	// Glide requests carry no parameters: a route supplies the fault.
	cfgFile := filepath.Join(t.TempDir(), "drain.yaml")
	if err := os.WriteFile(cfgFile, []byte(`backends: {scripted: {type: scripted}}
routes:
  - {target: echo, backend: scripted}
  - {target: hanging, backend: scripted, model: echo, parameters: {hang: true}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := startProcess(t, bin, "serve", "--config", cfgFile, "--listen", addr, "--data-dir", t.TempDir(), "--shutdown-timeout", "500ms")
	base := "http://" + addr
	waitReady(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Native NDJSON.
	native := openStream(t, "POST", base+"/v1/runs", `{"target":"echo","parameters":{"hang":true},"inputs":[]}`)
	native.next()

	// Triton SSE: after the first response, the error comes in band.
	tresp, err := client.Post(base+"/v2/models/echo/generate_stream", "application/json",
		strings.NewReader(`{"text_input":"a b","stream":true,"hang":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer tresp.Body.Close()
	tsc := bufio.NewScanner(tresp.Body)

	// Evergreen gRPC over h2c.
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer hc.CloseIdleConnections()
	eg := evergreenv2connect.NewEvergreenServiceClient(hc, base, connect.WithGRPC())
	es := eg.StartSession(ctx)
	params, _ := structpb.NewStruct(map[string]any{"hang": true})
	cfg, _ := anypb.New(params)
	if err := es.Send(&ev.SessionMessage{
		NodeFragments: []*ev.NodeFragment{{Id: "p", ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain", Role: "user"}, Payload: &ev.Chunk_Data{Data: []byte("hi")}}}},
		Actions: []*ev.Action{{Name: "GENERATE", TargetSpec: &ev.TargetSpec{Id: "echo"}, Configs: []*anypb.Any{cfg},
			Inputs: []*ev.NamedParameter{{Name: "prompt", Id: "p"}}, Outputs: []*ev.NamedParameter{{Name: "response", Id: "r"}}}},
	}); err != nil {
		t.Fatal(err)
	}

	// Glide WebSocket.
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+addr+"/v1/language/hanging/chatStream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"id":"g1","message":{"role":"user","content":"x"}}`)); err != nil {
		t.Fatal(err)
	}

	// Every stream is live: wait for the first output of each.
	if !tsc.Scan() || !strings.HasPrefix(tsc.Text(), "data: {") {
		t.Fatalf("triton first line %q", tsc.Text())
	}
	if _, err := es.Receive(); err != nil {
		t.Fatalf("evergreen first message: %v", err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, m, err := ws.ReadMessage(); err != nil || !strings.Contains(string(m), `"chunk"`) {
		t.Fatalf("glide first frame %s %v", m, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// Every client is told the server is shutting down (issue 32 #9), in
	// its protocol's form, not "context canceled": its client did not
	// cancel the run, and may run it elsewhere.
	const shuttingDown = "the server is shutting down"
	// Native: the last event is the run's failed lifecycle event.
	evs := native.untilTerminal()
	if lc := evs[len(evs)-1].GetLifecycle(); lc.GetStatus().String() != "RUN_STATUS_FAILED" || lc.GetError().GetMessage() != shuttingDown {
		t.Errorf("native ended %v", lc)
	}
	// Triton: an in-band error event, then the body ends.
	var last string
	for tsc.Scan() {
		if tsc.Text() != "" {
			last = tsc.Text()
		}
	}
	if last != `data: {"error":"`+shuttingDown+`"}` {
		t.Errorf("triton's last event %q, want the in-band error %q", last, shuttingDown)
	}
	// Evergreen: the stream ends with a non-OK status.
	var eerr error
	for {
		if _, eerr = es.Receive(); eerr != nil {
			break
		}
	}
	if errors.Is(eerr, io.EOF) {
		eerr = es.CloseResponse()
	}
	if code := connect.CodeOf(eerr); code != connect.CodeUnavailable || !strings.Contains(eerr.Error(), shuttingDown) {
		t.Errorf("evergreen ended with %v, want unavailable: %s", eerr, shuttingDown)
	}
	// Glide: an error reply for the request, then close 1001.
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
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
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
