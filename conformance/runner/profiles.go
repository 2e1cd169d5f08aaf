package runner

import (
	"slices"

	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/protocols"
)

// canonicalProfile is the backend column of the in-process canonical
// upstream, which is the runner's own, not a protocol's.
var canonicalProfile = &profile.Profile{
	Back: profile.Identity, UpstreamCancel: true,
	Upstream:  "the in-process canonical upstream (conformance/driver), on a bridge of its own reached over NATS",
	BackNotes: []profile.Degradation{{"all", "lossless: the definition's events themselves"}},
}

// profiles by protocol name: each protocol's (Protocol.Conformance) and
// the canonical upstream's.
var profiles = func() map[string]*profile.Profile {
	m := map[string]*profile.Profile{backendCanonical: canonicalProfile}
	for _, p := range protocols.All {
		if p.Conformance != nil {
			m[p.Name] = p.Conformance
		}
	}
	return m
}()

// frontendProtocols are the frontend protocols of the default matrix: the
// protocols with a client and a frontend profile, in the list's order.
var frontendProtocols = func() []string {
	var out []string
	for _, p := range protocols.All {
		if p.Client != nil && p.Conformance != nil && p.Conformance.Front != nil {
			out = append(out, p.Name)
		}
	}
	return out
}()

// FrontendProtocols lists the frontend protocols the runner has a client
// and a profile for, in the matrix's order.
func FrontendProtocols() []string { return slices.Clone(frontendProtocols) }

// backendProtocols are the backend protocols of the matrix: the canonical
// upstream, then the protocols with a backend profile, in the list's
// order.
var backendProtocols = func() []string {
	out := []string{backendCanonical}
	for _, p := range protocols.All {
		if p.Conformance != nil && p.Conformance.Back != nil {
			out = append(out, p.Name)
		}
	}
	return out
}()
