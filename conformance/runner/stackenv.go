package runner

import (
	"time"

	"github.com/interlingua-dev/interlingua/conformance/cases"
)

func (s *stack) base() string                           { return "http://" + s.client.Addr() }
func (s *stack) target(be string, c *cases.Case) string { return pairTarget(be, c.GetName()) }
func (s *stack) serverParameters() bool                 { return false }
func (s *stack) caseState(c *cases.Case) *caseState     { return s.states[c.GetName()] }
func (s *stack) newClientRelay(rec *recorder, th throttle) (*relay, error) {
	return newRelay(s.client.Addr(), rec, th)
}

// drainCancels drops the cancel reports left by earlier runs (cancel
// cases run one at a time, so what arrives next is this case's).
func (s *stack) drainCancels(be string, c *cases.Case) {
	st := s.states[c.GetName()]
	for {
		select {
		case <-st.cancelled:
			continue
		default:
		}
		break
	}
	var ch <-chan string
	if p := s.peers[be]; p != nil {
		ch = p.Cancelled
	}
	for ch != nil {
		select {
		case <-ch:
			continue
		default:
		}
		break
	}
}

// cancelSeen waits for the upstream's report of the cancel: the canonical
// upstream's or the reference peer's (Peer.Cancelled; the agent peer's is
// the backend's REST cancel). A peer without one cannot be told (Glide's
// chatStream has no cancel).
func (s *stack) cancelSeen(be string, c *cases.Case, d time.Duration) (bool, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	if be == backendCanonical {
		select {
		case <-s.states[c.GetName()].cancelled:
			return true, true
		case <-t.C:
			return false, true
		}
	}
	p := s.peers[be]
	if p == nil || p.Cancelled == nil {
		return false, false
	}
	for {
		select {
		case name := <-p.Cancelled:
			if name == c.GetName() {
				return true, true
			}
		case <-t.C:
			return false, true
		}
	}
}
