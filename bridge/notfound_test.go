package bridge_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

var requestID = regexp.MustCompile(`"request_id":"req_[0-9a-f]+"`)

// A path under /v1/ that no frontend serves is a 404 in the calling SDK's
// error form (the frontends' own refusals): Anthropic's for a request
// with anthropic-version, OpenAI's otherwise; a path a frontend serves
// with other methods keeps its 405, and a path outside /v1/ net/http's
// own 404.
func TestUnknownAPIPathAnswersInTheSDKsForm(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	for _, c := range []struct {
		method, path string
		header       http.Header
		status       int
		contentType  string
		body         string
	}{
		{"POST", "/v1/embeddings", nil, 404, "application/json",
			`{"error":{"message":"Invalid URL (POST /v1/embeddings)","type":"invalid_request_error","param":null,"code":"not_found"}}` + "\n"},
		{"POST", "/v1/complete", http.Header{"Anthropic-Version": {"2023-06-01"}}, 404, "application/json",
			`{"type":"error","error":{"type":"not_found_error","message":"Invalid URL (POST /v1/complete)"},"request_id":"req_ID"}`},
		{"GET", "/v1/chat/completions", nil, 405, "application/json",
			`{"error":{"message":"Invalid method for URL (GET /v1/chat/completions)","type":"invalid_request_error","param":null,"code":null}}` + "\n"},
		{"GET", "/nothing", nil, 404, "text/plain; charset=utf-8", "404 page not found\n"},
	} {
		req, err := http.NewRequest(c.method, inst.URL+c.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = requestID.ReplaceAll(body, []byte(`"request_id":"req_ID"`)) // Anthropic's, random
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != c.contentType || string(body) != c.body {
			t.Errorf("%s %s: %d %s %q; want %d %s %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.status, c.contentType, c.body)
		}
	}
}
