package agent

import (
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// EncodeFrames encodes one canonical event to complete frames (seqs from 1
// per call), for the external tests.
func EncodeFrames(enc *Encoder, ev *canonical.Event) ([][]byte, error) {
	out, err := enc.Encode(ev, nil)
	frames := make([][]byte, len(out))
	for i := range out {
		frames[i] = newFrame(uint64(i+1), &out[i])
	}
	return frames, err
}

// Update is the -update flag (one flag set serves both test packages).
var Update = update

// KeptStreams counts the event streams b keeps open between runs.
func KeptStreams(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.kept)
}

// WireFrames is the agent-protocol frames ev carries (the runtime's
// encoding), "ref:<checkpoint>" for a values event whose state is its
// checkpoint's.
func WireFrames(ev *canonical.Event) []string {
	var out []string
	for _, r := range wireRecords(ev, nil) {
		if r.frame == nil {
			out = append(out, "ref:"+r.ref)
			continue
		}
		out = append(out, string(r.frame))
	}
	return out
}

// SlowDrain holds the frontend's reading of each run it started for d
// after the run's end, until the test ends; call it before starting the
// server, whose cleanup must run first.
func SlowDrain(t testing.TB, d time.Duration) {
	drainDelay = d
	t.Cleanup(func() { drainDelay = 0 })
}
