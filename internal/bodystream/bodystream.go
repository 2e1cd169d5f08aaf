// Package bodystream is what every HTTP backend shares (Triton, OpenAI,
// Anthropic, OpenAI Responses): its upstream (Upstream: the client, the
// request and the errors of one that got no answer) and the read loop of
// its response bodies as a run's canonical events, around each
// protocol's own incremental decoder. Recv reads the body, so no
// goroutine runs behind a stream; what one read decodes is returned
// without another (Buffered).
package bodystream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/tracing"
	"github.com/interlingua-dev/interlingua/internal/wiretap"
)

// Decoder is a protocol's incremental decoder of a streamed body.
type Decoder interface {
	// Feed decodes the next bytes of the body, appending to out.
	Feed(chunk []byte, out []*canonical.Event) ([]*canonical.Event, error)
	// End is the body's end: the events owed, or an error when the
	// stream was cut short.
	End(out []*canonical.Event) ([]*canonical.Event, error)
	// Fail ends the run failed with err (after closing what is open).
	Fail(out []*canonical.Event, err error) []*canonical.Event
	// Ended reports that the terminal event was produced.
	Ended() bool
}

// ReadBufSize is what one read of a streamed body takes, as much as an
// HTTP transport's read buffer holds.
const ReadBufSize = 32 << 10

// readBufs holds the streams' read buffers between runs: allocating one
// per run was 28 KB of the 68 KB the bridge allocated per Triton run. A
// stream puts its buffer back from Recv once the body has ended (never
// from Close, which may run during a read).
var readBufs = sync.Pool{New: func() any { return new([ReadBufSize]byte) }}

// Config is one response's stream.
type Config struct {
	// Body is the response body; Cancel cancels the request's context
	// (Ctx). Both are released once, when the run ends or Close is called.
	Ctx    context.Context
	Cancel context.CancelFunc
	Body   io.ReadCloser
	Dec    Decoder
	// Object, when set, decodes the whole body at once (a response that
	// does not stream), read up to MaxObjectBytes, the backend's option
	// MaxObjectOption.
	Object          func(data []byte, out []*canonical.Event) ([]*canonical.Event, error)
	MaxObjectBytes  int
	MaxObjectOption string
	// Broken, when set, may end a run whose body broke off after its
	// answer was whole (an OpenAI stream reset after the finish chunk):
	// ok true, and the events ending it completed.
	Broken func(out []*canonical.Event) (events []*canonical.Event, ok bool)
	// Backend names the backend type in errors ("triton"); Source is the
	// upstream's redacted address, for the log's cause only.
	Backend, Source string
	// First are events Recv returns before the body's (the run's
	// running lifecycle event, once the upstream answered).
	First []*canonical.Event
}

// Stream is a canonical.Stream over a response body.
type Stream struct {
	c       Config
	buf     *[ReadBufSize]byte // from readBufs while the body is read
	pending []*canonical.Event
	next    int
	once    sync.Once
}

// New returns the stream of c.
func New(c Config) *Stream {
	s := &Stream{c: c, pending: c.First}
	s.c.First = nil
	return s
}

// Recv implements canonical.Stream.
func (s *Stream) Recv() (*canonical.Event, error) {
	for s.next == len(s.pending) {
		if s.c.Dec.Ended() {
			s.release() // the terminal event ends the read: a body kept open is not waited for
			return nil, io.EOF
		}
		s.pending, s.next = s.pending[:0], 0
		if s.c.Object != nil {
			s.pending = s.readObject(s.pending)
			continue
		}
		s.pending = s.read(s.pending)
		if s.c.Dec.Ended() && s.buf != nil { // no more reads: the buffer goes to the next run
			readBufs.Put(s.buf)
			s.buf = nil
		}
	}
	ev := s.pending[s.next]
	s.pending[s.next] = nil
	s.next++
	return ev, nil
}

