package bridgetest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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
