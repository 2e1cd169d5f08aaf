package ssetest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/sse/ssetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An sse.Writer takes a Discard (it can flush), and what it flushes is
// counted, not kept.
func TestDiscard(t *testing.T) {
	d := ssetest.NewDiscard()
	sw, err := sse.NewWriter(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.QueueData([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	if d.Bytes != int64(len("data: x\n\n")) {
		t.Fatalf("%d bytes written, want %d", d.Bytes, len("data: x\n\n"))
	}
}
