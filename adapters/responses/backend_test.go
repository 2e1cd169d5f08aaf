package responses

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// TestBackendAnswers: an upstream that answers one JSON response instead
// of a stream is read whole; an error status is refused with its code and
// the upstream's message; the request is a streamed, unstored one.
func TestBackendAnswers(t *testing.T) {
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		gotBody = string(buf[:n])
		if r.Header.Get("Authorization") != "Bearer sk-test" {
			w.WriteHeader(401)
			return
		}
		switch r.URL.Path {
		case "/v1/responses":
		default:
			w.WriteHeader(404)
		}
		if r.Header.Get("X-Case") == "limit" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"whole","annotations":[]}]}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`))
	}))
	defer srv.Close()
	t.Setenv("TEST_RESPONSES_KEY", "sk-test")
	be, err := NewBackend(BackendConfig{BaseURL: srv.URL + "/v1", APIKey: protocol.SecretRef{Env: "TEST_RESPONSES_KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	req := &canonical.Request{Target: "m", Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "hi")}}}
	s, err := be.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := canonical.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	if got := render(t, evs); string(got) != `{"lifecycle":{"status":"RUN_STATUS_RUNNING"}}
{"messageStart":{"messageId":"-msg-1","role":"assistant"}}
{"blockStart":{"type":"BLOCK_TYPE_TEXT"}}
{"blockDelta":{"text":"whole"}}
{"blockFinish":{}}
{"messageFinish":{"finishReason":"FINISH_REASON_STOP","usage":{"inputTokens":"1","outputTokens":"1","totalTokens":"2"}}}
{"lifecycle":{"status":"RUN_STATUS_COMPLETED"}}
` {
		t.Fatalf("events:\n%s", got)
	}
	if want := `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"store":false,"stream":true}`; gotBody != want {
		t.Fatalf("request %s, want %s", gotBody, want)
	}
	limited, err := NewBackend(BackendConfig{BaseURL: srv.URL + "/v1", APIKey: protocol.SecretRef{Env: "TEST_RESPONSES_KEY"}, Headers: map[string]string{"X-Case": "limit"}})
	if err != nil {
		t.Fatal(err)
	}
	defer limited.Close()
	_, err = limited.Start(context.Background(), req)
	if e := canonical.AsError(err); e == nil || e.Code != canonical.CodeResourceExhausted || e.Message != "Rate limit reached." {
		t.Fatalf("429: %v", err)
	}
	if _, err := NewBackend(BackendConfig{BaseURL: "ftp://x"}); err == nil {
		t.Fatal("a bad url was accepted")
	}
}
