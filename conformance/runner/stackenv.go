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
	switch be {
	case backendTriton:
		ch = s.tritonPeer.Cancelled()
	case backendEvergreen:
		ch = s.evergreenPeer.Cancelled()
	case backendAgent:
		ch = s.agentPeer.Cancelled()
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
// upstream's, the Triton peer's, the Evergreen peer's or the agent peer's
// (the backend's REST cancel). A Glide upstream cannot be told (chatStream
// has no cancel).
func (s *stack) cancelSeen(be string, c *cases.Case, d time.Duration) (bool, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	var ch <-chan string
	switch be {
	case backendCanonical:
		select {
		case <-s.states[c.GetName()].cancelled:
			return true, true
		case <-t.C:
			return false, true
		}
	case backendTriton:
		ch = s.tritonPeer.Cancelled()
	case backendEvergreen:
		ch = s.evergreenPeer.Cancelled()
	case backendAgent:
		ch = s.agentPeer.Cancelled() // the REST cancel of the run
	}
	if ch != nil {
		for {
			select {
			case name := <-ch:
				if name == c.GetName() {
					return true, true
				}
			case <-t.C:
				return false, true
			}
		}
	}
	return false, false
}
