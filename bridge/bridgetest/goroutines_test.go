package bridgetest

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ourGoroutines counts a goroutine of the project's code left waiting,
// and stops counting it once it returns: what CheckStall's leak check
// rests on.
func TestOurGoroutinesCountsOurs(t *testing.T) {
	base := ourGoroutines()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); <-stop }()
	if n := ourGoroutines(); n != base+1 {
		t.Fatalf("%d of ours with one more waiting, %d before", n, base)
	}
	close(stop)
	<-done
	if n := SettledGoroutines(); n != base {
		t.Fatalf("%d of ours after it returned, %d before", n, base)
	}
}
