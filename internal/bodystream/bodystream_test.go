package bodystream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/wiretap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lineDecoder: each line is a text delta; a line "END" ends the run.
type lineDecoder struct {
	b     *canonical.Builder
	part  []byte
	ended bool
}

func newLineDecoder() *lineDecoder { return &lineDecoder{b: canonical.NewBuilder()} }

func (d *lineDecoder) Feed(chunk []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	d.part = append(d.part, chunk...)
	for {
		i := bytes.IndexByte(d.part, '\n')
		if i < 0 {
			return out, nil
		}
		line := string(d.part[:i])
		d.part = d.part[i+1:]
		if line == "END" {
			d.ended = true
			return d.b.End(out, canonical.StatusCompleted, nil), nil
		}
		if line == "BAD" {
			return out, canonical.Errorf(canonical.CodeInternal, "bad line")
		}
		out = d.b.Text(out, line)
	}
}

func (d *lineDecoder) End(out []*canonical.Event) ([]*canonical.Event, error) {
	if !d.ended {
		return out, canonical.Errorf(canonical.CodeUnavailable, "cut short")
	}
	return out, nil
}

func (d *lineDecoder) Fail(out []*canonical.Event, err error) []*canonical.Event {
	d.ended = true
	return d.b.End(out, canonical.StatusFailed, canonical.AsError(err))
}

func (d *lineDecoder) Ended() bool { return d.ended }

// brokenBody returns data, then err.
type brokenBody struct {
	r   io.Reader
	err error
}

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, b.err
	}
	return n, err
}
func (b *brokenBody) Close() error { return nil }

func run(t *testing.T, c Config) (texts []string, last *canonical.Lifecycle, s *Stream) {
	t.Helper()
	if c.Ctx == nil {
		c.Ctx, c.Cancel = context.WithCancel(context.Background())
	}
	s = New(c)
	defer s.Close()
	for {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("Recv: %v (no terminal event)", err)
		}
		if d := ev.GetBlockDelta(); d != nil {
			texts = append(texts, d.GetText())
		}
		if _, ok := canonical.TerminalOf(ev); ok {
			if s.buf != nil {
				t.Fatal("the read buffer is still held after the terminal event")
			}
			if _, err := s.Recv(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the terminal event: %v, want EOF", err)
			}
			return texts, ev.GetLifecycle(), s
		}
	}
}

// Every way a body ends gives exactly one terminal event, and the read
// buffer goes back to the pool from Recv once the run has ended: a whole
// stream, one cut short, a decoder error, a connection that breaks (its
// address only in the cause), a break after the answer was whole
// (Broken), and a body read whole (Object, with its limit).
func TestStreamEnds(t *testing.T) {
	body := func(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
	reset := errors.New("connection reset by peer")
	for _, tc := range []struct {
		name   string
		c      Config
		texts  string
		status canonical.RunStatus
		msg    string
	}{
		{"whole", Config{Body: body("a\nb\nEND\n")}, "a,b", canonical.StatusCompleted, ""},
		{"first events", Config{Body: body("a\nEND\n"), First: canonical.NewBuilder().Lifecycle(nil, canonical.StatusRunning)}, "a", canonical.StatusCompleted, ""},
		{"cut short", Config{Body: body("a\n")}, "a", canonical.StatusFailed, "cut short"},
		{"decoder error", Config{Body: body("a\nBAD\nb\n")}, "a", canonical.StatusFailed, "bad line"},
		{"broken", Config{Body: &brokenBody{strings.NewReader("a\n"), reset}, Backend: "x", Source: "http://10.0.0.9"}, "a",
			canonical.StatusFailed, "x backend: the upstream's response broke off"},
		{"broken after the answer", Config{Body: &brokenBody{strings.NewReader("a\n"), reset}}, "a", canonical.StatusCompleted, ""},
		{"object", Config{Body: body("a\nb\nEND\n"), MaxObjectBytes: 100}, "a,b", canonical.StatusCompleted, ""},
		{"object too large", Config{Body: body("a\nb\nEND\n"), MaxObjectBytes: 4, MaxObjectOption: "max_response_bytes", Backend: "x"}, "",
			canonical.StatusFailed, "x backend: response exceeds max_response_bytes (4)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec := newLineDecoder()
			tc.c.Dec = dec
			if strings.HasPrefix(tc.name, "object") {
				tc.c.Object = dec.Feed
			}
			if tc.name == "broken after the answer" { // the decoder completes the run it has whole
				tc.c.Broken = func(out []*canonical.Event) ([]*canonical.Event, bool) {
					dec.ended = true
					return dec.b.End(out, canonical.StatusCompleted, nil), true
				}
			}
			texts, last, _ := run(t, tc.c)
			if got := strings.Join(texts, ","); got != tc.texts || last.GetStatus() != tc.status || last.GetError().GetMessage() != tc.msg {
				t.Errorf("texts %q, %v %q; want %q, %v %q", got, last.GetStatus(), last.GetError().GetMessage(), tc.texts, tc.status, tc.msg)
			}
			if strings.Contains(last.GetError().GetMessage(), "10.0.0.9") {
				t.Error("the upstream's address reached the run's error")
			}
		})
	}
}

