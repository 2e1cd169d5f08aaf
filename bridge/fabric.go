package bridge

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// Names of the JetStream assets the fabric owns.
const (
	EventsStream  = "INTERLINGUA_EVENTS"
	ThreadsBucket = "interlingua_threads"
)

// Fabric is the NATS side of an instance: an embedded nats-server (with
// JetStream in the data folder) unless an external URL is configured, one
// connection, the replay stream over <prefix>.events.>, the thread-owner
// KV bucket and the thread store.
type Fabric struct {
	// connectedAt is when nc last connected (unix nanoseconds): silence
	// heard across a reconnect is the connection's, not a run owner's.
	connectedAt atomic.Int64
	cfg         NATSConfig
	log         *slog.Logger
	embedded    *server.Server
	dirLock     *os.File // the data dir's lock, held while the embedded server runs
	nc          *nats.Conn
	url         string        // what nc connected to
	opts        []nats.Option // nc's options, for Dial
	js          jetstream.JetStream
	events      jetstream.Stream // the replay stream's handle: its name, for message gets
	kv          jetstream.KeyValue
	leaseKV     jetstream.KeyValue // nil when Alone (lease.go)
	store       *natsThreadStore
	floors      *seqFloors // each thread's last seq, past the log (seqfloor.go)

	pubq      pubQueue
	batcher   batcher       // the publish loop's
	acked     *ackedLog     // event messages sent until the replay log acknowledges them
	acks      chan struct{} // capacity 1: the replay log acknowledged a message
	blocked   bool          // the publish loop's: it left the queue because the log was full
	stop      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once
	published atomic.Uint64
	pubBytes  atomic.Uint64 // bytes of the messages counted in published
	dropped   atomic.Uint64
	// logFetchWait is one fetch's wait in a read of the replay log
	// (logFetchWait; tests shorten it).
	logFetchWait time.Duration
}

