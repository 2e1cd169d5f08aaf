package agent

import (
	"fmt"
)

// reconnect implements subscription.reconnect: the CDDL shape {run_id,
// last_event_id?, subscriptions?}, and the Python shape (recognised by a
// since key) {channels, namespaces?, depth?, since, subscription_id?}.
func (cn *wsConn) reconnect(cmd *command) {
	p := cmd.params
	if p.has("since") {
		cn.reconnectPython(cmd)
		return
	}
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
	rec, _, err := cn.f.readState(cn.ctx, cn.thread)
	if err != nil {
		cn.send(errorFrame(int64(cmd.id), asProtoError(err)))
		return
	}
	var tree *runTree
	if rec != nil {
		tree = rec.tree(run)
	}
	if tree == nil {
		cn.send(errorFrame(int64(cmd.id), perr(errNoSuchRun, fmt.Sprintf("subscription.reconnect: no run %q on thread %q.", run, cn.thread))))
		return
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	restored, flts := cn.restoreSubs(ids)
	match := func(r *record) bool {
		for _, f := range flts {
			if f.match(r) {
				return true
			}
		}
		return false
	}
	replay, lapsed, err := cn.replay(after, match)
	if err != nil {
		_ = cn.sendFrame(errorFrame(int64(cmd.id), asProtoError(err)))
		return
	}
	res := &reconnectResult{Restored: restored, CurrentNamespaces: make([]namespaceStatus, 0, len(tree.NS))}
	if lapsed != nil { // the events between, of any channel
		res.MissedEvents = lapsed.minAvail - lapsed.since - 1
	}
	for i, ns := range tree.NS {
		res.CurrentNamespaces = append(res.CurrentNamespaces, namespaceStatus{Namespace: ns, Status: tree.Status[i]})
	}
	_ = cn.sendFrame(successFrame(cmd.id, appendJSON(nil, res), cn.thread, cn.live.at))
	if lapsed != nil && cn.sendFrame(errorFrame(-1, gapError(lapsed))) != nil {
		return
	}
	for i := range replay {
		if cn.sendFrame(replay[i].frame) != nil {
			return
		}
	}
}

// restoreSubs moves the subscriptions ids names to this connection, as
// far as they are kept; restored is false when one is not, or none is
// named (nothing is subscribed then: the client must subscribe again).
// Called with cn.mu held.
func (cn *wsConn) restoreSubs(ids []string) (restored bool, flts []*filter) {
	f := cn.f
	now := f.cfg.Now()
	restored = len(ids) > 0
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if flt, ok := cn.subs[id]; ok {
			flts = append(flts, flt)
			continue
		}
		rs, ok := f.subs[id]
		if !ok || rs.thread != cn.thread || (rs.owner == nil && now.After(rs.expires)) || len(cn.subs) >= f.cfg.MaxSubscriptions {
			restored = false
			continue
		}
		rs.owner, rs.expires = cn, now // the subscription moves to this connection
		cn.subs[id] = rs.f
		flts = append(flts, rs.f)
	}
	return restored, flts
}

// reconnectPython is langgraph-api's subscription.reconnect: a subscribe
// that replays from since, or resume_gap when the log no longer reaches
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
	if id == "" || cn.f.subTaken(id, cn.thread, cn) {
		id = newSubscriptionID()
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if _, exists := cn.subs[id]; !exists && len(cn.subs) >= cn.f.cfg.MaxSubscriptions {
		_ = cn.sendFrame(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.reconnect: too many subscriptions (MaxSubscriptions).")))
		return
	}
	replay, lapsed, err := cn.replay(since, flt.match)
	switch {
	case err != nil:
		_ = cn.sendFrame(errorFrame(int64(cmd.id), asProtoError(err)))
		return
	case lapsed != nil:
		_ = cn.sendFrame(errorFrame(int64(cmd.id), &protoError{Code: errResumeGap,
			Message: fmt.Sprintf("events after seq %d are no longer buffered", since),
			Extra:   []extraField{{"since", int64(since)}, {"min_available_seq", int64(lapsed.minAvail)}}}))
		return
	}
	if !cn.f.addSub(id, cn.thread, flt, cn) {
		_ = cn.sendFrame(errorFrame(int64(cmd.id), perr(errInvalidArgument, "subscription.reconnect: the server keeps too many subscriptions.")))
		return
	}
	cn.answerSubscription(cmd.id, id, flt, replay, nil)
}
