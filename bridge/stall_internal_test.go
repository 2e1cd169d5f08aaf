package bridge

import (
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/adapters/scripted"
)

// The agent backend's runs are not bounded per event unless its
// stall_timeout says so (its upstream's heartbeats are its liveness);
// every other backend is, at the option's value or 5m.
func TestStallingDefaults(t *testing.T) {
	ag, err := agent.NewBackend(agent.BackendConfig{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	sc := scripted.New(scripted.Config{})
	for _, tc := range []struct {
		name   string
		got    any
		want   time.Duration // 0: not wrapped
		config time.Duration
	}{
		{"agent default", stalling(ag, "a", 0), 0, 0},
		{"agent configured", stalling(ag, "a", time.Minute), time.Minute, time.Minute},
		{"scripted default", stalling(sc, "s", 0), defaultStallTimeout, 0},
		{"scripted configured", stalling(sc, "s", time.Second), time.Second, time.Second},
		{"scripted off", stalling(sc, "s", -1), 0, -1},
	} {
		sb, wrapped := tc.got.(*stallingBackend)
		switch {
		case tc.want == 0 && wrapped:
			t.Errorf("%s: bounded at %v, want unbounded", tc.name, sb.timeout)
		case tc.want != 0 && (!wrapped || sb.timeout != tc.want):
			t.Errorf("%s (stall_timeout %v): %T, want bounded at %v", tc.name, tc.config, tc.got, tc.want)
		}
	}
}
