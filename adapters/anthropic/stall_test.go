package anthropic_test

import (
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestStalledReader: a client that asks for a long stream on
// /v1/messages, reads the headers and stops reading blocks neither the
// daemon nor another client (bridgetest.CheckStall).
func TestStalledReader(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.WriteTimeout = time.Second
	bridgetest.Start(t, &cfg).CheckStall(t, bridgetest.Stall{
		Path:  "/v1/messages",
		Small: `{"model":"echo","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"still served"}]}`,
		Long: `{"model":"stream","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"x"}],"deltas":100000,"delta_text":"` +
			strings.Repeat("x", 4096) + `"}`,
		Served: func(got string) bool {
			return strings.Contains(got, `"text":" served"`) &&
				strings.HasSuffix(got, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		},
		Target: "stream",
	})
}
