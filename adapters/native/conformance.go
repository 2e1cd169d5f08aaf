package native

import (
	"github.com/interlingua-dev/interlingua/conformance/profile"
)

// conformanceProfile is what the protocol's wire keeps of a run, checked
// by the conformance runner (conformance/profile).
var conformanceProfile = &profile.Profile{
	Front: profile.Identity, Replay: true,
	FrontNotes: []profile.Degradation{
		{"all", "lossless: the canonical events themselves (NDJSON); replay with GET /v1/threads/{thread}/events?since=N"},
		profile.HTTPConcurrency,
	},
}
