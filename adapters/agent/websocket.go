package agent

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// upgrader accepts any origin: the protocol carries no cookies (an API key,
// if any, is checked by whatever fronts the daemon), and the SDK runs in
// browsers on other origins.
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// wsConn is one thread WebSocket: in-band commands, subscriptions that
// persist across runs, and one reader of the thread's events from the
// replay log, live from the connection's start. Every frame is sent under
// mu, so a subscribe response precedes its replay, and the replay (up to
// where the live reader is) precedes the live events.
type wsConn struct {
	f      *Frontend
	thread string
	c      *wsconn.Conn
	ctx    context.Context // the upgrade request's values (the caller's key)

	mu   sync.Mutex
	subs map[string]*filter
	live *tailReader
	wake chan struct{} // a token when live has news
}

// subRec is a WebSocket subscription, kept so subscription.reconnect can
// restore it on another connection: while its connection is open (owner
// set), and for SubscriptionKeep after.
type subRec struct {
	thread  string
	f       *filter
	owner   *wsConn
	expires time.Time
}

// maxSubsKept bounds the subscriptions kept for reconnect.
const maxSubsKept = 1 << 16

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
	if !f.streamOpen(w, r) {
		return
	}
	ctx := context.WithoutCancel(r.Context()) // past the handler: see wsconn.Upgrade
	thread := r.PathValue("thread_id")
	cn := &wsConn{f: f, thread: thread, ctx: ctx, subs: map[string]*filter{}, wake: make(chan struct{}, 1)}
	last, err := f.cfg.Observer.LastSeq(ctx, thread)
	if err == nil {
		cn.live, err = f.openTail(ctx, thread, last, cn.kick)
	}
	if err != nil {
		canonicalHTTPError(w, err)
		return
	}
	c, err := wsconn.Upgrade(&upgrader, w, r, nil, f.cfg.WebSocket)
	if err != nil {
		cn.live.close()
		return // the upgrader has answered
	}
	cn.c = c
	go cn.serve()
}

