package glide

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	glidepeer "github.com/interlingua-dev/interlingua/conformance/peers/glide"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// peerRouters is the reference Glide router's script for these tests.
var peerRouters = map[string]glidepeer.Router{
	"my-router": {Models: []glidepeer.Model{{ID: "openai-gpt", Steps: []glidepeer.Step{{Echo: true}}}}},
	"fallback": {Models: []glidepeer.Model{
		{ID: "openai-gpt", Steps: []glidepeer.Step{{Text: "Bill"}, {Text: " Ga"}, {Unavailable: "provider is not available"}}},
		{ID: "cohere", Provider: "cohere", Name: "command-light", Role: "model", Steps: []glidepeer.Step{{Echo: true}}, Finish: "max_tokens"},
	}},
	"exhausted": {Models: []glidepeer.Model{
		{ID: "openai-gpt", Steps: []glidepeer.Step{{Text: "Bill"}, {Unavailable: "provider is not available"}}},
		{ID: "azure", Provider: "azureopenai", Steps: []glidepeer.Step{{Unavailable: "rate limit reached, please wait 1m0s"}}},
	}},
	"empty":    {},
	"override": {Models: []glidepeer.Model{{ID: "openai-gpt", Name: "gpt-4o", Steps: []glidepeer.Step{{Echo: true}}}}},
	"hang":     {Models: []glidepeer.Model{{ID: "m", Steps: []glidepeer.Step{{Text: "first"}, {Wait: "never"}}}}},
	"gated":    {Models: []glidepeer.Model{{ID: "m", Steps: []glidepeer.Step{{Text: "before"}, {Wait: "go"}, {Text: " after"}}}}},
	"stop":     {Models: []glidepeer.Model{{ID: "m", Steps: []glidepeer.Step{{Text: "cut"}, {Stop: true}}}}},
	"flood": {Models: []glidepeer.Model{{ID: "m", Steps: []glidepeer.Step{
		{Text: "1"}, {Text: "2"}, {Text: "3"}, {Text: "4"}, {Text: "5"}, {Text: "6"}, {Text: "7"}, {Text: "8"}}}}},
}

type peerServer struct {
	peer *glidepeer.Peer
	srv  *httptest.Server
}

func startPeer(t *testing.T) *peerServer {
	t.Helper()
	p := glidepeer.New(glidepeer.Config{Routers: peerRouters, Now: fixedNow})
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		p.Close()
		srv.Close()
	})
	return &peerServer{peer: p, srv: srv}
}

func (ps *peerServer) url(router string) string {
	return "ws" + strings.TrimPrefix(ps.srv.URL, "http") + "/v1/language/" + router + "/chatStream"
}

