package bridge

import (
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/adapters/scripted"
	"github.com/interlingua-dev/interlingua/canonical"
)

func init() {
	registerBackend("scripted", func(opts *yaml.Node, d BackendDeps) (canonical.Backend, error) {
		var c scripted.Config
		if err := DecodeOptions(opts, &c); err != nil {
			return nil, err
		}
		c.Tools = d.Tools
		return scripted.New(c), nil
	})
}
