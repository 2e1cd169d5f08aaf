package glidepeer_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	glidepeer "github.com/interlingua-dev/interlingua/conformance/peers/glide"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestPeerTranscript records the peer's wire behaviour with a plain
// gorilla/websocket client (testdata/peer.golden, byte for byte; the
// peer's clock is fixed): the HTTP answers before the upgrade, a chunk
// stream, the fallback sequence of Glide's router test
// (TestLangRouter_ChatStream's words), all_models_unavailable,
// no_model_configured and a malformed frame.
func TestPeerTranscript(t *testing.T) {
	p := glidepeer.New(glidepeer.Config{
		Now: func() time.Time { return time.Unix(1719245000, 0) },
		Routers: map[string]glidepeer.Router{
			"my-router": {Models: []glidepeer.Model{
				{ID: "openai-gpt", Steps: []glidepeer.Step{{Text: "Bill"}, {Unavailable: "provider is not available"}}},
				{ID: "cohere", Provider: "cohere", Name: "command-light", Role: "model", Steps: []glidepeer.Step{{Echo: true}}},
			}},
			"down": {Models: []glidepeer.Model{
				{ID: "a", Steps: []glidepeer.Step{{Delay: time.Millisecond, Unavailable: "provider is not available"}}},
				{ID: "b", Steps: []glidepeer.Step{{Unavailable: "provider is not available"}}},
			}},
			"empty": {},
		},
	})
	srv := httptest.NewServer(p)
	defer srv.Close()
	defer p.Close()
	base := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/language/"
	var tr bytes.Buffer

	resp, err := http.Get(srv.URL + "/v1/language/my-router/chatStream")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Fprintf(&tr, "x GET without upgrade: HTTP %d %s\n", resp.StatusCode, body)
	_, resp, err = websocket.DefaultDialer.Dial(base+"nope/chatStream", nil)
	if !errors.Is(err, websocket.ErrBadHandshake) {
		t.Fatalf("dial unknown router: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Fprintf(&tr, "x upgrade to an unknown router: HTTP %d %s", resp.StatusCode, body)

	exchange := func(router string, frame string, replies int) {
		ws, _, err := websocket.DefaultDialer.Dial(base+router+"/chatStream", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		fmt.Fprintf(&tr, "x connect %s\n> %s\n", router, frame)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		for i := 0; i < replies; i++ {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			tr.WriteString("< ")
			tr.Write(msg)
		}
	}
	exchange("my-router", `{"id":"req-1","message":{"role":"user","content":"Bill Gates entered the bar"},"metadata":{"user_id":42}}`, 8)
	exchange("down", `{"id":"req-2","message":{"role":"user","content":"x"}}`, 3)
	exchange("empty", `{"id":"req-3","message":{"role":"user","content":"x"}}`, 1)
	exchange("empty", `{"id":"req-4"}`, 1)

	want, err := os.ReadFile("testdata/peer.golden")
	if *update {
		if err := os.WriteFile("testdata/peer.golden", tr.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), tr.String()); d != "" {
		t.Fatal(d)
	}
}
