package glide

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/wiretap"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// BackendConfig configures a client of one upstream Glide router. Zero
// fields take the documented defaults; no setting disables a limit.
type BackendConfig struct {
	// URL is the router's chatStream endpoint,
	// ws[s]://host/v1/language/<router>/chatStream. Required.
	URL string `yaml:"url"`
	// Headers are sent with the WebSocket handshake (an upstream's
	// credentials).
	Headers map[string]string `yaml:"headers"`
	// DialTimeout bounds connecting and the WebSocket handshake. Default 10s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// MaxMessageBytes bounds one response frame; a larger one closes the
	// connection with 1009 and fails the requests on it.
	// Default 4 MiB.
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
	// Connections is the size of the pool of WebSockets to the router:
	// each request goes to the connection with the fewest requests in
	// flight, and a connection is dialled only when every open one is
	// busier than an unopened one. Connections stay open between requests
	// (GEP-8) and are dialled again after they are lost. Default 4.
	Connections int `yaml:"connections"`
	// MaxInFlight bounds the requests multiplexed on each connection at
	// once; one more when every connection is full fails with
	// resource_exhausted. Default 256.
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxBufferedFrames bounds the frames received for one request and not
	// yet consumed by its run; a run that lets it fill fails with
	// resource_exhausted (the connection's reader never waits for one
	// request). Default 1024.
	MaxBufferedFrames int `yaml:"max_buffered_frames"`
	// IdleTimeout fails a request that receives no frame for this long
	// (Glide sends nothing more when a provider stream ends without a
	// finish reason). Default 5m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// SendQueue is how many request frames may wait for the writer.
	// Default 256.
	SendQueue int `yaml:"send_queue"`
	// WriteTimeout bounds each frame write. Default 10s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// PingInterval is how often the client pings. Default 30s.
	PingInterval time.Duration `yaml:"ping_interval"`
	// SendCancel sends the Interlingua cancel frame {"id": ..., "cancel":
	// true} when a run is cancelled before its end. Set it only when the
	// upstream is Interlingua: Glide 0.1.0-rc.1 crashes on a frame without
	// a message. Default false.
	SendCancel bool `yaml:"send_cancel"`
	// Logger receives connection records (never payloads). Default discards.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports every bad field, each named.
func (c BackendConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, canonical.Errorf(canonical.CodeInvalidArgument, format, args...))
	}
	if c.URL == "" {
		bad("url: required (ws://host/v1/language/<router>/chatStream)")
	} else if u, err := url.Parse(c.URL); err != nil {
		bad("url: %v", err)
	} else if (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		bad("url: %q must be ws:// or wss:// with a host", c.URL)
	}
	for name, v := range map[string]int64{
		"dial_timeout": int64(c.DialTimeout), "max_message_bytes": c.MaxMessageBytes,
		"connections": int64(c.Connections), "max_in_flight": int64(c.MaxInFlight), "max_buffered_frames": int64(c.MaxBufferedFrames),
		"idle_timeout": int64(c.IdleTimeout), "send_queue": int64(c.SendQueue),
		"write_timeout": int64(c.WriteTimeout), "ping_interval": int64(c.PingInterval),
	} {
		if v < 0 {
			bad("%s: must not be negative (zero means the default)", name)
		}
	}
	return errors.Join(errs...)
}

func (c BackendConfig) withDefaults() BackendConfig {
	c.DialTimeout = cmp.Or(c.DialTimeout, 10*time.Second)
	c.MaxMessageBytes = cmp.Or(c.MaxMessageBytes, 4<<20)
	c.Connections = cmp.Or(c.Connections, 4)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, 256)
	c.MaxBufferedFrames = cmp.Or(c.MaxBufferedFrames, 1024)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 5*time.Minute)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Backend is a client of one upstream Glide router: every run is a request
// multiplexed, under an id of its own, on one of a pool of WebSockets (the
// one with the fewest requests in flight), each dialled when first needed
// and again after it is lost. It implements canonical.Backend.
type Backend struct {
	cfg   BackendConfig
	ids   atomic.Uint64
	slots []*slot // Connections of them

	mu     sync.Mutex // guards each slot's up, and closed
	closed bool
}

