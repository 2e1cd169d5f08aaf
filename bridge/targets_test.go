package bridge_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// GET /v1/targets lists the targets a key may name, with their backend and
// the backend's type.
func TestTargetsListed(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{
		{Name: "a", Hash: bridge.KeyDigest("key-a")},
		{Name: "b", Hash: bridge.KeyDigest("key-b"), Targets: []string{"demo-*"}},
	}
	inst := bridgetest.Start(t, &cfg)
	for key, want := range map[string]string{
		"key-a": `{"targets":[{"name":"cortex-example","backend":"scripted","type":"scripted"},{"name":"demo-agent","backend":"scripted","type":"scripted"},{"name":"demo-approval","backend":"scripted","type":"scripted"},{"name":"echo","backend":"scripted","type":"scripted"},{"name":"stream","backend":"scripted","type":"scripted"}]}`,
		"key-b": `{"targets":[{"name":"demo-agent","backend":"scripted","type":"scripted"},{"name":"demo-approval","backend":"scripted","type":"scripted"}]}`,
	} {
		req, _ := http.NewRequest("GET", inst.URL+"/v1/targets", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != want {
			t.Errorf("%s: %d %s\nwant %s", key, resp.StatusCode, body, want)
		}
	}
}