func newTestBackend(t *testing.T, cfg BackendConfig) *Backend {
	t.Helper()
	b, err := NewBackend(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func prompt(text string) *canonical.Request {
	return &canonical.Request{Target: "t", Inputs: []*canonical.NamedNode{{Name: "prompt", Node: &canonical.Node{Children: []*canonical.Node{
		canonical.TextNode("system", "You are funny."), canonical.TextNode("user", text)}}}}}
}

// collect reads a stream to its end and checks the canonical invariants
// over the events read before (head) and these.
func collect(t *testing.T, s canonical.Stream, head ...*canonical.Event) []*canonical.Event {
	t.Helper()
	events, err := canonical.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := canonical.Validate(append(head, events...)); err != nil {
		t.Fatal(err)
	}
	return events
}

// untilText reads up to and including the first text delta.
func untilText(t *testing.T, s canonical.Stream) []*canonical.Event {
	t.Helper()
	var head []*canonical.Event
	for {
		ev, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		head = append(head, ev)
		if ev.GetBlockDelta() != nil {
			return head
		}
	}
}

func eventLines(t *testing.T, events []*canonical.Event) []byte {
	var buf bytes.Buffer
	for _, ev := range events {
		b, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		c := json.Value(b)
		_ = c.Compact() // protojson's spacing is unstable by design
		buf.Write(c)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// TestBackendAgainstPeer runs one request per scripted router and compares
// the request frame the peer received and the canonical events with
// testdata/backend/peer_<router>.golden.
func TestBackendAgainstPeer(t *testing.T) {
	for _, tc := range []struct {
		router string
		req    *canonical.Request
	}{
		{"my-router", prompt("tell me a dad joke")},
		{"fallback", prompt("Bill Gates entered the bar")},
		{"exhausted", prompt("x")},
		{"empty", prompt("x")},
		{"override", func() *canonical.Request {
			r := prompt("ignored")
			r.Extensions = map[string]*structpb.Value{
				extOverrideParams: canonical.Value(map[string]any{
					"gpt-4o":     map[string]any{"message": map[string]any{"role": "user", "content": "by name"}},
					"openai-gpt": map[string]any{"message": map[string]any{"role": "user", "content": "by id wins"}}}),
				extMetadata: canonical.Value(map[string]any{"user_id": 42.0}),
			}
			return r
		}()},
	} {
		t.Run(tc.router, func(t *testing.T) {
			ps := startPeer(t)
			b := newTestBackend(t, BackendConfig{URL: ps.url(tc.router)})
			s, err := b.Start(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			events := collect(t, s)
			var out bytes.Buffer
			for _, f := range ps.peer.Received() {
				out.WriteString("> ")
				out.Write(f)
				out.WriteByte('\n')
			}
			out.Write(eventLines(t, events))
			golden(t, "testdata/backend/peer_"+tc.router+".golden", out.Bytes())
		})
	}
}

// TestBackendMultiplexed: concurrent runs share a pool of one connection
// and each gets its own text.
func TestBackendMultiplexed(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("my-router"), Connections: 1})
	var wg sync.WaitGroup
	for i, text := range []string{"alpha beta", "gamma delta epsilon", "zeta", "eta theta", "iota kappa lambda mu"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := b.Start(context.Background(), prompt(text))
			if err != nil {
				t.Error(err)
				return
			}
			events, err := canonical.Collect(s)
			if err != nil {
				t.Error(err)
				return
			}
			if err := canonical.Validate(events); err != nil {
				t.Error(err)
			}
			var got strings.Builder
			for _, ev := range events {
				got.WriteString(ev.GetBlockDelta().GetText())
			}
			if got.String() != text {
				t.Errorf("run %d: text %q, want %q", i, got.String(), text)
			}
		}()
	}
	wg.Wait()
	if n := ps.peer.Connections(); n != 1 {
		t.Fatalf("%d connections, want 1 shared", n)
	}
}

// TestBackendPool: concurrent runs are spread over the pool's connections
// by load (8 runs in flight on 4 connections: 2 on each), and runs one
// after another reuse one open connection (GEP-8: it stays open between
// requests).
func TestBackendPool(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("gated"), Connections: 4})
	streams, heads := startGated(t, b, 8)
	perConn := map[*upstream]int{}
	for _, s := range streams {
		perConn[s.(*stream).u]++
	}
	if len(perConn) != 4 || ps.peer.Connections() != 4 {
		t.Fatalf("%d connections used, %d dialled; want 4 and 4", len(perConn), ps.peer.Connections())
	}
	for _, n := range perConn {
		if n != 2 {
			t.Fatalf("runs per connection %v, want 2 on each", perConn)
		}
	}
	finishGated(t, ps, streams, heads)

	ps2 := startPeer(t)
	b2 := newTestBackend(t, BackendConfig{URL: ps2.url("my-router"), Connections: 4})
	for range 3 {
		s, err := b2.Start(context.Background(), prompt("one after another"))
		if err != nil {
			t.Fatal(err)
		}
		collect(t, s)
	}
	if n := ps2.peer.Connections(); n != 1 {
		t.Fatalf("%d connections for 3 runs one after another, want 1 kept open", n)
	}
}

// TestBackendPoolReplacesLost: when the upstream drops the pool's
// connections, the runs on them fail and the next runs dial new ones,
// spread as before.
func TestBackendPoolReplacesLost(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("gated"), Connections: 2})
	streams, heads := startGated(t, b, 2)
	ps.peer.Disconnect()
	for i, s := range streams {
		rest := collect(t, s, heads[i]...)
		if last := rest[len(rest)-1].GetLifecycle(); last.GetError().GetCode() != uint32(canonical.CodeUnavailable) {
			t.Fatalf("terminal %v, want unavailable", last)
		}
	}
	streams, heads = startGated(t, b, 2)
	perConn := map[*upstream]bool{}
	for _, s := range streams {
		perConn[s.(*stream).u] = true
	}
	if len(perConn) != 2 || ps.peer.Connections() != 4 {
		t.Fatalf("after the loss: %d connections used, %d dialled in all; want 2 and 4", len(perConn), ps.peer.Connections())
	}
	finishGated(t, ps, streams, heads)
	for _, sl := range b.slots {
		if l := sl.load.Load(); l != 0 {
			t.Fatalf("a slot still counts %d runs after they ended", l)
		}
	}
}

