// Package protocols lists the protocols the program speaks. It is the only
// place outside an adapter's folder that names one (TestOneImporter checks
// it): the bridge, the conformance runner, the bench harness and the CLI
// iterate over All.
package protocols

import (
	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/adapters/anthropic"
	"github.com/interlingua-dev/interlingua/adapters/evergreen"
	"github.com/interlingua-dev/interlingua/adapters/glide"
	"github.com/interlingua-dev/interlingua/adapters/native"
	"github.com/interlingua-dev/interlingua/adapters/openai"
	"github.com/interlingua-dev/interlingua/adapters/responses"
	"github.com/interlingua-dev/interlingua/adapters/scripted"
	"github.com/interlingua-dev/interlingua/adapters/triton"
	"github.com/interlingua-dev/interlingua/adapters/xmlaction"
	"github.com/interlingua-dev/interlingua/protocol"
)

// All is every protocol. The order is the conformance matrix's (rows and
// columns of docs/conformance.md) and the order frontends mount in, which
// does not matter: the ServeMux refuses conflicting patterns whatever the
// order, and close hooks run concurrently.
var All = []protocol.Protocol{
	native.Protocol,
	triton.Protocol,
	evergreen.Protocol,
	glide.Protocol,
	xmlaction.Protocol,
	agent.Protocol,
	openai.Protocol,
	responses.Protocol,
	anthropic.Protocol,
	scripted.Protocol,
}

// Get returns the protocol named name, or nil.
func Get(name string) *protocol.Protocol {
	for i := range All {
		if All[i].Name == name {
			return &All[i]
		}
	}
	return nil
}
