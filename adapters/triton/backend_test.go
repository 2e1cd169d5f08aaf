package triton_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/adapters/triton"
	"github.com/interlingua-dev/interlingua/canonical"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
)

// startPeer serves the reference Triton peer over real HTTP.
func startPeer(t *testing.T, models ...tritonpeer.Model) (*tritonpeer.Server, string) {
	t.Helper()
	p := tritonpeer.New(models...)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func newBackend(t *testing.T, cfg triton.BackendConfig) *triton.Backend {
	t.Helper()
	be, err := triton.NewBackend(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

func request(target, prompt string, params map[string]any) *canonical.Request {
	req := &canonical.Request{
		RunId:  "run-1",
		Target: target,
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", prompt)}},
	}
	if params != nil {
		s, err := structpb.NewStruct(params)
		if err != nil {
			panic(err)
		}
		req.Parameters = s.GetFields()
	}
	return req
}

// run starts req on be and collects its events, checking the invariants.
func run(t *testing.T, be canonical.Backend, req *canonical.Request) ([]*canonical.Event, error) {
	t.Helper()
	st, err := be.Start(context.Background(), req)
	if err != nil {
		return nil, err
	}
	events, err := canonical.Collect(st)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	if err := canonical.Validate(events); err != nil {
		t.Fatal(err)
	}
	return events, nil
}

// deltas returns the text deltas and the terminal lifecycle.
func deltas(events []*canonical.Event) ([]string, *canonical.Lifecycle) {
	var out []string
	var last *canonical.Lifecycle
	for _, ev := range events {
		if d := ev.GetBlockDelta(); d != nil {
			out = append(out, d.GetText())
		}
		if _, ok := canonical.TerminalOf(ev); ok {
			last = ev.GetLifecycle()
		}
	}
	return out, last
}

func TestBackendStream(t *testing.T) {
	peer, url := startPeer(t, tritonpeer.Model{Chunks: []string{"Hello", ",", " world"}, Extra: true, RequireMaxTokens: true})
	be := newBackend(t, triton.BackendConfig{URL: url})
	events, err := run(t, be, request("ensemble", "Say hi", map[string]any{"temperature": 0.5, "id": "r-9", "include_reasoning": true, "opaque": map[string]any{"a": 1}}))
	if err != nil {
		t.Fatal(err)
	}
	got, last := deltas(events)
	if strings.Join(got, "|") != "Hello|,| world" || last.GetStatus() != canonical.StatusCompleted {
		t.Fatalf("deltas %q, end %v", got, last)
	}
	md := events[1].GetMessageStart().GetMetadata()
	if md["model"].GetStringValue() != "ensemble" || md["model_version"].GetStringValue() != "1" || md["provider"].GetStringValue() != "triton" {
		t.Errorf("message metadata %v", md)
	}
	reqs := peer.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	// Typed by the model's metadata: defaults for max_tokens, bad_words,
	// stop_words; the object parameter and include_reasoning stay home.
	const want = `{"text_input":"Say hi","bad_words":"","exclude_input_in_output":true,"id":"r-9","max_tokens":1024,"stop_words":"","stream":true,"temperature":0.5}`
	if string(reqs[0].Body) != want || reqs[0].Path != "/v2/models/ensemble/generate_stream" {
		t.Errorf("sent %s %s\nwant %s", reqs[0].Path, reqs[0].Body, want)
	}
	if reqs[0].Header.Get("Accept") != "text/event-stream" || reqs[0].Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", reqs[0].Header)
	}
}

func TestBackendFraming(t *testing.T) {
	_, url := startPeer(t,
		// A rune split across SSE events, every frame cut into 1-byte TCP
		// writes, CRLF line ends, "data:" without a space.
		tritonpeer.Model{Name: "split", Chunks: []string{"smile \xf0\x9f", "\x98\x80 ok", " caf\xc3", "\xa9"}, WriteSize: 1, CRLF: true, NoSpace: true},
		tritonpeer.Model{Name: "cumulative", Chunks: []string{"The", " cat", " \xe2\x82", "\xac5"}, Cumulative: true, WriteSize: 7},
	)
	for _, tc := range []struct {
		model, textOutput string
		want              []string
	}{
		{"split", "", []string{"smile ", "😀 ok", " caf", "é"}},
		{"cumulative", "cumulative", []string{"The", " cat", " ", "€5"}},
	} {
		be := newBackend(t, triton.BackendConfig{URL: url, TextOutput: tc.textOutput, Metadata: "off"})
		events, err := run(t, be, request(tc.model, "x", nil))
		if err != nil {
			t.Fatal(err)
		}
		if got, last := deltas(events); strings.Join(got, "|") != strings.Join(tc.want, "|") || last.GetStatus() != canonical.StatusCompleted {
			t.Errorf("%s: deltas %q, end %v", tc.model, got, last)
		}
	}
}

func TestBackendErrors(t *testing.T) {
	_, url := startPeer(t,
		tritonpeer.Model{Name: "mid", Chunks: []string{"one", " two", " three"}, ErrorMessage: "An Error Occurred", ErrorAt: 2},
		tritonpeer.Model{Name: "first", ErrorMessage: "model crashed", ErrorAt: 0},
		tritonpeer.Model{Name: "decoupled", Chunks: []string{"a", "b"}},
		tritonpeer.Model{Name: "slow", Delay: time.Hour},
	)
	be := newBackend(t, triton.BackendConfig{URL: url})

	// In band, after the first response: a failed run with the message.
	events, err := run(t, be, request("mid", "x", nil))
	if err != nil {
		t.Fatal(err)
	}
	got, last := deltas(events)
	if strings.Join(got, "|") != "one| two" || last.GetStatus() != canonical.StatusFailed ||
		canonical.Code(last.GetError().GetCode()) != canonical.CodeInternal || last.GetError().GetMessage() != "An Error Occurred" {
		t.Errorf("in band: %q %v", got, last)
	}

	for _, tc := range []struct {
		name string
		be   *triton.Backend
		req  *canonical.Request
		code canonical.Code
		msg  string
	}{
		{"first response fails (500, SSE body)", be, request("first", "x", map[string]any{"stream": true}), canonical.CodeInternal, "model crashed"},
		{"unknown model (metadata)", be, request("nope", "x", nil), canonical.CodeNotFound, "Request for unknown model: 'nope' is not found"},
		{"unknown model (generate)", newBackend(t, triton.BackendConfig{URL: url, Metadata: "off", Model: "nope"}), request("any", "x", nil),
			canonical.CodeNotFound, "Request for unknown model: 'nope' is not found"},
		{"unknown version", newBackend(t, triton.BackendConfig{URL: url, Metadata: "off", Version: "2"}), request("mid", "x", nil),
			canonical.CodeNotFound, "Request for unknown model: 'mid' version 2 is not found"},
		{"bad parameter type", newBackend(t, triton.BackendConfig{URL: url, Metadata: "off"}), request("mid", "x", map[string]any{"max_tokens": "many"}),
			canonical.CodeInternal, "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"},
		{"timeout", newBackend(t, triton.BackendConfig{URL: url, Timeout: 50 * time.Millisecond}), request("slow", "x", nil),
			canonical.CodeDeadlineExceeded, "context deadline exceeded"},
	} {
		_, err := run(t, tc.be, tc.req)
		ce := canonical.AsError(err)
		if ce == nil || ce.Code != tc.code || ce.Message != tc.msg {
			t.Errorf("%s: %v, want %v %q", tc.name, err, tc.code, tc.msg)
		}
	}

	// /generate against a decoupled model streaming: Triton's 200 error.
	gen := newBackend(t, triton.BackendConfig{URL: url, Endpoint: "generate"})
	events, err = run(t, gen, request("decoupled", "x", map[string]any{"stream": true}))
	if err != nil {
		t.Fatal(err)
	}
	if _, last := deltas(events); last.GetStatus() != canonical.StatusCompleted {
		t.Errorf("generate sends stream false, so one response: %v", last)
	}
}

func TestBackendGenerate(t *testing.T) {
	peer, url := startPeer(t, tritonpeer.Model{Name: "m", Chunks: []string{"model", " output"}})
	be := newBackend(t, triton.BackendConfig{URL: url, Endpoint: "generate"})
	events, err := run(t, be, request("m", "client input", map[string]any{"id": "42"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, last := deltas(events); strings.Join(got, "|") != "model output" || last.GetStatus() != canonical.StatusCompleted {
		t.Fatalf("%q %v", got, last)
	}
	if r := peer.Requests()[0]; r.Path != "/v2/models/m/generate" || !strings.Contains(string(r.Body), `"stream":false`) {
		t.Errorf("sent %s %s", r.Path, r.Body)
	}
}

// TestBackendHTTPErrors: statuses and bodies a proxy or another server
// might send map to codes, with the body's message.
func TestBackendHTTPErrors(t *testing.T) {
	var status int
	var ctype, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.NotFound(w, r) // no metadata endpoint: the backend goes on untyped
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	be := newBackend(t, triton.BackendConfig{URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer t"}})
	for _, tc := range []struct {
		status      int
		ctype, body string
		code        canonical.Code
		msg         string
	}{
		{503, "application/json", `{"error":"Server not ready"}`, canonical.CodeUnavailable, "Server not ready"},
		{401, "text/plain", "unauthorized\n", canonical.CodeUnauthenticated, "unauthorized"},
		{429, "text/plain", "", canonical.CodeResourceExhausted, "Too Many Requests"},
		{502, "text/html", "<html>bad gateway</html>", canonical.CodeUnavailable, "<html>bad gateway</html>"},
		{400, "application/json", `{"error":"Unsupported content-encoding, only 'identity' is supported."}`, canonical.CodeInvalidArgument,
			"Unsupported content-encoding, only 'identity' is supported."},
		{500, "text/event-stream; charset=utf-8", "data: {\"error\":\"An Error Occurred\"}\n\n", canonical.CodeInternal, "An Error Occurred"},
	} {
		status, ctype, body = tc.status, tc.ctype, tc.body
		_, err := run(t, be, request("m", "x", nil))
		ce := canonical.AsError(err)
		if ce == nil || ce.Code != tc.code || ce.Message != tc.msg || !ce.Wire {
			t.Errorf("%d %s: %+v, want %v %q", tc.status, tc.body, ce, tc.code, tc.msg)
		}
	}
}

func TestBackendUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	be := newBackend(t, triton.BackendConfig{URL: "http://user:secret@" + addr})
	_, err = run(t, be, request("m", "x", nil))
	ce := canonical.AsError(err)
	if ce == nil || ce.Code != canonical.CodeUnavailable || strings.Contains(ce.Message, "secret") {
		t.Fatalf("%v", err)
	}
}

// TestBackendCancel: closing the stream, or cancelling the run's context,
// closes the upstream request; the peer sees the client leave.
func TestBackendCancel(t *testing.T) {
	peer, url := startPeer(t, tritonpeer.Model{Name: "hang", Chunks: []string{"a"}, Hang: true})
	be := newBackend(t, triton.BackendConfig{URL: url})
	for _, how := range []string{"close", "context"} {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := be.Start(ctx, request("hang", "x", nil))
		if err != nil {
			t.Fatal(err)
		}
		var events []*canonical.Event
		for {
			ev, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, ev)
			if ev.GetBlockDelta() != nil {
				break
			}
		}
		done := make(chan []*canonical.Event, 1)
		go func() {
			rest, _ := canonical.Collect(st) // blocks: the peer hangs
			done <- rest
		}()
		if how == "close" {
			_ = st.Close()
		} else {
			cancel()
		}
		select {
		case name := <-peer.Cancelled():
			if name != "hang" {
				t.Fatalf("%s: peer saw %q", how, name)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the upstream request was not closed", how)
		}
		events = append(events, <-done...)
		cancel()
		if how == "context" {
			if err := canonical.Validate(events); err != nil {
				t.Fatal(err)
			}
			if _, last := deltas(events); last.GetStatus() != canonical.StatusCancelled {
				t.Fatalf("context: ended %v", last)
			}
		}
	}
}

func TestBackendConfig(t *testing.T) {
	_, err := triton.NewBackend(triton.BackendConfig{URL: "ftp://x", Endpoint: "infer", TextOutput: "full", Metadata: "on", Version: "v1", Timeout: -1, MaxTokens: -1})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"url:", "endpoint:", "text_output:", "metadata:", "version:", "timeout:", "max_tokens:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
	if _, err := triton.NewBackend(triton.BackendConfig{}); err == nil || !strings.Contains(err.Error(), "url: required") {
		t.Errorf("missing url: %v", err)
	}
	_, err = run(t, newBackend(t, triton.BackendConfig{URL: "http://127.0.0.1:1"}), request("", "x", nil))
	if canonical.CodeOf(err) != canonical.CodeInvalidArgument {
		t.Errorf("no model: %v", err)
	}
	if errors.Is(err, io.EOF) {
		t.Fatal("unexpected EOF")
	}
}

// TestBackendStreamAnsweredWithJSON: a server that answers generate_stream
// with one JSON object (no streaming) is read as /generate.
func TestBackendStreamAnsweredWithJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"model_name":"m","model_version":"2","text_output":"whole answer"}`)
	}))
	defer srv.Close()
	events, err := run(t, newBackend(t, triton.BackendConfig{URL: srv.URL, Metadata: "off"}), request("m", "x", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, last := deltas(events); strings.Join(got, "|") != "whole answer" || last.GetStatus() != canonical.StatusCompleted {
		t.Fatalf("%q %v", got, last)
	}
}
