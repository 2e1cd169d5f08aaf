package agent

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nuid"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// upgrader accepts any origin: the protocol carries no cookies (an API key,
// if any, is checked by whatever fronts the daemon), and the SDK runs in
// browsers on other origins.
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// wsConn is one thread WebSocket: in-band commands, subscriptions that
// persist across runs, and one cursor over the thread's events. Every frame
// is sent under mu, so a subscribe response precedes its replay, and the
// replay precedes the live events (which all have a higher seq than the
// cursor the replay stopped at).
type wsConn struct {
	f  *Frontend
	th *Thread
	c  *wsconn.Conn

	mu   sync.Mutex
	subs map[string]*filter
	rd   *reader
}

// matchAny matches the union of the connection's subscriptions: a live
// event is sent at most once per connection however many match.
func (cn *wsConn) matchAny(r *record) bool {
	for _, f := range cn.subs {
		if f.match(r) {
			return true
		}
	}
	return false
}

func (f *Frontend) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		w.Header().Set("Upgrade", "websocket")
		httpError(w, http.StatusUpgradeRequired, errInvalidArgument, "GET on a thread stream is a WebSocket upgrade; use POST for SSE")
		return
	}
	th, ok := f.streamThread(w, r)
	if !ok {
		return
	}
	c, err := wsconn.Upgrade(&upgrader, w, r, nil, f.cfg.WebSocket)
	if err != nil {
		return // the upgrader has answered
	}
	th.connOpen()
	go f.serveConn(context.WithoutCancel(r.Context()), th, c) // past the handler: see wsconn.Upgrade
}

// serveConn serves an upgraded connection to th until it ends; reqCtx
// keeps the upgrade request's values (the caller's key).
func (f *Frontend) serveConn(reqCtx context.Context, th *Thread, c *wsconn.Conn) {
	defer th.connClose()
	th.mu.Lock()
	rd := &reader{cursor: th.seq, wake: make(chan struct{}, 1)}
	th.readers[rd] = struct{}{}
	th.mu.Unlock()
	defer th.detach(rd)
	cn := &wsConn{f: f, th: th, c: c, subs: map[string]*filter{}, rd: rd}

	ctx, cancel := context.WithCancel(reqCtx)
	stopOnShutdown := context.AfterFunc(f.closingCtx, cancel)
	defer stopOnShutdown()
	pumpDone := make(chan struct{})
	go cn.pump(ctx, pumpDone)
	cn.readLoop(ctx)
	cancel()
	<-pumpDone
	th.releaseSubs(cn, f.cfg.Now())
	_ = c.Close(wsconn.CloseGoingAway, "")
}

// readLoop reads and executes commands until the connection ends.
func (cn *wsConn) readLoop(ctx context.Context) {
	for {
		_, data, err := cn.c.Read(ctx)
		if err != nil {
			return
		}
		cmd, id, pe := parseCommand(data)
		if pe != nil {
			cn.send(errorFrame(id, pe)) // the connection keeps working
			continue
		}
		cmd.principal = canonical.PrincipalFrom(ctx)
		switch cmd.method {
		case "subscription.subscribe":
			cn.subscribe(cmd)
		case "subscription.unsubscribe":
			cn.unsubscribe(cmd)
		case "subscription.reconnect":
			cn.reconnect(cmd)
		default:
			result, applied, pe := cn.f.execute(cn.th, cmd)
			if pe != nil {
				cn.send(errorFrame(int64(cmd.id), pe))
			} else {
				cn.send(successFrame(cmd.id, result, cn.th.id, applied))
			}
		}
	}
}

func (cn *wsConn) send(frame []byte) {
	cn.mu.Lock()
	_ = cn.sendFrame(frame)
	cn.mu.Unlock()
}

// sendFrame queues a frame, waiting while the send queue is full (a replay
// is backpressure on this connection, not a reason to buffer it all); a
// client that stops reading is cut off by internal/wsconn. Called with
// cn.mu held, so frames keep their order.
func (cn *wsConn) sendFrame(frame []byte) error {
	return cn.c.SendWait(context.Background(), websocket.TextMessage, frame)
}

// pump sends live events after the cursor that match a subscription.
func (cn *wsConn) pump(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	var batch []record
	for {
		cn.mu.Lock()
		var g *gap
		batch, g = cn.th.read(cn.rd, cn.matchAny, sseBatch, batch[:0])
		if g != nil {
			_ = cn.sendFrame(errorFrame(-1, gapError(g)))
		}
		for i := range batch {
			if cn.sendFrame(batch[i].frame) != nil {
				break
			}
		}
		cn.mu.Unlock()
		if len(batch) > 0 || g != nil {
			continue
		}
		select {
		case <-cn.rd.wake:
		case <-ctx.Done():
			return
		case <-cn.c.Done():
			return
		}
	}
}

