package responses_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestStalledReader: a client that asks for a long stream on
// /v1/responses, reads the headers and stops reading blocks neither the
// daemon nor another client (bridgetest.CheckStall), and the stored
// response says it was cancelled. (A Responses request carries no
// scripted parameters, so the long stream is the echo of a 6 MiB prompt,
// a 4 KiB word per delta.)
func TestStalledReader(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.WriteTimeout = time.Second
	inst := bridgetest.Start(t, &cfg)
	id := ""
	inst.CheckStall(t, bridgetest.Stall{
		Path:  "/v1/responses",
		Small: `{"model":"echo","stream":true,"input":"still served"}`,
		Long:  `{"model":"echo","stream":true,"input":"` + strings.Repeat(" "+strings.Repeat("x", 4095), 1536) + `"}`,
		Served: func(got string) bool {
			return strings.Contains(got, `"delta":" served"`) && strings.HasSuffix(got, "data: [DONE]\n\n")
		},
		Stalled: func(rd *bufio.Reader) {
			for id == "" { // the first event names the response
				line, err := rd.ReadString('\n')
				if err != nil {
					t.Fatalf("the stalled client's first event: %v", err)
				}
				if m := firstID.FindStringSubmatch(line); m != nil {
					id = m[1]
				}
			}
		},
	})
	resp, err := noKeepAlive.Get(inst.URL + "/v1/responses/" + id)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(got), `"status":"cancelled"`) {
		t.Fatalf("the stalled client's response is stored as %.300s, want status cancelled", got)
	}
}

// noKeepAlive is the tests' client: it keeps no connection (and no
// goroutine) open between requests.
var noKeepAlive = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
