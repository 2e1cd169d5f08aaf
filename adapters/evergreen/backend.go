package evergreen

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
	"github.com/interlingua-dev/interlingua/internal/tracing"
	"github.com/interlingua-dev/interlingua/internal/wiretap"
)

// Backend runs canonical Requests on an upstream Evergreen server: each run
// is one StartSession stream carrying one GENERATE action, its input tree,
// and the client's half-close. It implements canonical.Backend.
type Backend struct {
	cfg    BackendConfig
	client evergreenv2connect.EvergreenServiceClient
}

// NewBackend returns a backend; cfg is validated and its zero fields take
// their defaults.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	hc := cfg.HTTPClient
	if hc == nil {
		u, _ := url.Parse(cfg.URL)
		var p http.Protocols
		if u.Scheme == "http" {
			p.SetUnencryptedHTTP2(true) // h2c with prior knowledge
		} else {
			p.SetHTTP2(true)
		}
		// The inspector records a captured run's session through the
		// wrapper (internal/wiretap); one atomic load while it is off.
		hc = &http.Client{Transport: wiretap.Transport(&http.Transport{Protocols: &p, Proxy: http.ProxyFromEnvironment})}
	}
	opts := []connect.ClientOption{
		connect.WithReadMaxBytes(cfg.MaxMessageBytes),
		connect.WithSendMaxBytes(max(cfg.MaxMessageBytes, 2*cfg.FragmentBytes)),
		connect.WithCompressMinBytes(compressMinBytes),
	}
	if cfg.Protocol == "grpc" {
		opts = append(opts, connect.WithGRPC())
	}
	return &Backend{cfg: cfg, client: evergreenv2connect.NewEvergreenServiceClient(tapClient{hc}, strings.TrimSuffix(cfg.URL, "/"), opts...)}, nil
}

// Start implements canonical.Backend: it sends the action and its input
// tree and half-closes. An upstream that cannot be reached (UNAVAILABLE)
// or that refuses the session before answering fails Start with its code;
// afterwards every outcome arrives as events.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	if len(req.GetResume()) > 0 {
		return nil, canonical.Errorf(canonical.CodeUnimplemented, "evergreen backend: resuming an interrupted run is not supported (Evergreen has no interrupts)")
	}
	if n := len(req.GetTools()); n > 0 {
		b.cfg.Logger.Debug("evergreen backend: GENERATE carries no tools; dropping them", "run", req.GetRunId(), "tools", n)
	}
	target := b.cfg.Target
	if target == "" {
		target = req.GetTarget()
	}
	st := newStore(b.cfg.Limits, false)
	msgs, outs, err := encodeRequest(st, req, target, b.cfg.Outputs, b.cfg.FragmentBytes)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	t := new(tap)
	up := b.client.StartSession(context.WithValue(ctx, tapKey{}, t))
	tracing.ToHTTP(ctx, up.RequestHeader()) // the run's trace continues upstream
	var first *ev.SessionMessage
	for _, m := range msgs {
		if err := up.Send(m); err != nil {
			if errors.Is(err, io.EOF) {
				// The upstream ended the stream, or was never reached:
				// an error status fails Start; a message is an early
				// answer, read by Recv with the rest.
				if first, err = up.Receive(); err == nil {
					break
				}
			}
			cancel()
			_ = up.CloseResponse()
			return nil, fromWire(err)
		}
	}
	if err := up.CloseRequest(); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		_ = up.CloseResponse()
		return nil, fromWire(err)
	}
	s := &stream{up: up, cancel: cancel, tap: t, st: st, first: first, dec: newOutputDecoder(outs, b.cfg.Outputs, b.cfg.MaxToolChunkBytes)}
	s.out = s.dec.b.Lifecycle(s.out, canonical.StatusRunning)
	return s, nil
}

// stream is one run on the upstream. Recv receives from the upstream on
// the caller's goroutine; no goroutine runs behind it.
type stream struct {
	up     *connect.BidiStreamForClient[ev.SessionMessage, ev.SessionMessage]
	cancel context.CancelFunc
	tap    *tap
	st     *store
	dec    *outputDecoder
	// out[next:] are the events decoded and not yet returned. The array is
	// kept from message to message: taking events off its front
	// (out = out[1:]) left none of it for the next message's events, an
	// allocation per delta.
	out      []*canonical.Event
	next     int
	first    *ev.SessionMessage // received by Start, not yet decoded
	received bool               // a Receive returned: the response is ready
	closed   bool
}

