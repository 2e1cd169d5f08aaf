package bridge_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// A method a path does not take is 405 with Allow, in the path's
// protocol's error form (ServeMux's own 405 is plain text).
func TestMethodNotAllowedForms(t *testing.T) {
	cfg := bridge.DefaultConfig()
	inst := bridgetest.Start(t, &cfg)
	for _, tc := range []struct{ method, path, allow, body string }{
		{"GET", "/v1/runs", "POST", `{"code":"unimplemented","message":"method GET is not allowed on /v1/runs: use POST"}` + "\n"},
		{"POST", "/v1/threads/t1/events", "GET", `{"code":"unimplemented","message":"method POST is not allowed on /v1/threads/t1/events: use GET"}` + "\n"},
		{"GET", "/v1/xml/stream", "POST", `<error code="unimplemented">method GET is not allowed on /v1/xml/stream: use POST</error>` + "\n"},
	} {
		req, _ := http.NewRequest(tc.method, inst.URL+tc.path, strings.NewReader(""))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != tc.allow || string(body) != tc.body {
			t.Errorf("%s %s: %d Allow %q %q; want 405 Allow %q %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), body, tc.allow, tc.body)
		}
	}
}
