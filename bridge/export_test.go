package bridge

import (
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// WarnUnserved is warnUnserved, for the tests of the start-up warnings.
func (t *ToolRegistry) WarnUnserved(alone bool, wait time.Duration) { t.warnUnserved(alone, wait) }

// BuildBackends is buildBackends, for the tests of options errors.
func BuildBackends(cfg Config, deps protocol.BackendDeps) (map[string]canonical.Backend, error) {
	return buildBackends(cfg, deps)
}

// TailWindow is how many of a thread's latest events an instance keeps
// for its observers (tail.go).
const TailWindow = tailWindow
