package wiretap

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

type rec struct {
	mu                       sync.Mutex
	reqs, resps              int
	sent, received           strings.Builder
	reqHeaderAuth, respProto string
}

func (r *rec) Request(q *http.Request) {
	r.mu.Lock()
	r.reqs++
	r.reqHeaderAuth = q.Header.Get("Authorization")
	r.mu.Unlock()
}
func (r *rec) Response(p *http.Response) {
	r.mu.Lock()
	r.resps++
	r.respProto = p.Status
	r.mu.Unlock()
}
func (r *rec) Sent(p []byte)     { r.mu.Lock(); r.sent.Write(p); r.mu.Unlock() }
func (r *rec) Received(p []byte) { r.mu.Lock(); r.received.Write(p); r.mu.Unlock() }

// A request whose context carries a Recorder is recorded (body both ways)
// only while a recorder is armed; others pass untouched.
func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write([]byte("echo:" + string(b)))
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: Transport(tr)}
	do := func(ctx context.Context) string {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("hello"))
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	r := &rec{}
	ctx := WithRecorder(context.Background(), r)
	if got := do(ctx); got != "echo:hello" || r.reqs != 0 {
		t.Fatalf("unarmed: got %q, %d requests recorded", got, r.reqs)
	}
	disarm := Arm()
	defer disarm()
	if got := do(context.Background()); got != "echo:hello" || r.reqs != 0 {
		t.Fatalf("no recorder: got %q, %d requests recorded", got, r.reqs)
	}
	if got := do(ctx); got != "echo:hello" {
		t.Fatalf("recorded: got %q", got)
	}
	if r.reqs != 1 || r.resps != 1 || r.sent.String() != "hello" || r.received.String() != "echo:hello" || r.respProto != "200 OK" {
		t.Fatalf("recorded %d requests, %d responses, sent %q, received %q, status %q", r.reqs, r.resps, r.sent.String(), r.received.String(), r.respProto)
	}
	disarm()
	disarm() // once only
	if armed.Load() != 0 {
		t.Fatalf("armed = %d after disarm", armed.Load())
	}
}

// A Tap from a context carrying a Recorder passes Sent and Received on;
// from one carrying none it is the zero Tap, which records nothing.
func TestTap(t *testing.T) {
	var zero Tap
	if got := TapFrom(context.Background()); got != zero {
		t.Fatalf("TapFrom without a Recorder = %+v, want the zero Tap", got)
	}
	zero.Sent([]byte("lost")) // no Recorder: nothing to call
	zero.Received([]byte("lost"))
	r := &rec{}
	tap := TapFrom(WithRecorder(context.Background(), r))
	tap.Sent([]byte("out"))
	tap.Received([]byte("in"))
	if r.sent.String() != "out" || r.received.String() != "in" || r.reqs != 0 || r.resps != 0 {
		t.Fatalf("recorded sent %q, received %q, %d requests, %d responses", r.sent.String(), r.received.String(), r.reqs, r.resps)
	}
}