func (cn *wsConn) kick() {
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

// serve serves the connection until it ends.
func (cn *wsConn) serve() {
	f := cn.f
	ctx, cancel := context.WithCancel(cn.ctx)
	stopOnShutdown := context.AfterFunc(f.closingCtx, func() { cn.endWhenSettled(ctx, cancel) })
	defer stopOnShutdown()
	pumpDone := make(chan struct{})
	go cn.pump(ctx, pumpDone)
	cn.readLoop(ctx)
	cancel()
	<-pumpDone
	cn.mu.Lock()
	cn.live.close()
	cn.mu.Unlock()
	f.releaseSubs(cn, f.cfg.Now())
	_ = cn.c.Close(wsconn.CloseGoingAway, "")
}

// endWhenSettled ends the connection (cancel) for the server's shutdown,
// once its thread's runs here have ended and the live reader has sent
// their ends (Frontend.settled), or at once when Close stops waiting
// (streamsCtx); it returns early when the connection ends first.
func (cn *wsConn) endWhenSettled(ctx context.Context, cancel context.CancelFunc) {
	t := time.NewTicker(settlePoll)
	defer t.Stop()
	for {
		cn.mu.Lock() // the pump sends what it read under it: at is sent
		at := cn.live.at
		cn.mu.Unlock()
		if cn.f.settled(cn.thread, at) {
			cancel()
			return
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		case <-cn.f.streamsCtx.Done():
			cancel()
			return
		}
	}
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
		switch cmd.method {
		case "subscription.subscribe":
			cn.subscribe(cmd)
		case "subscription.unsubscribe":
			cn.unsubscribe(cmd)
		case "subscription.reconnect":
			cn.reconnect(cmd)
		default:
			result, applied, pe := cn.f.execute(ctx, cn.thread, cmd)
			if pe != nil {
				cn.send(errorFrame(int64(cmd.id), pe))
			} else {
				cn.send(successFrame(cmd.id, result, cn.thread, applied))
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

// pump sends live events that match a subscription. A reader the log
// cannot serve ends the connection's live events with an error frame.
func (cn *wsConn) pump(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	var batch []record
	for {
		cn.mu.Lock()
		var g *gap
		var err error
		batch, g, err = cn.live.read(cn.matchAny, batch[:0])
		if g != nil {
			_ = cn.sendFrame(errorFrame(-1, gapError(g)))
		}
		for i := range batch {
			if cn.sendFrame(batch[i].frame) != nil {
				break
			}
		}
		if err != nil {
			_ = cn.sendFrame(errorFrame(-1, asProtoError(err)))
		}
		cn.mu.Unlock()
		if err != nil {
			return
		}
		if len(batch) > 0 || g != nil || cn.live.more {
			continue
		}
		select {
		case <-cn.wake:
		case <-ctx.Done():
			return
		case <-cn.c.Done():
			return
		}
	}
}

// replay reads the thread's events after since up to where the live
// reader is, that match; g reports events the log no longer holds. Called
// with cn.mu held, so the live reader stays where it is.
func (cn *wsConn) replay(since uint64, match func(*record) bool) (out []record, g *gap, err error) {
	upTo := cn.live.at
	if since >= upTo {
		return nil, nil, nil
	}
	ready := make(chan struct{}, 1)
	t, err := cn.f.openTail(cn.ctx, cn.thread, since, func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, nil, err
	}
	defer t.close()
	upToMatch := func(r *record) bool { return r.seq <= upTo && match(r) }
	for t.at < upTo {
		n := t.at
		var lapsed *gap
		if out, lapsed, err = t.read(upToMatch, out); err != nil {
			return nil, nil, err
		}
		if lapsed != nil {
			g = lapsed
		}
		if t.at == n { // the log has not served them yet
			select {
			case <-ready:
			case <-time.After(cn.f.cfg.StoreTimeout):
				return nil, nil, canonical.Errorf(canonical.CodeUnavailable, "the replay log did not serve the thread's events %d to %d", n+1, upTo)
			}
		}
	}
	return out, g, nil
}

func newSubscriptionID() string { return canonical.NewID("sub-") }

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
	if !cn.f.addSub(id, cn.thread, flt, cn) {
		_ = cn.sendFrame(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.subscribe: the server keeps too many subscriptions.")))
		return
	}
	replay, g, err := cn.replay(since, flt.match)
	if err != nil {
		cn.f.dropSub(id)
		_ = cn.sendFrame(errorFrame(int64(cmd.id), asProtoError(err)))
		return
	}
	cn.answerSubscription(cmd.id, id, flt, replay, g)
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
// its command (with the number of events replayed) and sends the gap
// report, if any, and the replay. Called with cn.mu held.
func (cn *wsConn) answerSubscription(cmdID uint64, id string, flt *filter, replay []record, g *gap) {
	cn.subs[id] = flt
	res := &subscribeResult{SubscriptionID: id, ReplayedEvents: len(replay)}
	_ = cn.sendFrame(successFrame(cmdID, appendJSON(nil, res), cn.thread, cn.live.at))
	if g != nil && cn.sendFrame(errorFrame(-1, gapError(g))) != nil {
		return
	}
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
	cn.f.dropSub(id)
	_ = cn.sendFrame(successFrame(cmd.id, []byte(`{}`), cn.thread, cn.live.at))
}

// addSub registers a live subscription; false when the frontend keeps too
// many (MaxSubscriptions bounds each connection; this bounds connections
// that come and go).
func (f *Frontend) addSub(id, thread string, flt *filter, owner *wsConn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= maxSubsKept {
		now := f.cfg.Now()
		for k, v := range f.subs {
			if v.owner == nil && now.After(v.expires) {
				delete(f.subs, k)
			}
		}
		if len(f.subs) >= maxSubsKept {
			return false
		}
	}
	f.subs[id] = &subRec{thread: thread, f: flt, owner: owner}
	return true
}

// subTaken reports whether id is a subscription of another thread, or of
// another connection that is open: a reconnect naming it (ids are the
// client's to give) gets an id of its own rather than take it over.
func (f *Frontend) subTaken(id, thread string, cn *wsConn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.subs[id]
	return rec != nil && (rec.thread != thread || (rec.owner != nil && rec.owner != cn))
}

func (f *Frontend) dropSub(id string) {
	f.mu.Lock()
	delete(f.subs, id)
	f.mu.Unlock()
}

// releaseSubs keeps a closed connection's subscriptions for reconnect.
func (f *Frontend) releaseSubs(owner *wsConn, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, v := range f.subs {
		if v.owner == owner {
			v.owner, v.expires = nil, now.Add(f.cfg.SubscriptionKeep)
		} else if v.owner == nil && now.After(v.expires) {
			delete(f.subs, k)
		}
	}
}