// startGated starts n runs of the gated router and reads each up to its
// first text, so that all n are in flight at once; it returns the streams
// and the events read from each.
func startGated(t *testing.T, b *Backend, n int) ([]canonical.Stream, [][]*canonical.Event) {
	t.Helper()
	var streams []canonical.Stream
	var heads [][]*canonical.Event
	for range n {
		s, err := b.Start(context.Background(), prompt("x"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		streams = append(streams, s)
	}
	for _, s := range streams {
		heads = append(heads, untilText(t, s))
	}
	return streams, heads
}

// finishGated releases the gated runs and checks each ends completed.
func finishGated(t *testing.T, ps *peerServer, streams []canonical.Stream, heads [][]*canonical.Event) {
	t.Helper()
	ps.peer.Release("go")
	for i, s := range streams {
		rest := collect(t, s, heads[i]...)
		if st := rest[len(rest)-1].GetLifecycle().GetStatus(); st != canonical.StatusCompleted {
			t.Fatalf("terminal %v, want completed", st)
		}
	}
}

func TestBackendUnknownRouter(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("nope")})
	_, err := b.Start(context.Background(), prompt("x"))
	ce := canonical.AsError(err)
	if ce == nil || ce.Code != canonical.CodeNotFound || !strings.Contains(ce.Message, "router is not found (HTTP 404)") {
		t.Fatalf("Start: %v, want not_found router is not found", err)
	}
}

func TestBackendDialRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/language/x/chatStream"
	srv.Close()
	b := newTestBackend(t, BackendConfig{URL: u})
	_, err := b.Start(context.Background(), prompt("x"))
	if canonical.CodeOf(err) != canonical.CodeUnavailable {
		t.Fatalf("Start: %v, want unavailable", err)
	}
}

// TestBackendConnectionLost: a rollout closes the upstream connection; the
// run in flight fails with unavailable and the next run dials again.
func TestBackendConnectionLost(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("hang")})
	s, err := b.Start(context.Background(), prompt("x"))
	if err != nil {
		t.Fatal(err)
	}
	head := untilText(t, s)
	ps.peer.Disconnect()
	rest := collect(t, s, head...)
	last := rest[len(rest)-1].GetLifecycle()
	if last.GetStatus() != canonical.StatusFailed || last.GetError().GetCode() != uint32(canonical.CodeUnavailable) ||
		!strings.Contains(last.GetError().GetMessage(), "close code 1001") {
		t.Fatalf("terminal %v, want failed unavailable naming close code 1001", last)
	}
	s2, err := b.Start(context.Background(), prompt("x"))
	if err != nil {
		t.Fatal(err)
	}
	ps.peer.Release("never")
	if ev := collect(t, s2); ev[len(ev)-1].GetLifecycle().GetStatus() != canonical.StatusCompleted {
		t.Fatalf("after redial: %v", ev[len(ev)-1])
	}
	if n := ps.peer.Connections(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

func TestBackendIdleTimeout(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("stop"), IdleTimeout: 50 * time.Millisecond})
	s, err := b.Start(context.Background(), prompt("x"))
	if err != nil {
		t.Fatal(err)
	}
	events := collect(t, s)
	last := events[len(events)-1].GetLifecycle()
	if last.GetError().GetCode() != uint32(canonical.CodeDeadlineExceeded) || !strings.Contains(last.GetError().GetMessage(), "idle_timeout") {
		t.Fatalf("terminal %v, want deadline_exceeded naming idle_timeout", last)
	}
}

// TestBackendCancel: cancelling a run ends it cancelled; the connection
// serves the next run; frames for the cancelled id are dropped.
func TestBackendCancel(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("gated")})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := b.Start(ctx, prompt("x"))
	if err != nil {
		t.Fatal(err)
	}
	head := untilText(t, s)
	cancel()
	rest := collect(t, s, head...)
	if st := rest[len(rest)-1].GetLifecycle().GetStatus(); st != canonical.StatusCancelled {
		t.Fatalf("terminal %v, want cancelled", st)
	}
	ps.peer.Release("go") // the upstream finishes the cancelled request: dropped
	s2, err := b.Start(context.Background(), prompt("x"))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, ev := range collect(t, s2) {
		text.WriteString(ev.GetBlockDelta().GetText())
	}
	if text.String() != "before after" {
		t.Fatalf("second run text %q", text.String())
	}
}

// TestBackendSendCancel: against an Interlingua upstream (this package's
// frontend), closing a run early sends the cancel frame, which cancels the
// upstream run.
func TestBackendSendCancel(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	b := newTestBackend(t, BackendConfig{URL: ts.url("lock"), SendCancel: true})
	s, err := b.Start(context.Background(), prompt("x"))
	if err != nil {
		t.Fatal(err)
	}
	up := ts.run.await(1)["il-1"]
	up.text("hello")
	untilText(t, s)
	_ = s.Close()
	if err := up.cancelled(); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(up.ctx); !errors.Is(cause, errCancelledByClient) {
		t.Fatalf("upstream run cancelled by %v, want the client's cancel frame", cause)
	}
}