// slot is one connection of the pool: the live one, if any, and the
// requests assigned to it (in flight, or starting while it is dialled).
type slot struct {
	dial chan struct{} // one dial at a time
	load atomic.Int64
	up   *upstream // nil until dialled; guarded by Backend.mu
}

// NewBackend returns a backend for cfg.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg.withDefaults()}
	b.slots = make([]*slot, b.cfg.Connections)
	for i := range b.slots {
		b.slots[i] = &slot{dial: make(chan struct{}, 1)}
	}
	return b, nil
}

// Close closes every connection (in-flight runs fail with unavailable)
// and waits for their readers; Start fails afterwards.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	var ups []*upstream
	for _, sl := range b.slots {
		if sl.up != nil {
			ups = append(ups, sl.up)
			sl.up = nil
		}
	}
	b.mu.Unlock()
	for _, u := range ups {
		u.close()
	}
	return nil
}

var errBackendClosed = canonical.Errorf(canonical.CodeUnavailable, "glide backend closed")

// Start implements canonical.Backend: it sends the request frame and
// returns the run's stream. Errors before the frame is sent (no text
// input, upstream unreachable, unknown router, MaxInFlight) return here.
func (b *Backend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	id := "il-" + strconv.FormatUint(b.ids.Add(1), 10)
	frame, err := encodeRequest(id, req)
	if err != nil {
		return nil, err
	}
	sl := b.pick()
	u, err := b.connect(ctx, sl)
	if err != nil {
		sl.load.Add(-1)
		return nil, err
	}
	c, err := u.register(id, wiretap.TapFrom(ctx))
	if err != nil {
		sl.load.Add(-1)
		return nil, err
	}
	c.tap.Sent(frame)
	if err := u.ws.SendText(frame); err != nil {
		u.remove(id)
		sl.load.Add(-1)
		return nil, canonical.Errorf(canonical.CodeUnavailable, "sending to upstream Glide: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{b: b, sl: sl, u: u, c: c, ctx: ctx, cancel: cancel, idle: time.NewTimer(b.cfg.IdleTimeout)}
	s.dec, s.pending = newResponseDecoder(nil)
	return s, nil
}

// pick assigns a request to the slot with the fewest requests, preferring
// an open connection to an unopened one at the same load, and counts it
// there; the caller gives it back (load.Add(-1)) when the request ends or
// fails to start.
func (b *Backend) pick() *slot {
	b.mu.Lock()
	defer b.mu.Unlock()
	best := b.slots[0]
	for _, sl := range b.slots[1:] {
		if l, bl := sl.load.Load(), best.load.Load(); l < bl || (l == bl && sl.up != nil && best.up == nil) {
			best = sl
		}
	}
	best.load.Add(1)
	return best
}

// connect returns slot sl's live connection, dialling it if needed.
func (b *Backend) connect(ctx context.Context, sl *slot) (*upstream, error) {
	select {
	case sl.dial <- struct{}{}:
	case <-ctx.Done():
		return nil, canonical.AsError(ctx.Err())
	}
	defer func() { <-sl.dial }()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errBackendClosed
	}
	if u := sl.up; u != nil && u.alive() {
		b.mu.Unlock()
		return u, nil
	}
	b.mu.Unlock()

	dctx, cancel := context.WithTimeout(ctx, b.cfg.DialTimeout)
	defer cancel()
	d := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: b.cfg.DialTimeout}
	var h http.Header
	for k, v := range b.cfg.Headers {
		if h == nil {
			h = http.Header{}
		}
		h.Set(k, v)
	}
	ws, resp, err := d.DialContext(dctx, b.cfg.URL, h)
	if err != nil {
		return nil, handshakeError(ctx, b.cfg.URL, resp, err)
	}
	u := &upstream{b: b, calls: map[string]*call{}, done: make(chan struct{})}
	u.ws = wsconn.New(ws, wsconn.Config{
		MaxMessageBytes: b.cfg.MaxMessageBytes,
		SendQueue:       b.cfg.SendQueue,
		WriteTimeout:    b.cfg.WriteTimeout,
		PingInterval:    b.cfg.PingInterval,
		Logger:          b.cfg.Logger,
	})
	go u.readLoop()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		u.close()
		return nil, errBackendClosed
	}
	sl.up = u
	b.mu.Unlock()
	b.cfg.Logger.Debug("glide upstream connected", "url", b.cfg.URL)
	return u, nil
}

