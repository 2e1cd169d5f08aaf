package bridge_test

import (
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// A run id a client chose names one run: a second run under it, on any
// instance, is refused (409) rather than numbered from seq 1 again in the
// first one's thread (it was, on another instance: seqs 1..8 twice).
func TestChosenRunIDRunsOnce(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	body := `{"target":"stream","runId":"again","parameters":{"deltas":2},"inputs":[]}`
	first, code := bridgetest.PostRun(t, a.URL, body)
	if code != 200 {
		t.Fatalf("first run: %d", code)
	}
	waitFor(t, func() bool {
		s, _ := a.Fabric().LastSeq(t.Context(), "again")
		return s == first[len(first)-1].GetSeq()
	})
	for _, at := range []*bridgetest.Instance{b, a} {
		if code, body := bridgetest.Call(t, at.URL, "", "POST", "/v1/runs", body); code != 409 || !strings.Contains(body, "already ran") {
			t.Fatalf("the run id again, on %s: %d %s", at.URL, code, body)
		}
	}
}
