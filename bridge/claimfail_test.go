package bridge_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// A threadless run whose client-chosen run id names another key's thread
// is refused before it starts (its thread cannot be claimed: 409 on the
// native wire): nothing is appended to the other key's thread, and no
// event tells the caller how far that thread has got. (The failure was
// once a run event, numbered after the other key's last and appended to
// its thread's log.)
func TestRefusedClaimLeavesTheThreadAlone(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "a", Hash: bridge.KeyDigest("key-a")}, {Name: "b", Hash: bridge.KeyDigest("key-b")}}
	inst := bridgetest.Start(t, &cfg)
	if code, body := bridgetest.Call(t, inst.URL, "key-a", "POST", "/v1/runs", `{"target":"echo","threadId":"t-a","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`); code != 200 {
		t.Fatalf("a's run: %d %s", code, body)
	}
	code, body := bridgetest.Call(t, inst.URL, "key-b", "POST", "/v1/runs", `{"target":"echo","runId":"t-a","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`)
	if code != 409 || !strings.Contains(body, `thread \"t-a\" already exists`) {
		t.Fatalf("b's run on a's thread id: %d %s", code, body)
	}
	// a's thread, after its own run's last event, for a second: nothing.
	ctx, cancel := context.WithTimeout(canonical.WithPrincipal(context.Background(), &canonical.Principal{Name: "a"}), time.Second)
	defer cancel()
	o, err := inst.Bridge().Observe(ctx, "t-a", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for {
		ev, err := o.Recv()
		if err != nil {
			break
		}
		if ev.GetRunId() == "t-a" {
			t.Fatalf("b's refused run wrote into a's thread: %v", ev)
		}
	}
}
