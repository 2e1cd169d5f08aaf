package scripted

import (
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Protocol is the scripted backend type: canned responses, no frontend.
var Protocol = protocol.Protocol{
	Name: "scripted",
	NewBackend: func(opts *yaml.Node, d protocol.BackendDeps) (canonical.Backend, error) {
		var c Config
		if err := protocol.DecodeOptions(opts, &c); err != nil {
			return nil, err
		}
		c.Tools = d.Tools
		return New(c), nil
	},
	Load: loadProfile,
}
