package agent

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// Cluster lets any instance serve any thread. A thread's wire seq is
// assigned once, by the instance that appends the event (the one running
// the thread's runs); the others mirror it. Subjects under Prefix p, with
// T the thread as one subject token:
//
//	p.agent.events.<T>  every event an instance appends to thread T's buffer,
//	                    with its seq (JSON, mirrorMsg). Every instance that
//	                    holds T in memory subscribes and appends it to its
//	                    own buffer, so its SSE streams and WebSocket
//	                    subscriptions see the run live, with the same seqs.
//	p.agent.cmd.<T>     request/reply: a command for T (the command JSON),
//	                    answered by the instance running or queueing T's
//	                    runs, which alone subscribes while it does, and
//	                    after, while T stays in its memory (ownLocked).
//
// These are separate from the bridge's canonical subjects: the agent
// frontend's events are its own encoding (lifecycle, values and checkpoint
// events the runtime synthesizes), numbered per thread.
type Cluster struct {
	// Conn is the NATS connection; required.
	Conn *nats.Conn
	// Prefix is the subject prefix. Default "interlingua".
	Prefix string
	// Publish queues a message without blocking (bounded: a run never
	// waits on NATS). Default: the frontend's own queue of
	// MirrorQueue messages, published on Conn by one goroutine (Close
	// stops it); a full queue drops, and followers catch up from the
	// owner's buffer when they see the jump.
	Publish func(subject string, data []byte)
	// MirrorQueue bounds the default publisher's queue. Default 4096.
	MirrorQueue int
	// ForwardTimeout bounds a forwarded command (run.start on the owner
	// starts the run, which may cross the network). Default 10s.
	ForwardTimeout time.Duration
	// Heartbeat is how often the instance running a thread's run says so
	// on the thread's events subject. Default 1s.
	Heartbeat time.Duration
	// OwnerTimeout: an instance following a thread whose run's owner sends
	// neither event nor heartbeat for this long ends the run failed for
	// its readers (the owner died). Default 3 × Heartbeat.
	OwnerTimeout time.Duration
}

func (c *Cluster) defaults() {
	c.Prefix = cmp.Or(c.Prefix, "interlingua")
	c.MirrorQueue = cmp.Or(c.MirrorQueue, 4096)
	c.ForwardTimeout = cmp.Or(c.ForwardTimeout, 10*time.Second)
	c.Heartbeat = cmp.Or(c.Heartbeat, time.Second)
	c.OwnerTimeout = cmp.Or(c.OwnerTimeout, 3*c.Heartbeat)
}

// outbox is the default publisher: a bounded queue drained onto the
// connection by one goroutine, so appending an event never waits on NATS.
type outbox struct {
	nc      *nats.Conn
	q       chan outMsg
	stop    chan struct{}
	done    chan struct{}
	dropped atomic.Uint64
}

type outMsg struct {
	subject string
	data    []byte
}

func newOutbox(nc *nats.Conn, size int) *outbox {
	o := &outbox{nc: nc, q: make(chan outMsg, size), stop: make(chan struct{}), done: make(chan struct{})}
	go o.loop()
	return o
}

func (o *outbox) publish(subject string, data []byte) {
	select {
	case o.q <- outMsg{subject, data}:
	default:
		o.dropped.Add(1)
	}
}

func (o *outbox) loop() {
	defer close(o.done)
	for {
		select {
		case m := <-o.q:
			if o.nc.Publish(m.subject, m.data) != nil {
				o.dropped.Add(1)
			}
		case <-o.stop:
			return
		}
	}
}

// close stops the loop (what is still queued is not sent: followers
// catch up from the owner's buffer) and waits for it.
func (o *outbox) close() {
	close(o.stop)
	<-o.done
}

func (c *Cluster) eventsSubject(thread string) string {
	return c.Prefix + ".agent.events." + subject.Token(thread)
}

func (c *Cluster) cmdSubject(thread string) string {
	return c.Prefix + ".agent.cmd." + subject.Token(thread)
}