// StartFabric starts (or joins) NATS and ensures the JetStream assets.
func StartFabric(ctx context.Context, cfg NATSConfig, dataDir string, log *slog.Logger) (*Fabric, error) {
	f := &Fabric{cfg: cfg, log: log, pubq: pubQueue{max: cfg.PublishQueue, wake: make(chan struct{}, 1), lazy: make(chan struct{}, 1)}, acks: make(chan struct{}, 1), stop: make(chan struct{}), logFetchWait: logFetchWait}
	f.connectedAt.Store(time.Now().UnixNano())
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
		nats.ReconnectHandler(func(c *nats.Conn) {
			f.connectedAt.Store(time.Now().UnixNano())
			log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
		}),
		nats.ReconnectBufSize(cfg.ReconnectBufferBytes),
	}
	sec, err := natsSecurity(cfg)
	if err != nil {
		return nil, err
	}
	opts = append(opts, sec...)
	if url == "" {
		if f.dirLock, err = lockDataDir(dataDir); err != nil {
			return nil, err
		}
		ns, err := startEmbedded(cfg, dataDir)
		if err != nil {
			f.Close()
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
	f.nc, f.url, f.opts = nc, url, opts
	if err := f.ensureAssets(ctx); err != nil {
		f.Close()
		return nil, err
	}
	f.acked, err = newAckedLog(nc, cfg.PublishQueue, f.signalAck, func(n int, err error) {
		f.countDropped(n, "event not stored in the replay log", "err", err)
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	f.acked.filter, f.acked.lastOf = f.ThreadSubjects, f.lastMsgOf
	f.acked.fence = func(thread string, events int) {
		f.log.Warn("thread written by another instance while this one was out of reach: its events here are not stored, its runs here end",
			"thread", thread, "events", events)
	}
	f.loopDone = make(chan struct{})
	go f.publishLoop()
	return f, nil
}

// embeddedMaxPayload is the embedded server's max_payload.
const embeddedMaxPayload = 8 << 20

func startEmbedded(cfg NATSConfig, dataDir string) (*server.Server, error) {
	o := &server.Options{
		ServerName: "interlingua-embedded",
		JetStream:  true,
		StoreDir:   filepath.Join(dataDir, "nats"),
		NoSigs:     true,
		NoLog:      true,
		// An event larger than a NATS message cannot cross instances or
		// reach the replay log: a state snapshot or a finished block can
		// hold a conversation of megabytes. 8 MiB is the most NATS
		// recommends (the default is 1 MiB); an external cluster should
		// set max_payload to match in its server config.
		MaxPayload: embeddedMaxPayload,
		DontListen: cfg.EmbeddedListen == "",
		// With a token every client presents it, the in-process
		// connection included (natsSecurity).
		Authorization: cfg.Token,
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
	sc := jetstream.StreamConfig{
		Name:        EventsStream,
		Subjects:    []string{f.cfg.SubjectPrefix + ".events.>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      f.cfg.ReplayMaxAge,
		MaxBytes:    f.cfg.ReplayMaxBytes,
		Duplicates:  logDuplicates, // see ackedLog
		Replicas:    f.cfg.Replicas,
		PersistMode: f.persistMode(ctx),
		// LastSeq, at the start of every run of a known thread, reads the
		// stream with a direct get: the server answers from the store
		// without the JetStream API's queue and JSON envelope (75-125 µs
		// against 215-280 here, BenchmarkLastSeq). Only with one replica:
		// every replica answers direct gets, and a follower behind its
		// leader would give an older last seq, which the next run would
		// reuse; replicated, the get goes to the leader.
		AllowDirect: f.cfg.Replicas <= 1,
	}
	if f.events, err = js.CreateOrUpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("nats: replay stream %s: %w", EventsStream, err)
	}
	f.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ThreadsBucket, History: 1, Storage: jetstream.FileStorage, Replicas: f.cfg.Replicas})
	if err != nil {
		return fmt.Errorf("nats: thread bucket %s: %w", ThreadsBucket, err)
	}
	f.floors = startSeqFloors(f.kv, f.log)
	if !f.Alone() { // alone, no other instance runs a thread
		if f.leaseKV, err = openLeases(ctx, js, f.cfg.Replicas, leaseTTL(f.cfg.Heartbeat)); err != nil {
			return err
		}
	}
	f.store, err = openThreadStore(ctx, js, f.nc.MaxPayload(), f.cfg, f.log)
	return err
}

// persistMode is the replay stream's persist mode: the configured one,
// unless the stream is replicated (JetStream refuses async mode there), the
// server has no async mode (before 2.12: it would ignore the field) or the
// stream exists with the other mode (JetStream refuses to change it),
// which are logged and kept.
func (f *Fabric) persistMode(ctx context.Context) jetstream.PersistModeType {
	want := jetstream.DefaultPersistMode
	if f.cfg.PersistMode != PersistSync {
		want = jetstream.AsyncPersistMode
	}
	if want == jetstream.AsyncPersistMode && f.cfg.Replicas > 1 {
		f.log.Info("a replicated replay stream has no async persist mode: it is written sync", "replicas", f.cfg.Replicas)
		want = jetstream.DefaultPersistMode
	}
	if v := f.nc.ConnectedServerVersion(); want == jetstream.AsyncPersistMode && !atLeast(v, 2, 12) {
		f.log.Info("nats server has no async persist mode (needs 2.12): the replay log is written sync", "server_version", v)
		return jetstream.DefaultPersistMode
	}
	st, err := f.js.Stream(ctx, EventsStream)
	if err != nil { // not found (created with want), or the create reports it
		return want
	}
	if have := st.CachedInfo().Config.PersistMode; have != want {
		f.log.Warn("replay stream keeps its persist mode: JetStream cannot change it on an existing stream; delete the stream to apply nats.persist_mode",
			"stream", EventsStream, "persist_mode", have.String(), "configured", f.cfg.PersistMode)
		return have
	}
	return want
}

// atLeast reports whether a server version "major.minor.patch[-x]" is at
// least major.minor; an unparsable version is not.
func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimLeft(parts[1], "v"))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// EmbeddedURL is the embedded server's client URL, or "" when the server
// is external or not listening.
func (f *Fabric) EmbeddedURL() string {
	if f.embedded == nil || f.cfg.EmbeddedListen == "" {
		return ""
	}
	return f.embedded.ClientURL()
}

// Alone reports whether this instance can have no peers: its fabric is the
// embedded server, which accepts no connections from other processes
// (nats.embedded_listen unset). What an instance shares only with other
// instances (the agent frontend's thread mirror and command forwarding)
// is then skipped; the replay log and thread records, which the instance
// reads back itself, are not.
func (f *Fabric) Alone() bool { return f.embedded != nil && f.cfg.EmbeddedListen == "" }

// Dial opens another connection to the fabric's NATS with the same
// settings (servers, security, reconnects) and the extra options; the
// caller closes it. The agent frontend mirrors thread events on one with
// NoEcho, so an instance never receives back the events it publishes for
// the others.
func (f *Fabric) Dial(name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append(append(slices.Clip(f.opts), nats.Name(name)), extra...)
	nc, err := nats.Connect(f.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect %s: %w", redact(f.url), err)
	}
	return nc, nil
}

// Conn returns the NATS connection.
func (f *Fabric) Conn() *nats.Conn { return f.nc }

// JetStream returns the JetStream context.
func (f *Fabric) JetStream() jetstream.JetStream { return f.js }

// Threads returns the thread-owner KV bucket (ThreadStore holds thread
// state).
func (f *Fabric) Threads() jetstream.KeyValue { return f.kv }

// ThreadStore returns the durable thread store (thread_ttl,
// thread_max_bytes).
func (f *Fabric) ThreadStore() canonical.ThreadStore { return f.store }

// Prefix returns the subject prefix.
func (f *Fabric) Prefix() string { return f.cfg.SubjectPrefix }

// Ready reports whether the NATS connection is up.
func (f *Fabric) Ready() bool { return f.nc != nil && f.nc.IsConnected() }

// EventSubject is the subject of a run's events.
func (f *Fabric) EventSubject(thread, run string) string {
	return f.cfg.SubjectPrefix + ".events." + subject.Token(thread) + "." + subject.Token(run)
}

// ThreadSubjects is the subject filter of every run's events of thread.
func (f *Fabric) ThreadSubjects(thread string) string {
	return f.cfg.SubjectPrefix + ".events." + subject.Token(thread) + ".*"
}

// PublishEvent queues ev for publishing on its events subject (inside an
// EventBatch), for observers, remote clients and replay. With must false it never blocks:
// when the bounded queue is full the event is counted as dropped and
// logged. With must true (the event is some client's only copy: a run owned
// for another instance) it waits for room; the queue always drains, since
// nats.go buffers (bounded) rather than blocks while reconnecting.
func (f *Fabric) PublishEvent(ev *canonical.Event, must bool) {
	data, _, err := appendBatchElem(nil, batchEventsField, ev)
	if err != nil {
		f.drop(ev, err)
		return
	}
	f.enqueue(pubMsg{subject: f.EventSubject(ev.GetThreadId(), ev.GetRunId()), thread: ev.GetThreadId(), seq: ev.GetSeq(), last: ev.GetSeq(), data: data, events: 1}, must, true)
}

// enqueue queues m; with wake false it leaves waking the publish loop to
// the caller (publisher.queueHeld), unless it has to wait for room.
func (f *Fabric) enqueue(m pubMsg, must, wake bool) {
	for {
		room := f.pubq.push(m, must, wake)
		if room == nil {
			return
		}
		if !must {
			f.dropMsg(m, errors.New("publish queue full"))
			return
		}
		select {
		case <-room:
		case <-f.stop:
			f.dropMsg(m, errors.New("fabric closed"))
			return
		}
	}
}

// pubQueue is the bounded queue between the publishers and publishLoop:
// publishers append under a lock, and the loop takes everything queued at
// once, so a burst costs one wake-up of the loop rather than one per
// message. A publisher that finds it more than half full yields its
// processor (runtime.Gosched, never a wait) so that the loop and the NATS
// server get to run: a run producing faster than NATS stores then slows
// down to the log's pace instead of having events dropped from it, while
// no client ever waits for NATS.
type pubQueue struct {
	mu    sync.Mutex
	msgs  []pubMsg
	spare []pubMsg      // the loop's last batch, for reuse
	max   int           // bound on len(msgs)
	wake  chan struct{} // capacity 1: publish what is queued now
	lazy  chan struct{} // capacity 1: publish it within nats.publish_delay
	room  chan struct{} // closed when the loop takes a batch; nil until someone waits
	quiet int           // batches in a row that fitted in spareKeep (see take)
}

// push queues m, or returns a channel that is closed when the loop has
// made room (the queue is full; with wait false nothing will wait on it).
// With wake it wakes the loop; past half full it always does, and yields.
func (q *pubQueue) push(m pubMsg, wait, wake bool) <-chan struct{} {
	q.mu.Lock()
	if len(q.msgs) >= q.max {
		if !wait {
			q.mu.Unlock()
			return closedChan
		}
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		q.signal()
		return room
	}
	q.msgs = append(q.msgs, m)
	high := len(q.msgs) > q.max/2
	q.mu.Unlock()
	if wake || high {
		q.signal()
	}
	if high {
		runtime.Gosched()
	}
	return nil
}

// signal wakes the publish loop to publish at once (a no-op when such a
// wake-up is pending).
func (q *pubQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// signalLazy wakes the publish loop to publish within the delay.
func (q *pubQueue) signalLazy() {
	select {
	case q.lazy <- struct{}{}:
	default:
	}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// spareKeep is the largest spare array pubQueue keeps for good: a larger
// one, sized for bursts, is let go once spareQuiet batches in a row would
// have fitted in spareKeep. Letting it go at the first such batch made an
// unpaced run, whose batch sizes swing between hundreds and tens of
// thousands, grow a new array from nothing about every tenth batch: a
// sixth of the bytes the bridge allocated per delta.
const (
	spareKeep  = 4096
	spareQuiet = 64
)

// len returns how many messages are queued.
func (q *pubQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

// take returns what is queued and empties the queue.
func (q *pubQueue) take() []pubMsg {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch, spare := q.msgs, q.spare
	if len(batch) > spareKeep || cap(batch) <= spareKeep && cap(spare) <= spareKeep {
		q.quiet = 0 // a burst, or no array sized for one
	} else if q.quiet++; q.quiet >= spareQuiet && cap(spare) > spareKeep {
		spare = nil
	}
	q.msgs, q.spare = spare[:0], nil
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
	return batch
}

// recycle hands a published batch back for reuse. Under sustained load
// the loop takes batches of tens of thousands of messages; growing a new
// array for each was about half the bridge's allocated bytes per delta in
// an unpaced Triton run. So the two arrays alternate while the bursts last
// (see take), bounded by the queue's max.
func (q *pubQueue) recycle(batch []pubMsg) {
	clear(batch)
	q.mu.Lock()
	q.spare = batch[:0]
	q.mu.Unlock()
}

// publisher publishes one run's events: PublishEvent with the subject
// built once and the encodings carved from shared arrays instead of one
// allocation each. It belongs to the run's goroutine; its held events
// are guarded by the lock of the run's thread (see run.take).
//
// A run whose client is on this instance gets each event in process, and
// NATS is for observers and replay: its events are held by the publisher
// and queued together once the backend holds no more (run.take calls
// queueHeld before a read that may wait), and the publish loop lets them
// wait up to nats.publish_delay for others to join them. Publishing each
// at once put the publish loop, the NATS client's flusher, the server and
// JetStream to work between the event and the client's socket write: at
// 10 streams of 100 deltas/s the latency the bridge adds was about 180 µs
// at the median and 430 µs at p99, against 100 and 230 with the delay.
// Queueing each event on its own took the queue's lock per event,
// contended by every run: 3% of an unpaced Triton run's CPU. A run owned
// for another instance (must) queues each event at once and wakes the
// loop: NATS is its client's only path.
type publisher struct {
	f        *Fabric
	subject  string
	thread   string
	chain    *logChain // the thread's (set as the run takes its thread)
	must     bool
	run      string
	slab     []byte // encodings of queued events, then of held ones, then free room
	held     int    // slab[held:] are the held events' EventBatch elements
	nheld    int    // events held
	heldIDs  bool   // slab[held:] holds ids, as the held deltas need
	heldSeq  uint64 // the first held event's seq
	heldLast uint64 // the last held event's seq
	limit    int    // the largest event's encoding NATS carries

	// ids is the encoding of an EventBatch with the run's ids (thread_id,
	// run_id): the start of each message of short deltas. short is the
	// delta being written.
	ids   []byte
	short canonical.BatchDelta
}

// Sizes of a publisher's arrays: the first, and the largest they double
// to (a text delta's encoding is about 100 bytes). heldMax bounds the
// events held, so that a backend that always has more (an unpaced stream
// arriving faster than it is written) still has its events queued every
// so often.
const (
	slabFirst = 512
	slabMax   = 4 << 10
	heldMax   = 64
)

// ownerAhead bounds how many seqs of a thread past the last the replay
// log stored its owner may have given its own clients when it dies, so
// far as nothing was dropped: a client on the owner reads each event
// before the log stores it, and the events of the owner's runs wait held
// (heldMax a run), queued (publish_queue messages of up to heldMax
// events) and for the log's acknowledgement (publish_queue events). The
// end another instance appends for its run is numbered past them
// (Bridge.stampOrphanEnd).
func (f *Fabric) ownerAhead() uint64 { return 2 * uint64(f.cfg.PublishQueue+1) * heldMax }

func (f *Fabric) publisher(thread, run string, must bool) *publisher {
	ids, _ := proto.Marshal(&canonical.EventBatch{ThreadId: thread, RunId: run}) // valid UTF-8: the bridge's ids
	return &publisher{f: f, subject: f.EventSubject(thread, run), thread: thread, run: run, must: must, limit: f.EventLimit(), ids: ids}
}

// publish holds ev (queues it at once when must), as PublishEvent does;
// false, with nothing held, when ev is larger than one NATS message
// carries. Called with the thread's lock held.
func (p *publisher) publish(ev *canonical.Event) bool {
	if cap(p.slab)-len(p.slab) < 128 {
		p.queueHeld() // held events are one run of bytes in one array
		p.slab = make([]byte, 0, min(max(2*cap(p.slab), slabFirst), slabMax))
		p.held = 0
	}
	// The next event's bytes go after these, never into them (a queued
	// message is read by the publish loop while the run goes on). An
	// append that outgrows the array copies the held bytes along.
	data, b, ids, err := p.appendEvent(p.slab, ev)
	if err != nil {
		p.f.drop(ev, err)
		return true
	}
	if len(data) > p.limit {
		return false
	}
	p.slab, p.heldIDs = b, p.heldIDs || ids
	if p.must {
		p.held = len(b)
		p.f.enqueue(pubMsg{subject: p.subject, thread: p.thread, chain: p.chain, seq: ev.GetSeq(), last: ev.GetSeq(), data: data, events: 1}, true, true)
	} else {
		if p.nheld == 0 {
			p.heldSeq = ev.GetSeq()
		}
		p.heldLast = ev.GetSeq()
		p.nheld++
		if p.nheld >= heldMax {
			p.queueHeld()
		}
	}
	if cap(b) > slabMax { // a large event outgrew the array: not kept for the next
		p.queueHeld()
		p.slab, p.held = nil, 0
	}
	return true
}

// queueHeld queues the held events as one message (EventBatch elements
// one after the other) for the loop to publish within the delay. Called
// with the thread's lock held.
func (p *publisher) queueHeld() {
	if p.nheld == 0 {
		return
	}
	end := len(p.slab)
	m := pubMsg{subject: p.subject, thread: p.thread, chain: p.chain, seq: p.heldSeq, last: p.heldLast, data: p.slab[p.held:end:end], events: p.nheld}
	p.held, p.nheld, p.heldIDs = end, 0, false
	p.f.enqueue(m, false, false)
	p.f.pubq.signalLazy()
}

// appendEvent appends ev to b as an EventBatch element and returns the
// element and the grown b: short (a BatchDelta) when it is a text delta
// of the run, after the run's ids when the message has none yet (a must
// publisher's messages are one event each), full otherwise. Its full
// encoding was the largest part of a text delta's cost in the bridge:
// 174 ns against 94 ns short (BenchmarkAppendBatchElemDelta,
// BenchmarkPublisherShortDelta), and three times the bytes to store.
func (p *publisher) appendEvent(b []byte, ev *canonical.Event) (elem, grown []byte, ids bool, err error) {
	if !shortDelta(ev, p.thread, p.run, &p.short) {
		elem, grown, err = appendBatchElem(b, batchEventsField, ev)
		return elem, grown, false, err
	}
	start := len(b)
	if ids = p.must || !p.heldIDs; ids {
		b = append(b, p.ids...)
	}
	_, b, err = appendBatchElem(b, batchDeltasField, &p.short)
	p.short.Text, p.short.ExtensionKey, p.short.ExtensionString = "", "", "" // not kept alive
	if err != nil {
		return nil, b[:start], false, err
	}
	end := len(b)
	return b[start:end:end], b, ids, nil
}

// shortDelta writes ev into short and reports true when an EventBatch's
// short form carries ev whole: a text delta whose ids are thread's and
// run's, with nothing but its seq, time and at most one extension, a
// string, besides (canonical.proto, BatchDelta); false, short untouched,
// otherwise. TestShortDeltaFields fails when Event or BlockDelta gains a
// field, which this must then look at.
func shortDelta(ev *canonical.Event, thread, run string, short *canonical.BatchDelta) bool {
	k, ok := ev.GetKind().(*canonical.KindBlockDelta)
	if !ok || k.BlockDelta == nil || ev.GetThreadId() != thread || ev.GetRunId() != run ||
		len(ev.GetNamespace()) > 0 || ev.GetGraphNode() != "" || ev.SkippedAfter != nil || len(ev.GetExtensions()) > 1 {
		return false
	}
	d := k.BlockDelta
	if len(d.GetData()) > 0 || len(ev.ProtoReflect().GetUnknown()) > 0 || len(d.ProtoReflect().GetUnknown()) > 0 {
		return false
	}
	extKey, extString := "", ""
	for key, v := range ev.GetExtensions() {
		if _, str := v.GetKind().(*structpb.Value_StringValue); key == "" || !str || len(v.ProtoReflect().GetUnknown()) > 0 {
			return false
		}
		extKey, extString = key, v.GetStringValue()
	}
	short.Seq, short.TimeUnixNano, short.Index, short.Text = ev.GetSeq(), ev.GetTimeUnixNano(), d.GetIndex(), d.GetText()
	short.ExtensionKey, short.ExtensionString = extKey, extString
	return true
}

// publishNow wakes the publish loop to publish what is queued at once: a
// run's end (the next run of the thread, on any instance, reads its last
// seq from the replay log).
func (p *publisher) publishNow() { p.f.pubq.signal() }

// UnstoredRuns appends, for each run with events the replay log has not
// yet acknowledged, the run's heartbeat subject (<prefix>.hb.<T>.<R>): a
// run that ended here while the log elects a leader is not over for its
// readers elsewhere, who must keep hearing that its owner is alive until
// its last events reach them.
// Subjects out holds already (a run still registered here) are not added
// again.
func (f *Fabric) UnstoredRuns(out []string) []string {
	unstored := map[string]bool{}
	f.acked.subjects(unstored)
	if len(unstored) == 0 {
		return out
	}
	have := make(map[string]bool, len(out))
	for _, s := range out {
		have[s] = true
	}
	events := f.cfg.SubjectPrefix + ".events."
	for s := range unstored {
		if hb := f.cfg.SubjectPrefix + ".hb." + strings.TrimPrefix(s, events); !have[hb] {
			out = append(out, hb)
		}
	}
	return out
}

// Publish sends a raw message (heartbeats, commands) at once, past the
// events queued for the replay log: a heartbeat held behind events that
// the log has yet to acknowledge (a stream electing its leader stores
// nothing for seconds) would tell readers the owner is gone. It never
// blocks: nats.go buffers, bounded, while reconnecting.
func (f *Fabric) Publish(subject string, data []byte) {
	if err := f.nc.Publish(subject, data); err != nil {
		f.countDropped(0, "publish failed", "subject", subject, "err", err)
		return
	}
	f.published.Add(1)
	f.pubBytes.Add(uint64(len(data)))
}

// pubMsg is one or more events queued for the replay log: EventBatch
// elements, which the publish loop may put into one message with the
// run's next ones.
type pubMsg struct {
	subject string
	thread  string    // the events' thread id
	chain   *logChain // the thread's, for a run's events (nil: not conditional)
	seq     uint64    // the first event's seq
	last    uint64    // the last event's seq
	data    []byte
	events  int
	// settled, on a message with no events, is closed once the thread's
	// messages queued before it are acknowledged or dropped (Settled).
	settled chan struct{}
}

// Settled returns a channel closed once the replay log has acknowledged
// (or dropped) the thread's events queued so far: a thread's lease is
// freed then, so that the next holder's events, on any instance, follow
// them in the log (lease.go).
func (f *Fabric) Settled(thread string) <-chan struct{} {
	ch := make(chan struct{})
	f.enqueue(pubMsg{thread: thread, settled: ch}, true, true)
	return ch
}

func (f *Fabric) drop(ev *canonical.Event, err error) {
	f.countDropped(1, "event not published", "thread", ev.GetThreadId(), "run", ev.GetRunId(), "err", err)
}

// dropMsg counts a queued message's events as dropped.
func (f *Fabric) dropMsg(m pubMsg, err error) {
	if m.settled != nil { // a marker: nothing after it will be published
		close(m.settled)
		return
	}
	f.countDropped(m.events, "event not published", "subject", m.subject, "events", m.events, "err", err)
}

// countDropped counts events events (a raw message as one) that could not
// be published, and logs msg with args the first time and each time the
// count passes a thousand more.
func (f *Fabric) countDropped(events int, msg string, args ...any) {
	k := uint64(max(events, 1))
	n := f.dropped.Add(k)
	if n == k || n/1000 != (n-k)/1000 {
		f.log.Warn(msg, append(args, "dropped", n)...)
	}
}

// publishLoop is the fabric's only publisher: it drains the queue, a
// batch at a time, into the NATS connection, which buffers and flushes on
// its own goroutine, and sends the replay log's messages as their threads'
// earlier ones are acknowledged (ackedLog). Woken lazily, it first waits
// nats.publish_delay (or until a wake-up to publish at once).
//
// An acknowledgement sends what waited for it and leaves the queue alone
// (unless the log was full): events queued lazily keep their delay and
// join their thread's next message. Taking the queue at every
// acknowledgement cut an unpaced Evergreen run's messages to the pace of
// JetStream's round trip, 5.7 events each; this way they hold 12, and
// the pair's throughput against the do-nothing hop went from 0.885 to
// 0.923 (median of three interleaved runs): JetStream's cost is per
// message.
func (f *Fabric) publishLoop() {
	defer close(f.loopDone)
	delay := time.NewTimer(time.Hour)
	delay.Stop()
	for {
		select {
		case <-f.pubq.wake:
		case <-f.acks:
			if !f.ackTakesQueue() {
				continue
			}
		case <-f.pubq.lazy:
			if f.cfg.PublishDelay > 0 && !f.waitDelay(delay) {
				f.drainLog()
				return
			}
		case <-f.stop:
			f.drainLog()
			return
		}
		f.publishBatch()
	}
}

// waitDelay waits nats.publish_delay, or until a wake-up to publish at
// once, sending the log's next messages as acknowledgements come in;
// false when the fabric is closing.
func (f *Fabric) waitDelay(delay *time.Timer) bool {
	delay.Reset(f.cfg.PublishDelay)
	for {
		select {
		case <-delay.C:
			return true
		case <-f.pubq.wake:
			delay.Stop()
			return true
		case <-f.acks:
			if f.ackTakesQueue() {
				delay.Stop()
				return true
			}
		case <-f.stop:
			delay.Stop()
			return false
		}
	}
}

// ackTakesQueue handles an acknowledgement's wake-up: true when the loop
// left the queue because the log was full (the acknowledgement may have
// made room, and runs may be waiting for it), so the loop publishes;
// otherwise it sends what waited for the acknowledgement and leaves the
// queue its delay.
func (f *Fabric) ackTakesQueue() bool {
	if f.blocked {
		return true
	}
	f.acked.flush(time.Now())
	return false
}

// signalAck wakes the publish loop to send what the replay log's
// acknowledgements let go.
func (f *Fabric) signalAck() {
	select {
	case f.acks <- struct{}{}:
	default:
	}
}

// logDrainTimeout bounds how long Close waits for the replay log to
// acknowledge what was queued before it.
const logDrainTimeout = 2 * time.Second

// drainLog publishes what was queued before Close and waits, a bounded
// time, for the replay log to acknowledge it; what it has not is counted
// as dropped.
func (f *Fabric) drainLog() {
	deadline := time.Now().Add(logDrainTimeout)
	for {
		f.publishBatch()
		if f.pubq.len() == 0 && f.acked.empty() || time.Now().After(deadline) {
			break
		}
		select {
		case <-f.pubq.wake:
		case <-f.acks:
		case <-time.After(10 * time.Millisecond):
		}
	}
	f.acked.abandon(errors.New("fabric closed before the replay log acknowledged"))
}

// publishBatch publishes what is queued, putting each run's events that
// queued up together into one EventBatch message: JetStream's cost is per
// message, so a burst of a thousand deltas costs the replay log a few
// writes instead of a thousand. Nothing waits for a batch to fill: an event
// alone in the queue goes out alone. Per thread, events leave in the order
// they were queued: an event joins its run's open batch only while no
// event of another run of the same thread has been queued since. Event
// messages go through the acknowledged log; while it is full the queue is
// left as it is.
func (f *Fabric) publishBatch() {
	f.blocked = f.acked.full()
	if !f.blocked {
		batch := f.pubq.take()
		maxBytes := f.maxBatchBytes()
		f.batcher.group(batch, maxBytes)
		for _, g := range f.batcher.groups {
			head := &batch[g.head]
			if head.settled != nil {
				f.acked.settle(head.thread, head.settled)
				continue
			}
			data := f.batcher.join(batch, g)
			f.acked.add(head.thread, head.subject, head.chain, head.seq, batch[g.tail].last, data, g.events, maxBytes)
			f.published.Add(1)
			f.pubBytes.Add(uint64(len(data)))
		}
		f.pubq.recycle(batch)
	}
	f.acked.flush(time.Now())
}

// EventLimit is the largest encoded event a NATS message carries: the
// server's max_payload less room for the message's headers.
func (f *Fabric) EventLimit() int {
	if f.nc == nil { // not connected (a test's bare Fabric): NATS's default
		return 1<<20 - eventHeaderRoom
	}
	return int(f.nc.MaxPayload()) - eventHeaderRoom
}

// eventHeaderRoom is what a replay log message's headers (Nats-Msg-Id)
// may take.
const eventHeaderRoom = 1 << 10

// maxBatchBytes bounds one EventBatch message: 64 KiB, or less when the
// NATS server takes less.
func (f *Fabric) maxBatchBytes() int {
	n := 64 << 10
	if f.nc == nil { // not connected (a test's bare Fabric)
		return n
	}
	if mp := f.nc.MaxPayload(); mp > 0 && mp < int64(n) {
		n = int(mp)
	}
	return n
}

// batcher groups a queue's messages into the messages published; it
// belongs to the publish loop and keeps its arrays between batches.
type batcher struct {
	groups []pubGroup
	next   []int          // next[i]: the index of the message after i in its group, or -1
	open   map[string]int // thread id → index in groups of its open batch
	buf    []byte         // join's output
}

// pubGroup is one message to publish: msgs head, next[head], … tail.
type pubGroup struct {
	head, tail int
	events     int
	size       int
}

// group fills b.groups from msgs, in the order of each group's first message.
func (b *batcher) group(msgs []pubMsg, maxBytes int) {
	b.groups = b.groups[:0]
	if cap(b.next) < len(msgs) {
		b.next = make([]int, len(msgs))
	}
	b.next = b.next[:len(msgs)]
	if b.open == nil {
		b.open = map[string]int{}
	}
	clear(b.open)
	for i := range msgs {
		b.next[i] = -1
		m := &msgs[i]
		if m.settled != nil { // a marker is a group of its own; the thread's next messages follow it
			delete(b.open, m.thread)
			b.groups = append(b.groups, pubGroup{head: i, tail: i})
			continue
		}
		if gi, ok := b.open[m.thread]; ok {
			g := &b.groups[gi]
			if msgs[g.head].subject == m.subject && g.size+len(m.data) <= maxBytes {
				b.next[g.tail] = i
				g.tail = i
				g.events += m.events
				g.size += len(m.data)
				continue
			}
		}
		b.open[m.thread] = len(b.groups)
		b.groups = append(b.groups, pubGroup{head: i, tail: i, events: m.events, size: len(m.data)})
	}
}

// join returns g's message: its events' EventBatch elements one after the other, which is an EventBatch (a lone
// event's element is one as it is).
func (b *batcher) join(msgs []pubMsg, g pubGroup) []byte {
	if g.head == g.tail {
		return msgs[g.head].data
	}
	if cap(b.buf) > 1<<20 { // the last batch was outsized: let it go
		b.buf = nil
	}
	b.buf = b.buf[:0]
	for i := g.head; i >= 0; i = b.next[i] {
		b.buf = append(b.buf, msgs[i].data...)
	}
	return b.buf
}

// lastThreadMsg reads thread's last message in the replay log: nil (and
// no error) when the log holds none of the thread's.
func (f *Fabric) lastThreadMsg(ctx context.Context, thread string) (*jetstream.RawStreamMsg, error) {
	m, err := f.events.GetLastMsgForSubject(ctx, f.ThreadSubjects(thread))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// lastMsgOf reads the Msg-Id and log sequence of thread's last message
// (sequence 0 when the log holds none of the thread's).
func (f *Fabric) lastMsgOf(ctx context.Context, thread string) (string, uint64, error) {
	m, err := f.lastThreadMsg(ctx, thread)
	if err != nil || m == nil {
		return "", 0, err
	}
	return m.Header.Get(jetstream.MsgIDHeader), m.Sequence, nil
}

// Published counts messages handed to NATS.
func (f *Fabric) Published() uint64 { return f.published.Load() }

// PublishedBytes counts the bytes of the messages handed to NATS.
func (f *Fabric) PublishedBytes() uint64 { return f.pubBytes.Load() }

// Dropped counts events that could not be published: queue overflow,
// NATS reconnect buffer overflow, or shutdown.
func (f *Fabric) Dropped() uint64 { return f.dropped.Load() }

// LastSeq returns a thread's last seq: the highest canonical seq of the
// thread in the replay log or, when higher, the floor its runs' ends left
// (seqfloor.go); 0 when neither has one.
func (f *Fabric) LastSeq(ctx context.Context, thread string) (uint64, error) {
	// Two gets: the handle from start-up names the stream (asking for it
	// anew, a STREAM.INFO, doubled the requests and was the costlier one;
	// a stream deleted since fails the get as it failed the info), and
	// the floor's entry.
	m, err := f.lastThreadMsg(ctx, thread)
	if err != nil {
		return 0, err
	}
	return f.lastSeqAfter(ctx, thread, m)
}

// lastSeqAfter is LastSeq with m, the thread's last message in the log
// (nil: none), read already.
func (f *Fabric) lastSeqAfter(ctx context.Context, thread string, m *jetstream.RawStreamMsg) (uint64, error) {
	logged, floor, err := f.lastSeqs(ctx, thread, m)
	return max(logged, floor), err
}

// lastSeqs is the seq of m, the thread's last message in the log (nil:
// none, 0), and the thread's floor: the log may have let go of the
// thread's events (seqfloor.go), or never got seqs given past its last.
func (f *Fabric) lastSeqs(ctx context.Context, thread string, m *jetstream.RawStreamMsg) (logged, floor uint64, err error) {
	if m != nil {
		if logged, err = lastSeqOf(m); err != nil {
			return 0, 0, fmt.Errorf("replay log message %d: %w", m.Sequence, err)
		}
	}
	floor, err = f.floors.read(ctx, thread)
	return logged, floor, err
}

// oldestSeq is the seq of the oldest event of thread the replay log
// holds (0 for none).
func (f *Fabric) oldestSeq(ctx context.Context, thread string) (uint64, error) {
	m, err := f.events.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(f.ThreadSubjects(thread)))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	evs, err := DecodeEvents(m.Data)
	if err != nil || len(evs) == 0 {
		return 0, fmt.Errorf("replay log message %d: %v events, %v", m.Sequence, len(evs), err)
	}
	return evs[0].GetSeq(), nil
}

// NoteLastSeq records that thread's seqs up to seq are given, so they are
// never given again once the replay log has let go of them
// (seqfloor.go). It does not wait for the write.
func (f *Fabric) NoteLastSeq(thread string, seq uint64) { f.floors.note(thread, seq) }

// The numbers of EventBatch's repeated fields, events and deltas, as
// its descriptor has them.
var (
	batchEventsField = batchField("events")
	batchDeltasField = batchField("deltas")
)

func batchField(name protoreflect.Name) protowire.Number {
	return (*canonical.EventBatch)(nil).ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// lastSeqHeader carries, on each replay log message, the seq of its last
// event: LastSeq, at the start of every run of a known thread, reads it
// without decoding the message (a thread's last batch often ends with a
// state snapshot of its whole history, up to a millisecond to decode).
const lastSeqHeader = "Interlingua-Last-Seq"

// lastSeqOf returns the seq of the last event of a replay log message:
// its header's, or, on a message without one, its last event's.
func lastSeqOf(m *jetstream.RawStreamMsg) (uint64, error) {
	if h := m.Header.Get(lastSeqHeader); h != "" {
		return strconv.ParseUint(h, 10, 64)
	}
	evs, err := DecodeEvents(m.Data)
	if err != nil {
		return 0, err
	}
	if len(evs) == 0 {
		return 0, errEmptyBatch
	}
	return evs[len(evs)-1].GetSeq(), nil
}

// Close publishes what is queued, flushes and closes the connection, then
// stops the embedded server.
func (f *Fabric) Close() {
	f.closeOnce.Do(func() {
		close(f.stop)
		if f.loopDone != nil {
			<-f.loopDone
		}
		if f.floors != nil {
			f.floors.close()
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
	if f.dirLock != nil {
		f.dirLock.Close() // releases the lock
	}
}

func redact(url string) string {
	if url == "" {
		return "(embedded)"
	}
	return url
}

var errEmptyBatch = errors.New("event batch holds no event")

// DecodeEvents decodes a message of <prefix>.events.<thread>.<run>: an
// EventBatch, whose events, with its short deltas put back among them by
// seq, it returns in seq order.
func DecodeEvents(data []byte) ([]*canonical.Event, error) {
	var b canonical.EventBatch
	if err := proto.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	if len(b.GetDeltas()) == 0 {
		return b.GetEvents(), nil
	}
	evs := b.GetEvents()
	out := make([]*canonical.Event, 0, len(evs)+len(b.GetDeltas()))
	for _, d := range b.GetDeltas() {
		for len(evs) > 0 && evs[0].GetSeq() < d.GetSeq() {
			out, evs = append(out, evs[0]), evs[1:]
		}
		ev := canonical.NewTextDelta(d.GetIndex(), d.GetText())
		ev.ThreadId, ev.RunId, ev.Seq, ev.TimeUnixNano = b.GetThreadId(), b.GetRunId(), d.GetSeq(), d.GetTimeUnixNano()
		if k := d.GetExtensionKey(); k != "" {
			ev.Extensions = map[string]*structpb.Value{k: structpb.NewStringValue(d.GetExtensionString())}
		}
		out = append(out, ev)
	}
	out = append(out, evs...)
	if !slices.IsSortedFunc(out, bySeq) { // not as a publisher writes them
		slices.SortStableFunc(out, bySeq)
	}
	return out, nil
}

func bySeq(a, b *canonical.Event) int { return cmp.Compare(a.GetSeq(), b.GetSeq()) }

// appendBatchElem appends m to b as one element of an EventBatch (the
// repeated field, tag and length, then m's encoding by
// proto.MarshalOptions) and returns the element and the grown b: elements
// appended one after another are one EventBatch as they lie (a publisher
// queues them so, see queueHeld). Room for the longest header goes first,
// m is marshalled after it, and the header, once the length is known, is
// written against the encoding, which moves down to meet it (asking
// proto.Size first walked the event twice, a third more time per delta).
// Like proto.Marshal it refuses a string field that is not valid UTF-8.
func appendBatchElem(b []byte, field protowire.Number, m proto.Message) (elem, grown []byte, err error) {
	start := len(b)
	b = append(b, make([]byte, batchHdrMax)...)
	body := len(b)
	if b, err = (proto.MarshalOptions{}).MarshalAppend(b, m); err != nil {
		return nil, b[:start], err
	}
	n := len(b) - body
	hdr := protowire.AppendVarint(protowire.AppendTag(b[start:start:body], field, protowire.BytesType), uint64(n))
	end := start + len(hdr) + copy(b[start+len(hdr):], b[body:])
	return b[start:end:end], b[:end], nil
}

// batchHdrMax is the most bytes an EventBatch element's header takes: the
// tag of field 1 and the length as a varint.
const batchHdrMax = 1 + binary.MaxVarintLen32

// heardSince is when this instance could last have started hearing every
// message: its connection's last (re)connect; zero time while it is down.
func (f *Fabric) heardSince() time.Time {
	if !f.nc.IsConnected() {
		return time.Time{}
	}
	return time.Unix(0, f.connectedAt.Load())
}
