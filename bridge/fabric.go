package bridge

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/metrics"
)

// Names of the JetStream assets the fabric owns.
const (
	EventsStream  = "INTERLINGUA_EVENTS"
	ThreadsBucket = "interlingua_threads"
)

// Fabric is the NATS side of an instance: an embedded nats-server (with
// JetStream in the data folder) unless an external URL is configured, one
// connection, the replay stream over <prefix>.events.> and the thread KV
// bucket.
type Fabric struct {
	cfg      NATSConfig
	log      *slog.Logger
	embedded *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	kv       jetstream.KeyValue

	pubq      chan pubMsg
	stop      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once
	published atomic.Uint64
	dropped   atomic.Uint64
}

// StartFabric starts (or joins) NATS and ensures the JetStream assets.
func StartFabric(ctx context.Context, cfg NATSConfig, dataDir string, log *slog.Logger) (*Fabric, error) {
	f := &Fabric{cfg: cfg, log: log, pubq: make(chan pubMsg, cfg.PublishQueue), stop: make(chan struct{})}
	url := cfg.URL
	opts := []nats.Option{
		nats.Name("interlingua"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.Timeout(cfg.ConnectTimeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil on a deliberate Close
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
		nats.ReconnectBufSize(cfg.ReconnectBufferBytes),
	}
	sec, err := natsSecurity(cfg)
	if err != nil {
		return nil, err
	}
	opts = append(opts, sec...)
	if url == "" {
		ns, err := startEmbedded(cfg, dataDir)
		if err != nil {
			return nil, err
		}
		f.embedded = ns
		if cfg.EmbeddedListen == "" {
			opts = append(opts, nats.InProcessServer(ns))
		} else {
			url = ns.ClientURL()
		}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("nats: connect %s: %w", redact(url), err)
	}
	f.nc = nc
	if err := f.ensureAssets(ctx); err != nil {
		f.Close()
		return nil, err
	}
	f.loopDone = make(chan struct{})
	go f.publishLoop()
	return f, nil
}

func startEmbedded(cfg NATSConfig, dataDir string) (*server.Server, error) {
	o := &server.Options{
		ServerName: "interlingua-embedded",
		JetStream:  true,
		StoreDir:   filepath.Join(dataDir, "nats"),
		NoSigs:     true,
		NoLog:      true,
		DontListen: cfg.EmbeddedListen == "",
	}
	if cfg.EmbeddedListen != "" {
		host, port, err := net.SplitHostPort(cfg.EmbeddedListen)
		if err != nil {
			return nil, fmt.Errorf("nats.embedded_listen: %w", err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("nats.embedded_listen: bad port %q", port)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		}
		o.Host, o.Port = host, p
	}
	ns, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("nats: embedded server: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("nats: embedded server not ready within 10s")
	}
	return ns, nil
}

func (f *Fabric) ensureAssets(ctx context.Context) error {
	js, err := jetstream.New(f.nc)
	if err != nil {
		return fmt.Errorf("nats: jetstream: %w", err)
	}
	f.js = js
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:      EventsStream,
		Subjects:  []string{f.cfg.SubjectPrefix + ".events.>"},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy,
		Discard:   jetstream.DiscardOld,
		MaxAge:    f.cfg.ReplayMaxAge,
		MaxBytes:  f.cfg.ReplayMaxBytes,
	})
	if err != nil {
		return fmt.Errorf("nats: replay stream %s: %w", EventsStream, err)
	}
	f.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ThreadsBucket, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		return fmt.Errorf("nats: thread bucket %s: %w", ThreadsBucket, err)
	}
	return nil
}

// EmbeddedURL is the embedded server's client URL, or "" when the server
// is external or not listening.
func (f *Fabric) EmbeddedURL() string {
	if f.embedded == nil || f.cfg.EmbeddedListen == "" {
		return ""
	}
	return f.embedded.ClientURL()
}

// Conn returns the NATS connection.
func (f *Fabric) Conn() *nats.Conn { return f.nc }

// JetStream returns the JetStream context.
func (f *Fabric) JetStream() jetstream.JetStream { return f.js }

// Threads returns the thread-state KV bucket.
func (f *Fabric) Threads() jetstream.KeyValue { return f.kv }

// Prefix returns the subject prefix.
func (f *Fabric) Prefix() string { return f.cfg.SubjectPrefix }

// Ready reports whether the NATS connection is up.
func (f *Fabric) Ready() bool { return f.nc != nil && f.nc.IsConnected() }

