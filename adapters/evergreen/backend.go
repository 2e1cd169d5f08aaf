package evergreen

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
	"github.com/interlingua-dev/interlingua/internal/tracing"
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
		hc = &http.Client{Transport: &http.Transport{Protocols: &p, Proxy: http.ProxyFromEnvironment}}
	}
	opts := []connect.ClientOption{
		connect.WithReadMaxBytes(cfg.MaxMessageBytes),
		connect.WithSendMaxBytes(max(cfg.MaxMessageBytes, 2*cfg.FragmentBytes)),
		connect.WithCompressMinBytes(compressMinBytes),
	}
	if cfg.Protocol == "grpc" {
		opts = append(opts, connect.WithGRPC())
	}
	return &Backend{cfg: cfg, client: evergreenv2connect.NewEvergreenServiceClient(hc, strings.TrimSuffix(cfg.URL, "/"), opts...)}, nil
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
	up := b.client.StartSession(ctx)
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
	s := &stream{up: up, cancel: cancel, st: st, first: first, dec: newOutputDecoder(outs, b.cfg.Outputs, b.cfg.MaxToolChunkBytes)}
	s.out = s.dec.b.Lifecycle(s.out, canonical.StatusRunning)
	return s, nil
}

// stream is one run on the upstream. Recv receives from the upstream on
// the caller's goroutine; no goroutine runs behind it.
type stream struct {
	up     *connect.BidiStreamForClient[ev.SessionMessage, ev.SessionMessage]
	cancel context.CancelFunc
	st     *store
	dec    *outputDecoder
	// out[next:] are the events decoded and not yet returned. The array is
	// kept from message to message: taking events off its front
	// (out = out[1:]) left none of it for the next message's events, an
	// allocation per delta.
	out    []*canonical.Event
	next   int
	first  *ev.SessionMessage // received by Start, not yet decoded
	closed bool
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
		m, err := s.first, error(nil)
		if m == nil {
			m, err = s.up.Receive()
		}
		s.first = nil
		if err != nil {
			s.end(err)
			continue
		}
		if len(m.GetActions()) > 0 {
			s.fail(canonical.Errorf(canonical.CodeUnimplemented,
				"evergreen upstream sent an action (%q); a client does not run actions", m.GetActions()[0].GetName()))
			continue
		}
		if s.out, err = s.dec.feed(s.st, m, s.out); err != nil {
			s.fail(err)
			continue
		}
		if s.dec.complete() {
			s.out = s.dec.b.End(s.out, canonical.StatusCompleted, nil)
			s.release()
		}
	}
	e := s.out[s.next]
	s.out[s.next] = nil
	s.next++
	return e, nil
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
