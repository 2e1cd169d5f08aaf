package bridge_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// TestRemoteRunKeepsItsKey: a run placed on another instance runs there
// as its caller's key, as a local run does. An XML route's model output
// starts nested runs (its agent actions); here the model echoes the
// prompt, an action naming a target the key may not use, so the action is
// refused (not_found: to the key the target does not exist) on one
// instance and, the same, when the route runs on the instance that hosts
// its backend. Before, a placed run carried no key there: its nested runs
// reached any target (the action ran).
func TestRemoteRunKeepsItsKey(t *testing.T) {
	ns := natsServer(t)
	keys := []bridge.APIKey{{Name: "a", Hash: bridge.KeyDigest("key-a"), Targets: []string{"xml-echo"}}}
	withAnalyzer := func(c *bridge.Config) *bridge.Config {
		c.Routes = append(c.Routes, bridge.Route{Target: "xml-echo", Backend: "scripted", Model: "echo", XML: true},
			bridge.Route{Target: "secret_target", Backend: "scripted", Model: "echo"})
		c.Auth.Keys = keys
		return c
	}
	alone := bridgetest.Start(t, withAnalyzer(ptr(bridge.DefaultConfig())))
	bridgetest.Start(t, withAnalyzer(clusterConfig(ns.ClientURL())))                   // hosts scripted
	client := bridgetest.Start(t, withAnalyzer(clusterConfig(ns.ClientURL(), "none"))) // hosts nothing
	want := actionOutcomes(t, alone.URL)
	if want["a1"] != canonical.CodeNotFound.String() {
		t.Fatalf("on one instance: %v, want a1 not_found", want)
	}
	if got := actionOutcomes(t, client.URL); !equalOutcomes(got, want) {
		t.Errorf("placed on another instance: %v\non one instance: %v", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// actionOutcomes runs xml-echo as key-a with an agent action for
// secret_target and returns each action's outcome: "ok", or the code of
// its failure.
func actionOutcomes(t *testing.T, base string) map[string]string {
	t.Helper()
	prompt := `<action type="agent" mode="sync" id="a1">{"name": "secret_target", "parameters": {}}</action>`
	body := `{"target":"xml-echo","inputs":[{"name":"prompt","node":{"role":"user","data":"` + base64.StdEncoding.EncodeToString([]byte(prompt)) + `"}}]}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/runs", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer key-a")
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	wire, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, wire)
	}
	out := map[string]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(wire), []byte("\n")) {
		ev := &canonical.Event{}
		if err := protojson.Unmarshal(line, ev); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch {
		case ev.GetToolFinished() != nil:
			out[ev.GetToolFinished().GetToolCallId()] = "ok"
		case ev.GetToolFailed() != nil:
			out[ev.GetToolFailed().GetToolCallId()] = canonical.Code(ev.GetToolFailed().GetError().GetCode()).String()
		}
	}
	return out
}

func equalOutcomes(a, b map[string]string) bool {
	ka, kb := keysOf(a), keysOf(b)
	if strings.Join(ka, ",") != strings.Join(kb, ",") {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func keysOf(m map[string]string) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}