// read decodes what one read of the body returns.
func (s *Stream) read(out []*canonical.Event) []*canonical.Event {
	if s.buf == nil {
		s.buf = readBufs.Get().(*[ReadBufSize]byte)
	}
	n, err := s.c.Body.Read(s.buf[:])
	if n > 0 {
		var ferr error
		if out, ferr = s.c.Dec.Feed(s.buf[:n], out); ferr != nil {
			return s.c.Dec.Fail(out, ferr)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		var eerr error
		if out, eerr = s.c.Dec.End(out); eerr != nil {
			out = s.c.Dec.Fail(out, eerr)
		}
	case s.c.Ctx.Err() == nil && s.c.Broken != nil:
		if evs, ok := s.c.Broken(out); ok {
			return evs
		}
		out = s.c.Dec.Fail(out, s.readError(err))
	default:
		out = s.c.Dec.Fail(out, s.readError(err))
	}
	return out
}

// readObject reads and decodes a whole body.
func (s *Stream) readObject(out []*canonical.Event) []*canonical.Event {
	limit := s.c.MaxObjectBytes
	data, err := io.ReadAll(io.LimitReader(s.c.Body, int64(limit)+1))
	if err != nil {
		return s.c.Dec.Fail(out, s.readError(err))
	}
	if len(data) > limit {
		return s.c.Dec.Fail(out, canonical.Errorf(canonical.CodeResourceExhausted, "%s backend: response exceeds %s (%d)", s.c.Backend, s.c.MaxObjectOption, limit))
	}
	if out, err = s.c.Object(data, out); err != nil {
		return s.c.Dec.Fail(out, err)
	}
	return out
}

// readError is a read that failed: our cancellation or deadline, else the
// upstream's connection broke (unavailable, never a completed run). The
// upstream's address goes to the cause, for the log, not to the client.
func (s *Stream) readError(err error) *canonical.Error {
	if s.c.Ctx.Err() != nil {
		return canonical.AsError(s.c.Ctx.Err())
	}
	return &canonical.Error{Code: canonical.CodeUnavailable, Message: s.c.Backend + " backend: the upstream's response broke off",
		Cause: fmt.Errorf("reading the response from %s: %w", s.c.Source, err)}
}

// Buffered returns how many events Recv returns without reading the
// upstream: those decoded from what was read so far. Called from the
// goroutine that calls Recv.
func (s *Stream) Buffered() int { return len(s.pending) - s.next }

// release closes the upstream request, once.
func (s *Stream) release() {
	s.once.Do(func() {
		s.c.Cancel()
		_ = s.c.Body.Close()
	})
}

// Close implements canonical.Stream: it closes the upstream request (which
// an upstream sees as the client's cancellation).
func (s *Stream) Close() error {
	s.release()
	return nil
}

// Upstream is how an HTTP backend calls its server: the client, and the
// transport the backend owns when it was given none. It is safe for
// concurrent use.
type Upstream struct {
	// Backend names the backend type in errors ("triton").
	Backend string
	Client  *http.Client
	// Headers are the backend's configured extra headers, set on every
	// request after the protocol's own (so they may override them).
	Headers map[string]string
	own     *http.Transport // Close releases its idle connections
}

// NewUpstream returns the upstream of a backend of type backend, calling
// through configured, or through a client with its own transport, and
// sending the extra headers.
// Concurrent runs to one upstream each hold a connection: the transport
// keeps 256 per host for reuse rather than the default two; a read takes
// up to ReadBufSize, so a burst is decoded, and written on, at once.
func NewUpstream(backend string, configured *http.Client, headers map[string]string) *Upstream {
	if configured != nil {
		return &Upstream{Backend: backend, Client: configured, Headers: headers}
	}
	own := http.DefaultTransport.(*http.Transport).Clone()
	own.MaxIdleConns, own.MaxIdleConnsPerHost = 256, 256 // the clone's total is 100
	own.ReadBufferSize = ReadBufSize
	// The inspector records a captured run's upstream exchange through
	// the wrapper (internal/wiretap); one atomic load while it is off.
	return &Upstream{Backend: backend, Client: &http.Client{Transport: wiretap.Transport(own)}, Headers: headers, own: own}
}

// Close releases the idle connections of the upstream's own transport.
func (u *Upstream) Close() error {
	if u.own != nil {
		u.own.CloseIdleConnections()
	}
	return nil
}

// Post sends body to target with the headers header sets, then the
// extra ones, within ctx
// (the run's, with the backend's timeout), and returns the response when
// its status is 2xx. A request that got no response fails as
// TransportError says; another status with what httpError reads from the
// response (whose body Post then closes).
func (u *Upstream) Post(ctx context.Context, target string, body []byte, header func(http.Header),
	httpError func(*http.Response) *canonical.Error) (*http.Response, *canonical.Error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "%s backend: %v", u.Backend, err)
	}
	header(req.Header)
	u.SetHeaders(req.Header)
	tracing.ToHTTP(ctx, req.Header) // the run's trace continues upstream
	resp, err := u.Client.Do(req)
	if err != nil {
		return nil, u.TransportError(ctx, http.MethodPost, target, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ce := httpError(resp)
		resp.Body.Close()
		return nil, ce
	}
	return resp, nil
}

// SetHeaders sets the extra headers on h.
func (u *Upstream) SetHeaders(h http.Header) {
	for k, v := range u.Headers {
		h.Set(k, v)
	}
}

// TransportError is the error of a request (method, to target) that got
// no response: the context's, when we cancelled it or its time ran out,
// else unavailable. Called before the context is cancelled, so that our
// cancellation is told from the upstream's failure. The upstream's
// address stays in the cause, for the log: a client is told what failed,
// not where our upstreams are.
func (u *Upstream) TransportError(ctx context.Context, method, target string, err error) *canonical.Error {
	if ctx.Err() != nil {
		return canonical.AsError(ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its URL is not redacted
	}
	return canonical.Unreachable(u.Backend, fmt.Errorf("%s %s: %w", method, Redacted(target, u.Backend), err))
}

// Redacted is raw, a URL, without its credentials, for causes and logs;
// fallback when raw is not a URL.
func Redacted(raw, fallback string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return fallback
}
