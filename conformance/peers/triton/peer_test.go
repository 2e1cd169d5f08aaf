package tritonpeer

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

func post(t *testing.T, url, body string) (int, string, string) {
	t.Helper()
	resp, err := client.Post(url, "", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestPeer(t *testing.T) {
	p := New(
		Model{RequireMaxTokens: true},
		Model{Name: "chunks", Chunks: []string{"a\"", " \xf0\x9f", "\x98\x80"}, CRLF: true, NoSpace: true, WriteSize: 3},
		Model{Name: "cumulative", Chunks: []string{"a", "b", "c"}, Cumulative: true, Extra: true},
		Model{Name: "fails", Chunks: []string{"a", "b"}, ErrorMessage: "boom", ErrorAt: 1},
		Model{Name: "fails-first", ErrorMessage: "An Error Occurred", ErrorAt: 0},
	)
	srv := httptest.NewServer(p)
	defer srv.Close()
	const sse = "text/event-stream; charset=utf-8"
	for _, tc := range []struct {
		path, body   string
		status       int
		ctype, reply string
	}{
		{"/v2/models/ensemble/generate_stream", `{"text_input":"hello big world","max_tokens":4,"stream":true}`, 200, sse,
			"data: {\"model_name\":\"ensemble\",\"model_version\":\"1\",\"text_output\":\"hello\"}\n\n" +
				"data: {\"model_name\":\"ensemble\",\"model_version\":\"1\",\"text_output\":\" big\"}\n\n" +
				"data: {\"model_name\":\"ensemble\",\"model_version\":\"1\",\"text_output\":\" world\"}\n\n"},
		{"/v2/models/ensemble/generate_stream", `{"text_input":"hi","max_tokens":4}`, 200, sse,
			"data: {\"model_name\":\"ensemble\",\"model_version\":\"1\",\"text_output\":\"hihi\"}\n\n"},
		{"/v2/models/ensemble/generate", `{"id":"9","text_input":"hi","max_tokens":4,"exclude_input_in_output":true}`, 200, "application/json",
			`{"id":"9","model_name":"ensemble","model_version":"1","text_output":"hi"}`},
		{"/v2/models/ensemble/generate", `{"text_input":"a b","max_tokens":4,"stream":true}`, 200, "application/json",
			`{"error":"generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses"}`},
		{"/v2/models/ensemble/generate", `{"text_input":"hi"}`, 400, "application/json",
			`{"error":"[request id: <id_unknown>] expected number of inputs between 1 and 7 but got 1 inputs for model 'ensemble'. Got input(s) ['text_input'], but missing required input(s) ['max_tokens']. Please provide all required input(s)."}`},
		{"/v2/models/ensemble/generate", `{"text_input":"hi","max_tokens":4,"stream":"yes"}`, 500, "application/json",
			`{"error":"Unable to parse 'data': attempt to access JSON non-boolean as boolean"}`},
		{"/v2/models/ensemble/generate", `{"text_input":"hi","max_tokens":4,"p":[1]}`, 400, "application/json",
			`{"error":"parameter 'p' has invalid type. It should be either 'int', 'bool', or 'string'."}`},
		{"/v2/models/nope/generate", `{}`, 400, "application/json", `{"error":"Request for unknown model: 'nope' is not found"}`},
		{"/v2/models/chunks/generate_stream", `{"text_input":"x","stream":true}`, 200, sse,
			"data:{\"model_name\":\"chunks\",\"model_version\":\"1\",\"text_output\":\"a\\\"\"}\r\n\r\n" +
				"data:{\"model_name\":\"chunks\",\"model_version\":\"1\",\"text_output\":\" \xf0\x9f\"}\r\n\r\n" +
				"data:{\"model_name\":\"chunks\",\"model_version\":\"1\",\"text_output\":\"\x98\x80\"}\r\n\r\n"},
		{"/v2/models/cumulative/generate_stream", `{"text_input":"x","stream":true}`, 200, sse,
			"data: {\"batch_index\":0,\"context_logits\":0.0,\"cum_log_probs\":0.0,\"generation_logits\":0.0,\"model_name\":\"cumulative\",\"model_version\":\"1\",\"output_log_probs\":[0.0,0.0,0.0],\"text_output\":\"a\"}\n\n" +
				"data: {\"batch_index\":0,\"context_logits\":0.0,\"cum_log_probs\":0.0,\"generation_logits\":0.0,\"model_name\":\"cumulative\",\"model_version\":\"1\",\"output_log_probs\":[0.0,0.0,0.0],\"text_output\":\"ab\"}\n\n" +
				"data: {\"batch_index\":0,\"context_logits\":0.0,\"cum_log_probs\":0.0,\"generation_logits\":0.0,\"model_name\":\"cumulative\",\"model_version\":\"1\",\"output_log_probs\":[0.0,0.0,0.0],\"text_output\":\"abc\"}\n\n"},
		{"/v2/models/fails/generate_stream", `{"text_input":"x","stream":true}`, 200, sse,
			"data: {\"model_name\":\"fails\",\"model_version\":\"1\",\"text_output\":\"a\"}\n\ndata: {\"error\":\"boom\"}\n\n"},
		{"/v2/models/fails-first/generate_stream", `{"text_input":"x","stream":true}`, 500, sse, "data: {\"error\":\"An Error Occurred\"}\n\n"},
	} {
		status, ctype, reply := post(t, srv.URL+tc.path, tc.body)
		if status != tc.status || ctype != tc.ctype || reply != tc.reply {
			t.Errorf("%s %s:\n got %d %q %q\nwant %d %q %q", tc.path, tc.body, status, ctype, reply, tc.status, tc.ctype, tc.reply)
		}
	}
	if n := len(p.Requests()); n != 11 { // the unknown model is refused before
		t.Errorf("%d requests recorded, want 11", n)
	}
	resp, err := client.Get(srv.URL + "/v2/models/ensemble")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"name":"text_input","datatype":"BYTES"`) {
		t.Errorf("metadata: %d %s", resp.StatusCode, b)
	}
}

// TestPeerHangCancelled: a hanging stream reports the client leaving.
func TestPeerHangCancelled(t *testing.T) {
	p := New(Model{Name: "hang", Chunks: []string{"a"}, Hang: true})
	srv := httptest.NewServer(p)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v2/models/hang/generate_stream", strings.NewReader(`{"text_input":"x","stream":true}`))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("%q %v", line, err)
	}
	cancel()
	resp.Body.Close()
	select {
	case name := <-p.Cancelled():
		if name != "hang" {
			t.Fatalf("cancelled %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the peer did not see the client leave")
	}
}