// Recv implements canonical.Stream.
func (s *stream) Recv() (*canonical.Event, error) {
	if s.next == len(s.out) {
		s.out, s.next = s.out[:0], 0
	}
	for len(s.out) == 0 {
		if s.dec.b.Ended() {
			s.release()
			return nil, io.EOF
		}
		s.receive()
	}
	e := s.out[s.next]
	s.out[s.next] = nil
	s.next++
	return e, nil
}

// Buffered implements canonical.Buffered. The messages whose bytes are
// all in the response body's buffer are received and decoded now, since
// that does not wait on the upstream, and their events counted with those
// not yet returned: a burst of messages that came in one read is one
// burst of events, which a frontend writes at once, and the bridge needs
// no goroutine reading ahead of the stream (a hand-off per message).
func (s *stream) Buffered() int {
	if s.next == len(s.out) {
		s.out, s.next = s.out[:0], 0
	}
	for !s.dec.b.Ended() && (s.first != nil || s.received && s.tap.whole()) {
		s.receive()
	}
	return len(s.out) - s.next
}

// receive receives one message and decodes its events into s.out, or
// ends the run on a failure.
func (s *stream) receive() {
	m, err := s.first, error(nil)
	if m == nil {
		m, err = s.up.Receive()
	}
	s.first = nil
	if err != nil {
		s.end(err)
		return
	}
	s.received = true
	if len(m.GetActions()) > 0 {
		s.fail(canonical.Errorf(canonical.CodeUnimplemented,
			"evergreen upstream sent an action (%q); a client does not run actions", m.GetActions()[0].GetName()))
		return
	}
	if s.out, err = s.dec.feed(s.st, m, s.out); err != nil {
		s.fail(err)
		return
	}
	if s.dec.complete() {
		s.out = s.dec.b.End(s.out, canonical.StatusCompleted, nil)
		s.release()
	}
}

// end handles the end of the upstream stream: OK with every output
// complete (an upstream that closes only after the outputs), or a failure.
func (s *stream) end(err error) {
	if errors.Is(err, io.EOF) {
		s.out, _ = s.dec.advance(s.out)
		if s.dec.complete() {
			s.out = s.dec.b.End(s.out, canonical.StatusCompleted, nil)
		} else {
			s.fail(canonical.Errorf(canonical.CodeInternal,
				"evergreen upstream ended the session before output %q was complete", s.dec.incomplete()))
		}
		s.release()
		return
	}
	ce := fromWire(err)
	if ce.Code == canonical.CodeCanceled {
		s.out = s.dec.b.End(s.out, canonical.StatusCancelled, ce)
	} else {
		s.fail(ce)
	}
	s.release()
}

func (s *stream) fail(err error) {
	s.out = s.dec.b.End(s.out, canonical.StatusFailed, canonical.AsError(err))
	s.release()
}

// release ends the upstream stream once.
func (s *stream) release() {
	if s.closed {
		return
	}
	s.closed = true
	s.cancel()
	_ = s.up.CloseResponse()
}

// Close implements canonical.Stream: it cancels the upstream stream, which
// unblocks a Recv in progress.
func (s *stream) Close() error {
	s.cancel()
	return nil
}

// tapClient hands each run's stream the response body connect-go reads
// (through the request's context), behind a buffer the stream can look
// into: see stream.Buffered.
type tapClient struct{ connect.HTTPClient }

type tapKey struct{}

// tapBufferBytes is the response body's buffer: a read takes up to this
// much of what the upstream has sent (some 60 text deltas).
const tapBufferBytes = 4 << 10

func (c tapClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.HTTPClient.Do(req)
	if t, ok := req.Context().Value(tapKey{}).(*tap); ok && err == nil {
		b := &tappedBody{Reader: bufio.NewReaderSize(resp.Body, tapBufferBytes), Closer: resp.Body}
		resp.Body = b
		t.body.Store(b)
	}
	return resp, err
}

// tap is where a run's response body is left for its stream; Do stores it
// on connect-go's goroutine, the stream loads it on its own.
type tap struct{ body atomic.Pointer[tappedBody] }

// whole reports whether the next enveloped message (gRPC and Connect
// streams both frame each message with a flags byte and a big-endian
// 4-byte length) is entirely in the body's buffer, so that receiving it
// reads nothing from the connection.
func (t *tap) whole() bool {
	b := t.body.Load()
	return b != nil && b.whole()
}

type tappedBody struct {
	*bufio.Reader
	io.Closer
}

func (b *tappedBody) whole() bool {
	n := b.Buffered()
	if n < 5 {
		return false
	}
	p, _ := b.Peek(5) // buffered: Peek does not read
	return uint64(n-5) >= uint64(binary.BigEndian.Uint32(p[1:5]))
}