// mirrorMsg is one event on p.agent.events.<T> (written by hand,
// appendMirrorMsg). Its bools are omitzero: encoding/json's omitempty,
// which left false out.
type mirrorMsg struct {
	Origin string     `json:"o"`           // the publishing instance (its own are skipped)
	Seq    uint64     `json:"q"`           // the thread seq its owner gave it
	Method string     `json:"m"`           // filter fields of the record
	Custom string     `json:"c,omitempty"` //
	NS     []string   `json:"n"`           //
	Run    string     `json:"r,omitempty"` // lifecycle events: the run, for agent.getTree
	Status string     `json:"s,omitempty"` // lifecycle events: the status
	Pinned bool       `json:"p,omitzero"`  // replays: a namespace's state kept past the buffer
	Alive  bool       `json:"a,omitzero"`  // a heartbeat: the sender runs the thread's run; no event
	Frame  json.Value `json:"f"`           // the complete envelope
}

// mirrorJSON reads what another instance wrote (mirrorMsg, a replay's
// lines, the principal header) as encoding/json read it: a frame may hold
// a member name twice (wireJSON writes both of two map keys that became
// equal), and invalid UTF-8 reads as U+FFFD; refused, the event would be
// lost to this instance's readers.
var mirrorJSON = json.JoinOptions(json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

// appendMirrorMsg encodes a record for p.agent.events.<T> by hand: it runs
// once per event on the instance that owns the run.
func appendMirrorMsg(b []byte, origin string, rec *record) []byte {
	return appendMirrorMsgPinned(b, origin, rec, false)
}

// appendMirrorMsgPinned is appendMirrorMsg for a replay, which also
// carries the owner's pinned states.
func appendMirrorMsgPinned(b []byte, origin string, rec *record, pinned bool) []byte {
	b = append(b, `{"o":`...)
	b = appendString(b, origin)
	b = append(b, `,"q":`...)
	b = strconv.AppendUint(b, rec.seq, 10)
	b = append(b, `,"m":`...)
	b = appendString(b, rec.method)
	if rec.custom != "" {
		b = append(b, `,"c":`...)
		b = appendString(b, rec.custom)
	}
	b = append(b, `,"n":`...)
	b = appendNamespace(b, rec.ns)
	if rec.run != "" {
		b = append(b, `,"r":`...)
		b = appendString(b, rec.run)
		b = append(b, `,"s":`...)
		b = appendString(b, rec.status)
	}
	if pinned {
		b = append(b, `,"p":true`...)
	}
	b = append(b, `,"f":`...)
	b = append(b, rec.frame...)
	return append(b, '}')
}

// publishLocked sends a record this instance appended to the other
// instances. t.mu is held; the publisher never blocks.
func (t *Thread) publishLocked(rec *record) {
	c := t.f.cfg.Cluster
	if c == nil {
		return
	}
	if t.evSubject == "" {
		t.evSubject = c.eventsSubject(t.id)
	}
	c.Publish(t.evSubject, appendMirrorMsg(make([]byte, 0, len(rec.frame)+96), t.f.origin, rec))
}

// followLocked subscribes the thread to the events other instances append
// (the subscription lives as long as the thread is in memory), then
// catches up with the instance running the thread's runs, if any.
func (t *Thread) followLocked() {
	c := t.f.cfg.Cluster
	if c == nil {
		return
	}
	sub, err := c.Conn.Subscribe(c.eventsSubject(t.id), t.mirror)
	if err != nil {
		t.f.cfg.Logger.Warn("thread not mirrored from other instances", "thread", t.id, "err", err)
		return
	}
	t.evSub = sub
	t.ownerSeen = t.f.cfg.Now()
	t.catchUpLocked()
}

// mirror appends an event another instance appended. Events arrive in
// their owner's order; one this instance already has (its seq is not
// past ours: a run appended here at the same time) is dropped. Before a
// jump (events missed: dropped by a full publish queue, or a run that
// started elsewhere while this instance had no copy of the thread), the
// missing events are asked of their owner; what it no longer buffers
// restarts the buffer, so readers behind get the protocol's gap error
// rather than a silent hole.
func (t *Thread) mirror(msg *nats.Msg) {
	if bytes.HasPrefix(msg.Data, t.f.echo) {
		return // this instance's own event, back from the subscription
	}
	var m mirrorMsg
	if err := json.Unmarshal(msg.Data, &m, mirrorJSON); err != nil || m.Origin == t.f.origin {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ownerSeen = t.f.cfg.Now()
	if m.Alive {
		return
	}
	if m.Seq > t.seq+1 {
		t.backfillLocked()
	}
	t.mirrorLocked(&m)
}

// watchOwners runs while the frontend has a Cluster: every Heartbeat it
// says, for each thread whose run runs here, that it is alive, and ends
// for their readers the runs of followed threads whose owner has gone
// quiet for OwnerTimeout (killed: its readers would otherwise wait for
// ever, heartbeats and all).
func (f *Frontend) watchOwners() {
	defer f.wg.Done()
	c := f.cfg.Cluster
	tick := time.NewTicker(c.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-f.runCtx.Done():
			return
		case <-tick.C:
		}
		f.mu.Lock()
		threads := make([]*Thread, 0, len(f.threads))
		for _, t := range f.threads {
			threads = append(threads, t)
		}
		f.mu.Unlock()
		now := f.cfg.Now()
		for _, t := range threads {
			t.mu.Lock()
			switch {
			case t.rt.active != nil:
				if t.evSubject == "" {
					t.evSubject = c.eventsSubject(t.id)
				}
				c.Publish(t.evSubject, []byte(`{"o":"`+f.origin+`","a":true}`))
			case t.evSub != nil && now.Sub(t.ownerSeen) >= c.OwnerTimeout:
				t.endOrphanedLocked(c.OwnerTimeout)
			}
			t.mu.Unlock()
		}
	}
}

// endOrphanedLocked ends, with a failed root lifecycle event, the runs the
// thread's buffer shows running whose owner has gone quiet. The event is
// the next of the thread here; other followers append the same.
func (t *Thread) endOrphanedLocked(quiet time.Duration) {
	for _, ri := range t.runs {
		st := ri.status[nsKey(nil)]
		if st == nil || st.status == "completed" || st.status == "failed" || st.status == "interrupted" {
			continue
		}
		b := append([]byte(`{"event":"failed"`), `,"error":`...)
		b = appendString(b, "run owner sent neither event nor heartbeat for "+quiet.String())
		w := wireEvent{method: methodLifecycle, namespace: []string{}, timeMs: t.f.cfg.Now().UnixMilli(), status: "failed", data: append(b, '}')}
		t.f.cfg.Logger.Warn("agent run ended: its owner went quiet", "thread", t.id, "run", ri.id, "quiet_for", quiet.String())
		t.appendLocked(&w, ri.id)
	}
}

func (t *Thread) mirrorLocked(m *mirrorMsg) {
	switch {
	case m.Seq == 0 || len(m.Frame) == 0:
		return
	case m.Seq <= t.seq:
		t.f.cfg.Logger.Debug("mirrored event not newer than the buffer; dropped", "thread", t.id, "seq", m.Seq, "have", t.seq)
		return
	case m.Seq > t.seq+1:
		t.restartLocked(m.Seq - 1)
	}
	if m.NS == nil {
		m.NS = []string{}
	}
	t.storeLocked(record{seq: m.Seq, method: m.Method, custom: m.Custom, ns: m.NS, frame: m.Frame, run: m.Run, status: m.Status})
}

// replayMethod asks the instance running a thread's runs for its buffered
// events after a seq; it is accepted only on p.agent.cmd.<T>.
const replayMethod = "interlingua.replay"

// maxReplayBytes bounds a replay reply (NATS's default max payload is
// 1 MiB): the newest events that fit are sent.
const maxReplayBytes = 900 << 10

// backfillLocked asks the instance running the thread's runs for the
// events after t.seq and mirrors them. t.mu is held for the round trip
// (bounded by the reply timeout), so readers attach after the catch-up
// and live events wait behind it, in order.
func (t *Thread) backfillLocked() {
	msgs, _ := t.askReplayLocked(t.seq)
	t.applyReplayLocked(msgs)
}

// catchUpLocked is the backfill of a thread just loaded from its record,
// whose buffer opens with the record's state at the record's seq. That
// seq can be past events a client has read on the owner (the owner saves
// beside its run), so the owner's whole buffer is asked for, and it
// replaces the opening state when it is at least as new: this instance
// then replays what the owner replays, pinned states included, and a
// client resuming here from any seq the owner still buffers misses
// nothing.
func (t *Thread) catchUpLocked() {
	msgs, ok := t.askReplayLocked(0)
	if !ok {
		return
	}
	first, last := uint64(0), uint64(0)
	for _, m := range msgs {
		if !m.Pinned && m.Seq > 0 && len(m.Frame) > 0 {
			if first == 0 {
				first = m.Seq
			}
			last = m.Seq
		}
	}
	if first != 0 && last >= t.seq {
		t.pinned, t.latest = nil, map[string]uint64{}
		t.dropBufferLocked()
		t.evicted.forgetFrom(first)
		t.seq = first - 1
	}
	t.applyReplayLocked(msgs)
}

// applyReplayLocked takes in the owner's replay answer: its pinned states,
// then its buffered events in order.
func (t *Thread) applyReplayLocked(msgs []mirrorMsg) {
	t.pinMirroredLocked(msgs)
	for i := range msgs {
		if !msgs[i].Pinned {
			t.mirrorLocked(&msgs[i])
		}
	}
}

// askReplayLocked asks the instance running the thread's runs for its
// buffered events after since; ok is false when none answered. t.mu is
// held.
func (t *Thread) askReplayLocked(since uint64) (msgs []mirrorMsg, ok bool) {
	c := t.f.cfg.Cluster
	if t.rt.active != nil || len(t.rt.queue) > 0 {
		return nil, false // the thread's runs are here
	}
	req := append([]byte(`{"id":0,"method":"`+replayMethod+`","params":{"since":`), strconv.FormatUint(since, 10)...)
	ctx, cancel := context.WithTimeout(t.f.closingCtx, min(c.ForwardTimeout, 2*time.Second))
	defer cancel()
	msg, err := c.Conn.RequestWithContext(ctx, c.cmdSubject(t.id), append(req, "}}"...))
	if err != nil || msg.Header.Get(hdrErrorCode) != "" {
		return nil, false // no instance runs the thread (or it did not answer): nothing to catch up
	}
	for line := range bytes.SplitSeq(msg.Data, []byte{'\n'}) {
		var m mirrorMsg
		if json.Unmarshal(line, &m, mirrorJSON) == nil {
			msgs = append(msgs, m)
		}
	}
	return msgs, true
}

// pinMirroredLocked pins the owner's states a replay carries, each unless
// this instance holds a newer state of its namespace.
func (t *Thread) pinMirroredLocked(msgs []mirrorMsg) {
	for _, m := range msgs {
		if !m.Pinned || m.Method != methodValues || m.Seq == 0 || len(m.Frame) == 0 {
			continue
		}
		if m.NS == nil {
			m.NS = []string{}
		}
		k := nsKey(m.NS)
		if t.latest[k] >= m.Seq {
			continue
		}
		t.pinLocked(record{seq: m.Seq, method: m.Method, ns: m.NS, frame: m.Frame})
		t.latest[k] = m.Seq
	}
	t.trimPinnedLocked()
}

// replayLinesLocked is the owner's answer to replayMethod: its buffered
// events after since, one mirror message per line, the newest that fit in
// maxReplayBytes, after the pinned states newer than since that fit too
// (marked "p"), so a reader of the replay gets each namespace's state.
func (t *Thread) replayLinesLocked(since uint64) []byte {
	oldest := t.oldest()
	first := max(since+1, oldest)
	size := 0
	for s := t.seq; s >= first; s-- { // walk back to the oldest that fits
		rec := t.buf.at(int(s - oldest))
		if size+len(rec.frame)+160 > maxReplayBytes {
			first = s + 1
			break
		}
		size += len(rec.frame) + 160
	}
	var pins []*record
	for i := range t.pinned {
		p := &t.pinned[i]
		if p.seq > since && p.seq < first && size+len(p.frame)+160 <= maxReplayBytes {
			pins = append(pins, p)
			size += len(p.frame) + 160
		}
	}
	b := make([]byte, 0, size)
	for _, p := range pins {
		b = appendMirrorMsgPinned(b, t.f.origin, p, true)
		b = append(b, '\n')
	}
	for s := first; s <= t.seq; s++ {
		rec := t.buf.at(int(s - oldest))
		b = appendMirrorMsg(b, t.f.origin, rec)
		b = append(b, '\n')
	}
	return b
}

// ownLocked keeps the thread's command subscription in step with its
// runs: subscribed while this instance runs or queues one, so commands
// reaching other instances are forwarded here. When the runs end the
// subscription stays (the thread's affinity to this instance) while the
// thread is in memory, the frontend is not shutting down and the
// connection has not been lost since it was made: the conversation's next
// command here then runs at once, without asking the other instances
// first (a request answered "no responders"), reading the record back
// (a store read), subscribing and confirming it (a flush) and unsubscribing at
// the run's end. Those cost 250 µs of CPU a run here, a fifth of what the
// bridge adds to an agent run's start, and two round trips before
// run.start is answered. The state held here is the latest: every other
// instance forwards its commands for the thread here meanwhile.
func (t *Thread) ownLocked() {
	c := t.f.cfg.Cluster
	if c == nil {
		return
	}
	owning := t.rt.active != nil || len(t.rt.queue) > 0
	switch {
	case owning && t.cmdSub == nil:
		sub, err := c.Conn.Subscribe(c.cmdSubject(t.id), t.serveForwarded)
		if err != nil {
			t.f.cfg.Logger.Warn("commands for the thread's run cannot reach this instance", "thread", t.id, "err", err)
			return
		}
		t.cmdSub, t.cmdSubNew, t.cmdSubConn = sub, true, c.Conn.Stats().Reconnects
	case !owning && t.cmdSub != nil && !t.keepCmdSubLocked():
		_ = t.cmdSub.Unsubscribe()
		t.cmdSub = nil
	}
}

// keepCmdSubLocked reports whether the thread's command subscription may
// outlive its runs (see ownLocked). Not once the frontend shuts down: new
// runs go to instances that stay. Not after the connection was lost (even
// if it is back): meanwhile another instance found no one subscribed, may
// have run the thread and holds the newer state.
func (t *Thread) keepCmdSubLocked() bool {
	c := t.f.cfg.Cluster
	select {
	case <-t.f.closing:
		return false
	default:
	}
	return c.Conn.IsConnected() && c.Conn.Stats().Reconnects == t.cmdSubConn
}

// Headers of a forwarded command's reply.
const (
	hdrApplied   = "Agent-Applied-Through-Seq"
	hdrErrorCode = "Agent-Error-Code"
	// hdrPrincipal carries the caller (JSON canonical.Principal) with a
	// forwarded command. Instances trust each other: the fabric is the
	// cluster's own NATS (nats.creds and TLS secure it).
	hdrPrincipal = "Agent-Principal"
)

// cancelMethod is the forwarded form of POST /threads/{t}/runs/{r}/cancel;
// it is accepted only on p.agent.cmd.<T>.
const cancelMethod = "interlingua.cancel"

// settleSub waits until a command subscription this instance has just
// made is known to the NATS server, before the command that made it (a
// run.start) is answered: a client told its run started may send the next
// command (a cancel, another run.start) to any instance, whose forward
// must find this one, not "no responders" (a cancel answered 404, a second
// run started beside the first). One round trip, when a run starts on a
// thread this instance did not own.
func (t *Thread) settleSub() {
	c := t.f.cfg.Cluster
	if c == nil {
		return
	}
	t.mu.Lock()
	settle := t.cmdSubNew
	t.cmdSubNew = false
	t.mu.Unlock()
	if settle {
		if err := c.Conn.FlushTimeout(c.ForwardTimeout); err != nil {
			t.f.cfg.Logger.Warn("thread's command subscription not confirmed by the NATS server", "thread", t.id, "err", err)
		}
	}
}

// serveForwarded executes a command another instance received for this
// thread and replies with its result.
func (t *Thread) serveForwarded(msg *nats.Msg) {
	reply := nats.NewMsg(msg.Reply)
	cmd, _, pe := parseCommand(msg.Data)
	var result []byte
	var applied uint64
	if h := msg.Header.Get(hdrPrincipal); pe == nil && h != "" {
		cmd.principal = &canonical.Principal{}
		if json.Unmarshal([]byte(h), cmd.principal, mirrorJSON) != nil {
			pe = perr(errPermissionDenied, "forwarded command: unreadable "+hdrPrincipal+" header")
		}
	}
	if pe == nil {
		if cmd.method == replayMethod {
			since, _ := uintParam(cmd.params["since"])
			t.mu.Lock()
			result = t.replayLinesLocked(since)
			t.mu.Unlock()
		} else if cmd.method == cancelMethod {
			run, _, _ := cmd.params.str("run_id")
			if !t.cancelRun(run) {
				pe = perr(errNoSuchRun, "no active or queued run "+strconv.Quote(run))
			}
		} else if !knownMethods[cmd.method] {
			pe = perr(errUnknownCommand, "Unknown protocol command: "+cmd.method)
		} else {
			result, applied, pe = t.f.executeLocal(t, cmd)
		}
	}
	if pe != nil {
		reply.Header.Set(hdrErrorCode, pe.Code)
		reply.Data = []byte(pe.Message)
	} else {
		reply.Header.Set(hdrApplied, strconv.FormatUint(applied, 10))
		reply.Data = result
	}
	if err := msg.RespondMsg(reply); err != nil {
		t.f.cfg.Logger.Warn("forwarded command not answered", "thread", t.id, "err", err)
	}
}

// owned reports whether this instance runs or queues the thread's runs,
// or still takes its commands after them (ownLocked).
func (t *Thread) owned() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ownLocked() // a subscription kept past its runs may have lapsed
	return t.rt.active != nil || len(t.rt.queue) > 0 || t.cmdSub != nil
}