func newSubscriptionID() string { return "sub-" + nuid.Next() }

func (cn *wsConn) subscribe(cmd *command) {
	flt, pe := parseFilter(cmd.params, "subscription.subscribe")
	if pe != nil {
		cn.send(errorFrame(int64(cmd.id), pe))
		return
	}
	// A since is read as the SSE request's is (langgraph-api's shape),
	// then replayed from, never taken for anything it cannot be.
	var since uint64
	if cmd.params.has("since") {
		var ok bool
		if since, ok = uintParam(cmd.params["since"]); !ok {
			cn.send(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.subscribe: since must be an integer >= 0.")))
			return
		}
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if len(cn.subs) >= cn.f.cfg.MaxSubscriptions {
		_ = cn.sendFrame(errorFrame(int64(cmd.id), perr(errInvalidArgument, fmt.Sprintf("subscription.subscribe: the connection has %d subscriptions (MaxSubscriptions).", len(cn.subs)))))
		return
	}
	id := newSubscriptionID()
	th := cn.th
	th.mu.Lock()
	if !th.addSubLocked(id, flt, cn, cn.f.cfg.Now()) {
		th.mu.Unlock()
		_ = cn.sendFrame(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.subscribe: the thread has too many subscriptions.")))
		return
	}
	applied := th.seq
	replay := th.replayLocked(since, cn.rd.cursor, flt.match, nil)
	th.mu.Unlock()
	cn.answerSubscription(cmd.id, id, flt, replay, applied)
}

// subscribeResult is subscription.subscribe's result.
type subscribeResult struct {
	SubscriptionID string `json:"subscription_id"`
	ReplayedEvents int    `json:"replayed_events"`
}

// reconnectResult is subscription.reconnect's result.
type reconnectResult struct {
	Restored          bool              `json:"restored"`
	MissedEvents      uint64            `json:"missed_events"`
	CurrentNamespaces []namespaceStatus `json:"current_namespaces"`
}

type namespaceStatus struct {
	Namespace []string `json:"namespace"`
	Status    string   `json:"status"`
}

// answerSubscription registers a subscription on the connection, answers
// its command (with the number of events replayed) and sends the replay.
func (cn *wsConn) answerSubscription(cmdID uint64, id string, flt *filter, replay []record, applied uint64) {
	cn.subs[id] = flt
	res := &subscribeResult{SubscriptionID: id, ReplayedEvents: len(replay)}
	_ = cn.sendFrame(successFrame(cmdID, appendJSON(nil, res), cn.th.id, applied))
	for i := range replay {
		if cn.sendFrame(replay[i].frame) != nil {
			return
		}
	}
}

func (cn *wsConn) unsubscribe(cmd *command) {
	id, present, ok := cmd.params.str("subscription_id")
	if !ok || !present || id == "" {
		cn.send(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.unsubscribe requires a subscription_id.")))
		return
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if _, ok := cn.subs[id]; !ok {
		_ = cn.sendFrame(errorFrame(int64(cmd.id), perr(errNoSuchSubscription, fmt.Sprintf("subscription.unsubscribe: no subscription %q on this connection.", id))))
		return
	}
	delete(cn.subs, id)
	cn.th.mu.Lock()
	delete(cn.th.subs, id)
	applied := cn.th.seq
	cn.th.mu.Unlock()
	_ = cn.sendFrame(successFrame(cmd.id, []byte(`{}`), cn.th.id, applied))
}

// reconnect implements subscription.reconnect: the CDDL shape {run_id,
// last_event_id?, subscriptions?}, and the Python shape (recognised by a
// since key) {channels, namespaces?, depth?, since, subscription_id?}.
func (cn *wsConn) reconnect(cmd *command) {
	p := cmd.params
	if p.has("since") {
		cn.reconnectPython(cmd)
		return
	}
	th := cn.th
	run, present, ok := p.str("run_id")
	if !ok || !present || run == "" {
		cn.send(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.reconnect requires a run_id.")))
		return
	}
	var after uint64
	if s, present, ok := p.str("last_event_id"); !ok {
		cn.send(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.reconnect: last_event_id must be a string.")))
		return
	} else if present {
		v, ok := seqText(s)
		if !ok {
			cn.send(errorFrame(int64(cmd.id), perr(errInvalidArgument, fmt.Sprintf("subscription.reconnect: last_event_id %q is not an event id of this server (a decimal seq below 2^53).", s))))
			return
		}
		after = v
	}
	var ids []string
	if p.has("subscriptions") && !decodeInto(p["subscriptions"], &ids) {
		cn.send(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.reconnect: subscriptions must be an array of subscription ids.")))
		return
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	th.mu.Lock()
	ri := th.runInfo(run)
	if ri == nil {
		th.mu.Unlock()
		_ = cn.sendFrame(errorFrame(int64(cmd.id), perr(errNoSuchRun, fmt.Sprintf("subscription.reconnect: no run %q on thread %q.", run, th.id))))
		return
	}
	applied := th.seq
	now := cn.f.cfg.Now()
	restored := true
	var flts []*filter
	for _, id := range ids {
		if f, ok := cn.subs[id]; ok {
			flts = append(flts, f)
			continue
		}
		rs, ok := th.subs[id]
		if !ok || (rs.owner == nil && now.After(rs.expires)) || len(cn.subs) >= cn.f.cfg.MaxSubscriptions {
			restored = false
			continue
		}
		rs.owner, rs.expires = cn, time.Time{} // the subscription moves to this connection
		cn.subs[id] = rs.f
		flts = append(flts, rs.f)
	}
	match := func(r *record) bool {
		for _, f := range flts {
			if f.match(r) {
				return true
			}
		}
		return false
	}
	var missed uint64
	var lapsed *gap // events after last_event_id no longer buffered: reported in band, as on every path
	if oldest := th.oldest(); after+1 < oldest {
		missed = th.missedLocked(after, match)
		lapsed = &gap{since: after, minAvail: oldest}
	}
	replay := th.replayLocked(after, cn.rd.cursor, match, nil)
	res := &reconnectResult{Restored: restored, MissedEvents: missed, CurrentNamespaces: make([]namespaceStatus, 0, len(ri.order))}
	for _, k := range ri.order {
		s := ri.status[k]
		res.CurrentNamespaces = append(res.CurrentNamespaces, namespaceStatus{Namespace: s.ns, Status: s.status})
	}
	th.mu.Unlock()
	_ = cn.sendFrame(successFrame(cmd.id, appendJSON(nil, res), cn.th.id, applied))
	if lapsed != nil && cn.sendFrame(errorFrame(-1, gapError(lapsed))) != nil {
		return
	}
	for i := range replay {
		if cn.sendFrame(replay[i].frame) != nil {
			return
		}
	}
}

// reconnectPython is langgraph-api's subscription.reconnect: a subscribe
// that replays from since, or resume_gap when the buffer no longer reaches
// back.
func (cn *wsConn) reconnectPython(cmd *command) {
	p := cmd.params
	flt, pe := parseFilter(p, "subscription.reconnect")
	if pe != nil {
		cn.send(errorFrame(int64(cmd.id), pe))
		return
	}
	since, ok := uintParam(p["since"])
	if !ok {
		cn.send(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.reconnect: since must be an integer >= 0.")))
		return
	}
	id, _, ok := p.str("subscription_id")
	if !ok {
		cn.send(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.reconnect: subscription_id must be a string.")))
		return
	}
	if id == "" {
		id = newSubscriptionID()
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	th := cn.th
	th.mu.Lock()
	if oldest := th.oldest(); since+1 < oldest {
		th.mu.Unlock()
		_ = cn.sendFrame(errorFrame(int64(cmd.id), &protoError{Code: errResumeGap,
			Message: fmt.Sprintf("events after seq %d are no longer buffered", since),
			Extra:   []extraField{{"since", int64(since)}, {"min_available_seq", int64(oldest)}}}))
		return
	}
	if _, exists := cn.subs[id]; !exists && len(cn.subs) >= cn.f.cfg.MaxSubscriptions {
		th.mu.Unlock()
		_ = cn.sendFrame(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.reconnect: too many subscriptions (MaxSubscriptions).")))
		return
	}
	if !th.addSubLocked(id, flt, cn, cn.f.cfg.Now()) {
		th.mu.Unlock()
		_ = cn.sendFrame(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.reconnect: the thread has too many subscriptions.")))
		return
	}
	applied := th.seq
	replay := th.replayLocked(since, cn.rd.cursor, flt.match, nil)
	th.mu.Unlock()
	cn.answerSubscription(cmd.id, id, flt, replay, applied)
}
