package bench

import (
	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// The harness names no protocol: what it can drive is read from the
// protocol values (protocols.All, each one's Load).

// benchTarget is the target (model, router, target id) every upstream
// serves and every bridge route names.
const benchTarget = "bench"

// scriptBackend is the name of the bridge backend, of the scripted
// protocol's type, that pairs without a peer route to.
const scriptBackend = "bench-script"

// Frontends are the frontend protocols the harness has a client for, in
// the protocol list's order.
var Frontends = names(func(p *protocol.Protocol) bool { return isFrontend(p) })

// Backends are the backend protocols it can drive: those with a reference
// upstream (a direct path), the scripted ones, and the route wrappers
// (around the scripted backend).
var Backends = append(append(
	names(func(p *protocol.Protocol) bool { return hasPeer(p) }),
	names(func(p *protocol.Protocol) bool { return isScripted(p) })...),
	names(func(p *protocol.Protocol) bool { return p.WrapRoute != nil && scriptedProtocol() != nil })...)

func names(keep func(p *protocol.Protocol) bool) []string {
	var out []string
	for i := range protocols.All {
		if keep(&protocols.All[i]) {
			out = append(out, protocols.All[i].Name)
		}
	}
	return out
}

// isFrontend: p has a frontend and a load client of it.
func isFrontend(p *protocol.Protocol) bool {
	return p.Mount != nil && p.Load != nil && p.Load.NewClient != nil
}

// hasPeer: p has a backend and a reference upstream for it.
func hasPeer(p *protocol.Protocol) bool {
	return p.NewBackend != nil && p.Load != nil && p.Load.NewUpstream != nil
}

// isScripted: p's backend streams what the request's parameters ask for.
func isScripted(p *protocol.Protocol) bool {
	return p.NewBackend != nil && p.Load != nil && p.Load.Scripted
}

// frontendLoad is the load part of frontend protocol name; nil when it is
// none (validate refuses it first).
func frontendLoad(name string) *load.Load {
	if p := protocols.Get(name); p != nil && isFrontend(p) {
		return p.Load
	}
	return nil
}

// scriptedProtocol is the first scripted backend protocol, or nil.
func scriptedProtocol() *protocol.Protocol {
	for i := range protocols.All {
		if isScripted(&protocols.All[i]) {
			return &protocols.All[i]
		}
	}
	return nil
}

// referenceFrontend is the frontend the report's single-protocol
// scenarios use (Load.Reference), or the first frontend.
func referenceFrontend() *protocol.Protocol {
	for i := range protocols.All {
		if p := &protocols.All[i]; isFrontend(p) && p.Load.Reference {
			return p
		}
	}
	return protocols.Get(Frontends[0])
}

// scriptedName is the scripted backend protocol's name, for the report.
func scriptedName() string {
	if p := scriptedProtocol(); p != nil {
		return p.Name
	}
	return "none"
}