// forward sends a command to the instance running the thread's runs. ok is
// false when there is none (no instance answers): the caller executes the
// command here.
func (f *Frontend) forward(th *Thread, data []byte, who *canonical.Principal) (result []byte, applied uint64, pe *protoError, ok bool) {
	c := f.cfg.Cluster
	if c == nil || th.owned() {
		return nil, 0, nil, false
	}
	ctx, cancel := context.WithTimeout(f.closingCtx, c.ForwardTimeout)
	defer cancel()
	req := nats.NewMsg(c.cmdSubject(th.id))
	req.Data = data
	if who != nil { // the owner starts runs as the caller
		// Invalid UTF-8 in a name is written as U+FFFD, as encoding/json
		// wrote it: refused, the header would be left off and the command
		// run with no principal.
		b, _ := json.Marshal(who, json.AllowInvalidUTF8(true))
		req.Header.Set(hdrPrincipal, string(b))
	}
	msg, err := c.Conn.RequestMsgWithContext(ctx, req)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, 0, nil, false
	case err != nil:
		return nil, 0, asProtoError(canonical.Errorf(canonical.CodeUnavailable,
			"thread %q: the instance running its run did not answer: %v", th.id, err)), true
	}
	if code := msg.Header.Get(hdrErrorCode); code != "" {
		return nil, 0, perr(code, string(msg.Data)), true
	}
	applied, _ = strconv.ParseUint(msg.Header.Get(hdrApplied), 10, 64)
	return msg.Data, applied, nil, true
}

