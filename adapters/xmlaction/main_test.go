package xmlaction

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/internal/leaktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaktest.Upstream...)
}