// handshakeError is the canonical error of a failed dial: Glide's HTTP
// error body {"name","message"} when there is one (404 router_not_found),
// else unavailable.
func handshakeError(ctx context.Context, u string, resp *http.Response, err error) *canonical.Error {
	if ctx.Err() != nil {
		return canonical.AsError(ctx.Err())
	}
	if resp == nil {
		return canonical.Unreachable("glide", fmt.Errorf("dialling %s: %w", u, err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var e struct{ Name, Message string }
	if json.Unmarshal(body, &e, responseOptions) == nil && e.Name != "" {
		code, msg := codeOf(e.Name, e.Message)
		return canonical.WireError(code, fmt.Sprintf("upstream Glide %s: %s (HTTP %d)", u, msg, resp.StatusCode))
	}
	return canonical.Errorf(canonical.CodeUnavailable, "upstream Glide %s refused the WebSocket upgrade: HTTP %d", u, resp.StatusCode)
}

// upstream is one connection of the pool: a reader goroutine (readLoop) routes
// response frames by id to the calls in flight; requests are written by
// the wsconn writer.
type upstream struct {
	b    *Backend
	ws   *wsconn.Conn
	done chan struct{} // closed when readLoop has returned

	mu    sync.Mutex
	calls map[string]*call
	err   *canonical.Error // why the connection ended; nil while alive
}

// call is one request in flight on an upstream.
type call struct {
	id string
	// tap records the call's frames for the inspector (the zero Tap: the
	// run is not captured); the connection is shared, so the transport
	// cannot.
	tap    wiretap.Tap
	frames chan delivery // buffered, MaxBufferedFrames
	failed chan struct{} // closed when err is set
	err    *canonical.Error
	once   sync.Once
}

// delivery is one frame for a call, or why it could not be decoded.
type delivery struct {
	f   *responseFrame
	err error
}

func (c *call) fail(err *canonical.Error) {
	c.once.Do(func() {
		c.err = err
		close(c.failed)
	})
}

func (u *upstream) alive() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err == nil
}

func (u *upstream) register(id string, tap wiretap.Tap) (*call, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err != nil {
		return nil, u.err
	}
	if len(u.calls) >= u.b.cfg.MaxInFlight {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "too many requests in flight to upstream Glide (max_in_flight %d)", u.b.cfg.MaxInFlight)
	}
	c := &call{id: id, tap: tap, frames: make(chan delivery, u.b.cfg.MaxBufferedFrames), failed: make(chan struct{})}
	u.calls[id] = c
	return c, nil
}

// remove forgets a call; it reports whether the call was in flight.
func (u *upstream) remove(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.calls[id]
	delete(u.calls, id)
	return ok
}

// close ends the connection and waits for the reader.
func (u *upstream) close() {
	_ = u.ws.Close(wsconn.CloseNormal, "")
	<-u.done
}

// readLoop reads response frames until the connection ends, then fails
// every call still in flight.
func (u *upstream) readLoop() {
	defer close(u.done)
	log := u.b.cfg.Logger
	for {
		_, data, err := u.ws.Read(context.Background())
		if err != nil {
			u.end(err)
			return
		}
		f, derr := decodeResponse(data)
		if f == nil || f.ID == "" {
			log.Warn("glide upstream sent a frame without an id; dropped", "err", derr)
			continue
		}
		u.mu.Lock()
		c := u.calls[f.ID]
		u.mu.Unlock()
		if c == nil {
			log.Debug("glide upstream frame for a request no longer in flight; dropped", "id", f.ID)
			continue
		}
		c.tap.Received(data)
		select {
		case c.frames <- delivery{f: f, err: derr}:
		default:
			u.remove(f.ID)
			c.fail(canonical.Errorf(canonical.CodeResourceExhausted,
				"more than %d frames from upstream Glide wait for this run (max_buffered_frames)", u.b.cfg.MaxBufferedFrames))
		}
	}
}

// end marks the connection dead and fails its calls.
func (u *upstream) end(err error) {
	ce := canonical.Errorf(canonical.CodeUnavailable, "connection to upstream Glide lost: %v", err)
	if code := wsconn.CloseCode(err); code != 0 {
		ce = canonical.Errorf(canonical.CodeUnavailable, "upstream Glide closed the connection (close code %d): %v", code, err)
	}
	if errors.Is(err, wsconn.ErrClosed) {
		ce = errBackendClosed
	}
	u.mu.Lock()
	u.err = ce
	calls := u.calls
	u.calls = map[string]*call{}
	u.mu.Unlock()
	for _, c := range calls {
		c.fail(ce)
	}
	u.b.cfg.Logger.Debug("glide upstream connection ended", "url", u.b.cfg.URL, "err", err)
}

// stream is one run: the call's frames through a responseDecoder.
type stream struct {
	b      *Backend
	sl     *slot
	u      *upstream
	c      *call
	ctx    context.Context
	cancel context.CancelFunc
	idle   *time.Timer

	dec     *responseDecoder
	pending []*canonical.Event
	next    int
	ended   atomic.Bool
	once    sync.Once
	removed bool // whether release found the call in flight; set in once
}

// Recv implements canonical.Stream.
func (s *stream) Recv() (*canonical.Event, error) {
	for s.next == len(s.pending) {
		if s.dec.Ended() {
			s.finish()
			return nil, io.EOF
		}
		s.pending, s.next = s.step(s.pending[:0]), 0
	}
	ev := s.pending[s.next]
	s.pending[s.next] = nil
	s.next++
	return ev, nil
}

// step waits for the next frame, failure, cancellation or idle timeout and
// appends the events it produces. Frames already received are consumed
// before a failure of the connection is reported.
func (s *stream) step(out []*canonical.Event) []*canonical.Event {
	select {
	case d := <-s.c.frames:
		return s.frame(out, d)
	default:
	}
	s.idle.Reset(s.b.cfg.IdleTimeout)
	select {
	case d := <-s.c.frames:
		return s.frame(out, d)
	case <-s.c.failed:
		select {
		case d := <-s.c.frames:
			return s.frame(out, d)
		default:
		}
		return s.dec.End(out, canonical.StatusFailed, s.c.err)
	case <-s.ctx.Done():
		err := canonical.AsError(s.ctx.Err())
		if err.Code == canonical.CodeCanceled {
			return s.dec.End(out, canonical.StatusCancelled, err)
		}
		return s.dec.End(out, canonical.StatusFailed, err)
	case <-s.idle.C:
		return s.dec.End(out, canonical.StatusFailed, canonical.Errorf(canonical.CodeDeadlineExceeded,
			"no frame from upstream Glide for %s (idle_timeout)", s.b.cfg.IdleTimeout))
	}
}

func (s *stream) frame(out []*canonical.Event, d delivery) []*canonical.Event {
	if d.err != nil {
		return s.dec.End(out, canonical.StatusFailed, canonical.AsError(d.err))
	}
	return s.dec.Frame(out, d.f)
}

// finish forgets the call once the run has ended.
func (s *stream) finish() {
	s.ended.Store(true)
	s.release()
}

// release forgets the call and gives its place in the pool back, once;
// it reports whether the call was still in flight.
func (s *stream) release() bool {
	s.once.Do(func() {
		s.idle.Stop()
		s.removed = s.u.remove(s.c.id)
		s.sl.load.Add(-1)
	})
	return s.removed
}

// Close implements canonical.Stream: it cancels the run if it has not
// ended, forgets the call (later frames for its id are dropped) and, when
// SendCancel is set, tells the upstream.
func (s *stream) Close() error {
	s.cancel()
	if s.ended.Load() || !s.release() {
		return nil
	}
	if s.b.cfg.SendCancel {
		b, _ := json.Marshal(wireCancel{ID: s.c.id, Cancel: true}, writeOptions...)
		s.c.tap.Sent(b)
		_ = s.u.ws.SendText(b)
	}
	return nil
}