// newOrigin names this frontend on the fabric.
func newOrigin() string { return nuid.Next() }

// refresh merges into a thread the record another instance saved since
// this one last read or wrote it, so a command or a state read here sees
// the runs that ran elsewhere. It merges rather than replaces, as a
// conflicting save does: nothing this instance holds is lost.
func (f *Frontend) refresh(th *Thread) { f.applyRecord(th, f.fetchRecord(th)) }

// storedHead is a thread's head record as fetchRecord read it, not
// decoded yet.
type storedHead struct {
	head []byte
	rev  uint64
}

// fetchRecord reads the thread's head record from the store for refresh;
// nil when there is nothing to read (no cluster, the thread's runs are
// here, no record or the store unreachable: the copy in memory stands).
func (f *Frontend) fetchRecord(th *Thread) *storedHead {
	store := f.cfg.Store
	if store == nil || f.cfg.Cluster == nil || th.owned() {
		return nil
	}
	ctx, cancel := context.WithTimeout(f.closingCtx, f.cfg.StoreTimeout)
	defer cancel()
	head, rev, err := store.Get(ctx, th.id, headKey)
	if err != nil {
		return nil
	}
	return &storedHead{head: head, rev: rev}
}

// applyRecord merges a record fetchRecord read into the thread, with the
// checkpoints it lists that the thread lacks, unless the thread has read
// or written that revision or a later one. It is ordered with the
// thread's own saves (persistMu).
func (f *Frontend) applyRecord(th *Thread, h *storedHead) {
	if h == nil {
		return
	}
	th.rt.persistMu.Lock()
	defer th.rt.persistMu.Unlock()
	// The revision this instance last read or wrote (it changes only under
	// persistMu, held here) is the common case: nothing to merge, and the
	// record, the thread's whole history, is not decoded. Revisions of a
	// record only grow, so an older one was read before a save here and
	// holds nothing new.
	th.mu.Lock()
	if h.rev <= th.rt.rev {
		th.mu.Unlock()
		return
	}
	have := th.rt.checkpointIDs()
	th.mu.Unlock()
	theirs := decodeHead(h.head, th.id, f.cfg.Logger)
	if theirs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(f.closingCtx, f.cfg.StoreTimeout)
	defer cancel()
	if err := readCheckpoints(ctx, f.cfg.Store, theirs, have, f.cfg.Logger); err != nil {
		return // the copy in memory stands
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	th.mergeRecordLocked(*theirs, h.rev)
	if theirs.Seq > th.seq { // events this instance did not mirror
		th.restartLocked(theirs.Seq)
	}
}