// A read that fails because the run was cancelled is the cancellation,
// not a broken upstream.
func TestStreamCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, last, _ := run(t, Config{Ctx: ctx, Cancel: cancel, Body: &brokenBody{strings.NewReader(""), context.Canceled}, Dec: newLineDecoder()})
	if last.GetStatus() != canonical.StatusFailed || canonical.Code(last.GetError().GetCode()) != canonical.CodeCanceled {
		t.Fatalf("terminal %v", last)
	}
}

// A configured client is used as it is; without one the backend gets its
// own transport (its idle connections are the backend's to release),
// wrapped by the inspector's wiretap, and
// an upstream's address loses its credentials in causes.
func TestNewUpstreamAndRedacted(t *testing.T) {
	configured := &http.Client{}
	if u := NewUpstream("x", configured, nil); u.Client != configured || u.own != nil {
		t.Fatalf("configured client: %+v", u)
	}
	u := NewUpstream("x", nil, nil)
	if own := u.own; own == nil || u.Client.Transport != wiretap.Transport(own) || own.MaxIdleConnsPerHost != 256 || own.ReadBufferSize != ReadBufSize {
		t.Fatalf("own transport: %+v", own)
	}
	_ = u.Close()
	if got := Redacted("http://user:secret@upstream:8000/v1", "x"); got != "http://user:xxxxx@upstream:8000/v1" {
		t.Errorf("Redacted = %q", got)
	}
	if got := Redacted("http://[::1", "x"); got != "x" {
		t.Errorf("Redacted(not a URL) = %q", got)
	}
}

// Post sends the protocol's headers, then the configured ones over them;
// a 2xx answer is the caller's to read, another is what httpError makes
// of it (its body closed); a request that got no answer is unavailable,
// with the address, without its password, in the cause only; one we
// cancelled is cancelled.
func TestPost(t *testing.T) {
	var got http.Header
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		if r.URL.Path == "/fail" {
			http.Error(w, "no such model", http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	u := NewUpstream("demo", nil, map[string]string{"X-Extra": "1", "Accept": "application/x-override"})
	defer u.Close()
	header := func(h http.Header) { h.Set("Accept", "text/event-stream"); h.Set("Authorization", "Bearer k") }
	httpError := func(resp *http.Response) *canonical.Error {
		b, _ := io.ReadAll(resp.Body)
		return canonical.WireError(canonical.CodeOfHTTPStatus(resp.StatusCode), strings.TrimSpace(string(b)))
	}
	ctx := context.Background()

	resp, e := u.Post(ctx, srv.URL+"/ok", []byte(`{"a":1}`), header, httpError)
	if e != nil {
		t.Fatalf("2xx: %v", e)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" || gotBody != `{"a":1}` || got.Get("Accept") != "application/x-override" ||
		got.Get("Authorization") != "Bearer k" || got.Get("X-Extra") != "1" {
		t.Fatalf("2xx: body %q, sent %q with headers %v", body, gotBody, got)
	}

	if _, e := u.Post(ctx, srv.URL+"/fail", nil, header, httpError); e == nil || e.Code != canonical.CodeNotFound || e.Message != "no such model" {
		t.Fatalf("404: %v", e)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := strings.Replace(dead.URL, "http://", "http://user:secret@", 1)
	dead.Close()
	_, e = u.Post(ctx, deadURL+"/v1", nil, header, httpError)
	if e == nil || e.Code != canonical.CodeUnavailable || e.Message != "demo backend: the upstream did not answer" {
		t.Fatalf("no answer: %v", e)
	}
	if cause := e.Cause.Error(); !strings.HasPrefix(cause, "POST http://user:xxxxx@") || strings.Contains(cause, "secret") || strings.Count(cause, "http://") != 1 {
		t.Fatalf("no answer: cause %q", cause)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, e := u.Post(cancelled, srv.URL+"/ok", nil, header, httpError); e == nil || e.Code != canonical.CodeCanceled {
		t.Fatalf("cancelled: %v", e)
	}
}
