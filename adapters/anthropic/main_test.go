package anthropic

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// update rewrites the golden files (go test ./adapters/anthropic -update).
var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