// TestBackendInterlinguaUpstream: Interlingua as the upstream, errors keep
// their canonical code across the two tables.
func TestBackendInterlinguaUpstream(t *testing.T) {
	ts := newTestServer(t, FrontendConfig{})
	b := newTestBackend(t, BackendConfig{URL: ts.url("lock")})
	for _, code := range canonical.AllCodes {
		if code == canonical.CodeOK {
			continue
		}
		s, err := b.Start(context.Background(), prompt("x"))
		if err != nil {
			t.Fatal(err)
		}
		var up *fakeRun
		for _, r := range ts.run.await(1) {
			up = r
		}
		up.send(func(b *canonical.Builder, out []*canonical.Event) []*canonical.Event {
			out = b.Text(out, "partial")
			out = b.FinishMessage(out, canonical.FinishError, nil)
			out = b.Emit(out, &canonical.Event{Kind: &canonical.KindError{Error: &canonical.ErrorProto{Code: uint32(code), Message: "non-terminal: " + code.String()}}})
			status := canonical.StatusFailed
			if code == canonical.CodeCanceled {
				status = canonical.StatusCancelled
			}
			return b.End(out, status, canonical.Errorf(code, "terminal %s", code))
		})
		events := collect(t, s)
		var nonTerminal, terminal *canonical.ErrorProto
		for _, ev := range events {
			if e := ev.GetError(); e != nil {
				nonTerminal = e
			}
		}
		terminal = events[len(events)-1].GetLifecycle().GetError()
		if nonTerminal.GetCode() != uint32(code) || nonTerminal.GetMessage() != "non-terminal: "+code.String() {
			t.Errorf("%v: non-terminal error came back as %v", code, nonTerminal)
		}
		if terminal.GetCode() != uint32(code) || terminal.GetMessage() != "terminal "+code.String() {
			t.Errorf("%v: terminal error came back as %v", code, terminal)
		}
	}
}

// TestBackendMaxBufferedFrames: a run that does not consume its frames
// fails with resource_exhausted instead of holding up the connection.
func TestBackendMaxBufferedFrames(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("flood"), MaxBufferedFrames: 2})
	st, err := b.Start(context.Background(), prompt("x"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.(*stream).c.failed:
	case <-time.After(timeout):
		t.Fatal("call not failed")
	}
	events := collect(t, st)
	last := events[len(events)-1].GetLifecycle()
	if last.GetError().GetCode() != uint32(canonical.CodeResourceExhausted) || !strings.Contains(last.GetError().GetMessage(), "max_buffered_frames") {
		t.Fatalf("terminal %v", last)
	}
	var text strings.Builder
	for _, ev := range events {
		text.WriteString(ev.GetBlockDelta().GetText())
	}
	if text.String() != "12" {
		t.Fatalf("text before the cut-off %q, want the 2 buffered frames", text.String())
	}
}

// TestBackendMaxInFlight: max_in_flight bounds each connection; a run
// more than the pool holds fails.
func TestBackendMaxInFlight(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("hang"), MaxInFlight: 1, Connections: 2})
	for range 2 {
		s, err := b.Start(context.Background(), prompt("x"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	_, err := b.Start(context.Background(), prompt("y"))
	if ce := canonical.AsError(err); ce == nil || ce.Code != canonical.CodeResourceExhausted || !strings.Contains(ce.Message, "max_in_flight 1") {
		t.Fatalf("second Start: %v", err)
	}
}

func TestBackendClosed(t *testing.T) {
	ps := startPeer(t)
	b := newTestBackend(t, BackendConfig{URL: ps.url("hang")})
	s, err := b.Start(context.Background(), prompt("x"))
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	events := collect(t, s)
	if last := events[len(events)-1].GetLifecycle(); last.GetError().GetCode() != uint32(canonical.CodeUnavailable) {
		t.Fatalf("terminal %v", last)
	}
	if _, err := b.Start(context.Background(), prompt("x")); canonical.CodeOf(err) != canonical.CodeUnavailable {
		t.Fatalf("Start after Close: %v", err)
	}
}

func TestBackendConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  BackendConfig
		want string
	}{
		{BackendConfig{}, "url: required"},
		{BackendConfig{URL: "http://x/v1/language/r/chatStream"}, "must be ws:// or wss://"},
		{BackendConfig{URL: "ws://x/", MaxInFlight: -1}, "max_in_flight: must not be negative"},
		{BackendConfig{URL: "ws://x/", Connections: -1}, "connections: must not be negative"},
		{BackendConfig{URL: "ws://x/", IdleTimeout: -time.Second}, "idle_timeout: must not be negative"},
	} {
		_, err := NewBackend(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewBackend(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := NewBackend(BackendConfig{URL: "wss://glide.example/v1/language/r/chatStream"}); err != nil {
		t.Fatal(err)
	}
}
