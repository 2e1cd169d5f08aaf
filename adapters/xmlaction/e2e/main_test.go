package e2e_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(serviceEnv) != "" {
		os.Exit(serveTools())
	}
	goleak.VerifyTestMain(m)
}
