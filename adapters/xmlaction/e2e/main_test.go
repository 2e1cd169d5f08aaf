package e2e_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/internal/leaktest"
)

func TestMain(m *testing.M) {
	if os.Getenv(serviceEnv) != "" {
		os.Exit(serveTools())
	}
	goleak.VerifyTestMain(m, leaktest.Upstream...)
}
