package bridgetest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/canonical"
)

// keyedClient is Call's HTTP client: no connection outlives its request, and
// a request gives up after 30 s (room for a cluster test's failover).
var keyedClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// Call makes a request with method to base+path carrying body as JSON
// (Content-Type: application/json) and the API key in the Authorization
// header as "Bearer "+key, and returns the status code and the whole body.
// Any status is returned; only a failure to send or read fails the test.
func Call(t testing.TB, base, key, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := keyedClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// runClient is PostRun's HTTP client: no connection outlives its request,
// and no timeout but the test's (a run may wait out a cluster failover).
var runClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// PostRun posts a native run (body, JSON) to base's /v1/runs and returns
// its events, one protojson object a line, and the status; the events are
// nil when the status is not 200.
func PostRun(t testing.TB, base, body string) ([]*canonical.Event, int) {
	t.Helper()
	resp, err := runClient.Post(base+"/v1/runs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	wire, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, resp.StatusCode
	}
	var evs []*canonical.Event
	for _, line := range bytes.Split(bytes.TrimSpace(wire), []byte("\n")) {
		ev := &canonical.Event{}
		if err := protojson.Unmarshal(line, ev); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs, 200
}
