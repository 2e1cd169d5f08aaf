package sse

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Transports of a hijackServer.
const (
	plain = iota // HTTP/1.1 on TCP
	tls1         // HTTP/1.1 on TLS
	h2           // HTTP/2 on TLS
)

// hijackServer serves each request with serve on a Conn from Hijack;
// hijacked reports whether the last request's connection was taken over.
func hijackServer(t *testing.T, transport int, serve func(c *Conn)) (ts *httptest.Server, hijacked chan bool) {
	return hijackServerCounting(t, transport, nil, serve)
}

func hijackServerCounting(t *testing.T, transport int, cutoffs Counter, serve func(c *Conn)) (ts *httptest.Server, hijacked chan bool) {
	t.Helper()
	hijacked = make(chan bool, 1)
	ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		SetHeaders(w.Header())
		w.Header().Set("X-Test", "1")
		c, ok, err := Hijack(w, r, HijackConfig{WriteTimeout: time.Second, Cutoffs: cutoffs})
		hijacked <- ok
		if err != nil {
			t.Error(err)
			return
		}
		if !ok {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "data: not hijacked\n\n")
			return
		}
		serve(c)
	}))
	switch transport {
	case plain:
		ts.Start()
	case h2:
		ts.EnableHTTP2 = true
		fallthrough
	default:
		ts.StartTLS()
	}
	t.Cleanup(ts.Close)
	return ts, hijacked
}

// rawRequest sends a request line by hand and returns everything the
// server sends until it closes the connection.
func rawRequest(t *testing.T, addr, requestLine string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, requestLine+"\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(nc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var dateLine = regexp.MustCompile(`(?m)^Date: .*\r\n`)

// TestHijackWritesChunkedStream: the head carries the handler's headers,
// chunked framing and Connection: close; each Write is one chunk, an
// empty Write sends nothing, and Finish sends the last chunk (RFC 9112
// §7.1) and closes.
func TestHijackWritesChunkedStream(t *testing.T) {
	ts, hijacked := hijackServer(t, plain, func(c *Conn) {
		for _, s := range []string{"data: a\n\n", "", ": heartbeat\n\n"} {
			if _, err := c.Write([]byte(s)); err != nil {
				t.Error(err)
			}
		}
		if err := c.Finish(); err != nil {
			t.Error(err)
		}
	})
	got := rawRequest(t, ts.Listener.Addr().String(), "POST /s HTTP/1.1")
	if !<-hijacked {
		t.Fatal("not hijacked")
	}
	if !dateLine.MatchString(got) {
		t.Errorf("no Date header: %q", got)
	}
	want := "HTTP/1.1 200 OK\r\n" +
		"Cache-Control: no-cache\r\nConnection: close\r\nContent-Type: text/event-stream\r\n" +
		"Transfer-Encoding: chunked\r\nX-Accel-Buffering: no\r\nX-Test: 1\r\n\r\n" +
		"9\r\ndata: a\n\n\r\n" + "d\r\n: heartbeat\n\n\r\n" + "0\r\n\r\n"
	if diff := cmp.Diff(want, dateLine.ReplaceAllString(got, "")); diff != "" {
		t.Errorf("wire (-want +got):\n%s", diff)
	}
	// And as an HTTP client reads it: a complete body.
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(got)), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "data: a\n\n: heartbeat\n\n" || !resp.Close {
		t.Errorf("client read %q, %v, close %v", body, err, resp.Close)
	}
}

// TestHijackOverTLS: HTTP/1.1 over TLS is taken over too (its chunks are
// gathered in one buffer, not written piece by piece), and a client reads
// the stream whole.
func TestHijackOverTLS(t *testing.T) {
	ts, hijacked := hijackServer(t, tls1, func(c *Conn) {
		for _, s := range []string{"data: a\n\n", strings.Repeat("x", 10000)} {
			if _, err := c.Write([]byte(s)); err != nil {
				t.Error(err)
			}
		}
		_ = c.Finish()
	})
	resp, err := ts.Client().Post(ts.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !<-hijacked || resp.ProtoMajor != 1 || err != nil || string(body) != "data: a\n\n"+strings.Repeat("x", 10000) {
		t.Errorf("HTTP/%d: %d bytes, %v", resp.ProtoMajor, len(body), err)
	}
}

// TestHijackDeclines: HTTP/1.0 and HTTP/2 connections are not taken over
// (nothing is written; the handler answers through its ResponseWriter).
func TestHijackDeclines(t *testing.T) {
	never := func(*Conn) { t.Error("hijacked") }
	ts, hijacked := hijackServer(t, plain, never)
	if got := rawRequest(t, ts.Listener.Addr().String(), "POST /s HTTP/1.0"); <-hijacked || !strings.HasSuffix(got, "\r\n\r\ndata: not hijacked\n\n") {
		t.Errorf("HTTP/1.0: %q", got)
	}
	ts2, hijacked2 := hijackServer(t, h2, never)
	resp, err := ts2.Client().Post(ts2.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if <-hijacked2 || resp.ProtoMajor != 2 || string(body) != "data: not hijacked\n\n" {
		t.Errorf("HTTP/%d: hijacked or body %q", resp.ProtoMajor, body)
	}
}

// TestHijackGone: the gone function runs when the peer hangs up, and
// when it sends more than maxUnread after its request; Close then
// returns at once.
func TestHijackGone(t *testing.T) {
	for _, name := range []string{"hang up", "too much"} {
		t.Run(name, func(t *testing.T) {
			gone := make(chan struct{})
			conns := make(chan *Conn, 1)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c, ok, err := Hijack(w, r, HijackConfig{WriteTimeout: time.Second, Gone: func() { close(gone) }})
				if !ok || err != nil {
					t.Errorf("hijack: %v %v", ok, err)
				}
				conns <- c
			}))
			defer ts.Close()
			nc, err := net.Dial("tcp", ts.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_, _ = io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			c := <-conns
			if c == nil {
				t.FailNow()
			}
			if name == "hang up" {
				nc.Close()
			} else {
				go func() { _, _ = nc.Write(make([]byte, maxUnread+1024)) }()
			}
			select {
			case <-gone:
			case <-time.After(10 * time.Second):
				t.Fatal("gone not called")
			}
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// counter counts as a prometheus.Counter would.
type counter struct{ n atomic.Int64 }

func (c *counter) Inc() { c.n.Add(1) }

// TestHijackWriteTimeout: a Write to a peer that does not read fails
// within the write timeout instead of blocking, counted once as a cutoff.
func TestHijackWriteTimeout(t *testing.T) {
	failed := make(chan error, 1)
	var cutoffs counter
	ts, _ := hijackServerCounting(t, plain, &cutoffs, func(c *Conn) {
		c.timeout = 50 * time.Millisecond
		chunk := make([]byte, 1<<20)
		for {
			if _, err := c.Write(chunk); err != nil {
				failed <- err
				_ = c.Close()
				return
			}
		}
	})
	nc, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, _ = io.WriteString(nc, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
	select {
	case err := <-failed:
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Errorf("write failed with %v, want a timeout", err)
		}
		if n := cutoffs.n.Load(); n != 1 {
			t.Errorf("%d cutoffs counted, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("write to a stalled peer did not fail")
	}
}
