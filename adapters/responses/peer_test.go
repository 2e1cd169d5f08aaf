package responses_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// peer is a reference Responses upstream for the tests: it writes the
// literal event shapes of the reference (OpenAI's streams), answering the
// last user text with "echo: <text>", or, when it offers tools and the
// input does not end with a function_call_output, a get_weather call. It
// records each request body.
type peer struct {
	mu     sync.Mutex
	bodies [][]byte
	srv    *httptest.Server
	gate   chan struct{} // model "gated" answers once it is closed
}

func startPeer(t *testing.T) *peer {
	p := &peer{gate: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *peer) requests() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.bodies...)
}

type peerReq struct {
	Model string `json:"model"`
	Input []struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"input"`
	Tools []json.Value `json:"tools"`
}

func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (p *peer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.bodies = append(p.bodies, body)
	p.mu.Unlock()
	var req peerReq
	if err := json.Unmarshal(body, &req); err != nil || r.URL.Path != "/v1/responses" {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"message":"bad request: %v","type":"invalid_request_error","param":null,"code":null}}`, err)
		return
	}
	if req.Model == "missing" {
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":{"message":"The model `+"`missing`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
		return
	}
	last, lastType := "", ""
	for _, it := range req.Input {
		lastType = it.Type
		if it.Role == "user" && len(it.Content) > 0 {
			last = it.Content[0].Text
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	ev := func(typ, rest string) {
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, rest)
		seq++
	}
	resp := func(status, output string) string {
		return `"response":{"id":"resp_up","object":"response","status":"` + status + `","output":[` + output + `],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":8}}`
	}
	ev("response.created", resp("in_progress", ""))
	ev("response.in_progress", resp("in_progress", ""))
	switch req.Model {
	case "slow": // thinks until the client leaves
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	case "gated":
		w.(http.Flusher).Flush()
		select {
		case <-p.gate:
		case <-r.Context().Done():
			return
		}
	}
	if len(req.Tools) > 0 && lastType != "function_call_output" {
		fc := `{"id":"fc_A","type":"function_call","status":"completed","call_id":"call_A","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`
		ev("response.output_item.added", `"output_index":0,"item":{"id":"fc_A","type":"function_call","status":"in_progress","call_id":"call_A","name":"get_weather","arguments":""}`)
		ev("response.function_call_arguments.delta", `"item_id":"fc_A","output_index":0,"delta":"{\"city\":"`)
		ev("response.function_call_arguments.delta", `"item_id":"fc_A","output_index":0,"delta":"\"Paris\"}"`)
		ev("response.function_call_arguments.done", `"item_id":"fc_A","output_index":0,"name":"get_weather","arguments":"{\"city\":\"Paris\"}"`)
		ev("response.output_item.done", `"output_index":0,"item":`+fc)
		ev("response.completed", resp("completed", fc))
		return
	}
	text := "echo: " + last
	half := strings.Index(text, ":") + 1
	msg := `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + q(text) + `,"annotations":[]}]}`
	ev("response.output_item.added", `"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}`)
	ev("response.content_part.added", `"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`)
	ev("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":`+q(text[:half])+`,"logprobs":[]`)
	ev("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":`+q(text[half:])+`,"logprobs":[]`)
	ev("response.output_text.done", `"item_id":"msg_1","output_index":0,"content_index":0,"text":`+q(text)+`,"logprobs":[]`)
	ev("response.content_part.done", `"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":`+q(text)+`,"annotations":[]}`)
	ev("response.output_item.done", `"output_index":0,"item":`+msg)
	ev("response.completed", resp("completed", msg))
}
