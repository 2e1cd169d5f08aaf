package responses_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestTenancyEveryPath: with auth on, key B probes key A's responses, a
// finished one and a background one still running, on every path that
// takes a response id. Each answer is the one B gets for an id that names
// nothing (status, content type and body, the id aside), and nothing of
// A's changes: A still reads, continues, cancels and deletes its own.
func TestTenancyEveryPath(t *testing.T) {
	p := startPeer(t)
	cfg := peerConfig(t, p)
	cfg.Auth.Keys = aliceAndBob()
	inst := bridgetest.Start(t, &cfg)
	alice := client{t: t, base: inst.URL, key: "key-a"}
	bob := client{t: t, base: inst.URL, key: "key-b"}

	_, done := alice.create(`{"model":"echo","input":"mine","stream":true}`)
	before := poll(t, alice, done, "completed")
	_, running := alice.create(`{"model":"slow","input":"still thinking","background":true}`)
	poll(t, alice, running, "queued")
	const nobody = "resp_aaaaaaaaaaaaaaaaaaaaaaaaaa" // well formed, names nothing

	for _, id := range []string{done, running} {
		for _, pr := range []struct{ method, path, body string }{
			{"GET", "/v1/responses/ID", ""},
			{"GET", "/v1/responses/ID?stream=true", ""},
			{"GET", "/v1/responses/ID?stream=true&starting_after=2", ""},
			{"GET", "/v1/responses/ID/input_items", ""},
			{"POST", "/v1/responses/ID/cancel", ""},
			{"DELETE", "/v1/responses/ID", ""},
			{"POST", "/v1/responses", `{"model":"echo","input":"yours?","previous_response_id":"ID"}`},
			{"POST", "/v1/responses", `{"model":"echo","input":"yours?","stream":true,"previous_response_id":"ID"}`},
			{"POST", "/v1/responses", `{"model":"gpt-test","input":"yours?","background":true,"previous_response_id":"ID"}`},
		} {
			probe := func(id string) (int, string, string) {
				return bob.raw(pr.method, strings.ReplaceAll(pr.path, "ID", id), strings.ReplaceAll(pr.body, "ID", id))
			}
			status, typ, body := probe(id)
			wantStatus, wantTyp, wantBody := probe(nobody)
			if status != wantStatus || typ != wantTyp || strings.ReplaceAll(body, id, nobody) != wantBody {
				t.Errorf("B's %s %s on A's response: %d %s %s\nfor an unknown id: %d %s %s",
					pr.method, pr.path, status, typ, body, wantStatus, wantTyp, wantBody)
			}
			if status != http.StatusNotFound && status != http.StatusBadRequest {
				t.Errorf("B's %s %s: %d %s, want OpenAI's not-found", pr.method, pr.path, status, body)
			}
		}
	}

	// Nothing of A's moved: the finished response reads the same and
	// continues; the background one still runs until A cancels it; A
	// deletes its own.
	_, after := alice.do("GET", "/v1/responses/"+done, "")
	jsonEqual(t, "A's response after B's probes", before, after)
	alice.want("POST", "/v1/responses", `{"model":"echo","input":"more","previous_response_id":"`+done+`"}`, 200, "")
	poll(t, alice, running, "queued")
	alice.want("POST", "/v1/responses/"+running+"/cancel", "", 200, "")
	poll(t, alice, running, "cancelled")
	alice.want("DELETE", "/v1/responses/"+done, "", 200, `{"id":"`+done+`","object":"response","deleted":true}`)
}

// raw sends a request and returns the status, the content type and the
// body.
func (c client) raw(method, path, body string) (int, string, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}
