package glide

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// update rewrites the golden files in testdata/ instead of comparing.
var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