// EventSubject is the subject of a run's events.
func (f *Fabric) EventSubject(thread, run string) string {
	return f.cfg.SubjectPrefix + ".events." + SubjectToken(thread) + "." + SubjectToken(run)
}

// PublishEvent queues ev for publishing on its events subject, for
// observers, remote clients and replay. With must false it never blocks:
// when the bounded queue is full the event is counted as dropped and
// logged. With must true (the event is some client's only copy: a run owned
// for another instance) it waits for room; the queue always drains, since
// nats.go buffers (bounded) rather than blocks while reconnecting.
func (f *Fabric) PublishEvent(ev *canonical.Event, must bool) {
	data, err := proto.Marshal(ev)
	if err != nil {
		f.drop(ev, err)
		return
	}
	m := pubMsg{subject: f.EventSubject(ev.GetThreadId(), ev.GetRunId()), data: data}
	select {
	case f.pubq <- m:
		return
	default:
	}
	if !must {
		f.drop(ev, errors.New("publish queue full"))
		return
	}
	select {
	case f.pubq <- m:
	case <-f.stop:
		f.drop(ev, errors.New("fabric closed"))
	}
}

// Publish queues a raw message (heartbeats, commands); it never blocks.
func (f *Fabric) Publish(subject string, data []byte) {
	select {
	case f.pubq <- pubMsg{subject: subject, data: data}:
	default:
		f.dropped.Add(1)
	}
}

type pubMsg struct {
	subject string
	data    []byte
}

func (f *Fabric) drop(ev *canonical.Event, err error) {
	n := f.dropped.Add(1)
	if n == 1 || n%1000 == 0 {
		f.log.Warn("event not published", "thread", ev.GetThreadId(), "run", ev.GetRunId(), "err", err, "dropped", n)
	}
}

// publishLoop is the fabric's only publisher: it drains the queue into the
// NATS connection, which buffers and flushes on its own goroutine.
func (f *Fabric) publishLoop() {
	defer close(f.loopDone)
	for {
		select {
		case m := <-f.pubq:
			f.send(m)
		case <-f.stop:
			for { // drain what was queued before Close
				select {
				case m := <-f.pubq:
					f.send(m)
				default:
					return
				}
			}
		}
	}
}

func (f *Fabric) send(m pubMsg) {
	if err := f.nc.Publish(m.subject, m.data); err != nil {
		n := f.dropped.Add(1)
		if n == 1 || n%1000 == 0 {
			f.log.Warn("publish failed", "subject", m.subject, "err", err, "dropped", n)
		}
		return
	}
	f.published.Add(1)
	metrics.PublishedBytes.Add(float64(len(m.data)))
}

// Published counts messages handed to NATS.
func (f *Fabric) Published() uint64 { return f.published.Load() }

// Dropped counts events that could not be published: queue overflow,
// NATS reconnect buffer overflow, or shutdown.
func (f *Fabric) Dropped() uint64 { return f.dropped.Load() }

// LastSeq returns the highest canonical seq of a thread in the replay log
// (0 when it has none).
func (f *Fabric) LastSeq(ctx context.Context, thread string) (uint64, error) {
	st, err := f.js.Stream(ctx, EventsStream)
	if err != nil {
		return 0, err
	}
	m, err := st.GetLastMsgForSubject(ctx, f.cfg.SubjectPrefix+".events."+SubjectToken(thread)+".*")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	ev := &canonical.Event{}
	if err := proto.Unmarshal(m.Data, ev); err != nil {
		return 0, fmt.Errorf("replay log message %d: %w", m.Sequence, err)
	}
	return ev.GetSeq(), nil
}

// Close publishes what is queued, flushes and closes the connection, then
// stops the embedded server.
func (f *Fabric) Close() {
	f.closeOnce.Do(func() {
		close(f.stop)
		if f.loopDone != nil {
			<-f.loopDone
		}
	})
	if f.nc != nil {
		_ = f.nc.FlushTimeout(2 * time.Second)
		f.nc.Close()
	}
	if f.embedded != nil {
		f.embedded.Shutdown()
		f.embedded.WaitForShutdown()
	}
}

// SubjectToken makes s safe as one NATS subject token: ids made of
// [A-Za-z0-9_-] pass unchanged; anything else is "~" + base64url(s).
func SubjectToken(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "~" + base64.RawURLEncoding.EncodeToString([]byte(s))
		}
	}
	if s == "" {
		return "~"
	}
	return s
}

func redact(url string) string {
	if url == "" {
		return "(embedded)"
	}
	return url
}
