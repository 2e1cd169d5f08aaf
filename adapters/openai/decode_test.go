package openai

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzDecodeRequest: any body is either a canonical request that
// marshals, for the model the body names, or an OpenAI error a client
// caused (4xx) with a message; never a panic.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"s"},{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"data:image/png;base64,aGk="}}]}]}`,
		`{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`,
		`{"model":"m","max_tokens":5,"max_completion_tokens":6,"temperature":0.5,"top_p":1,"stop":["a","b"],"seed":3,"n":1,"user":"u","x-extra":1,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","stream_options":{"include_usage":true},"messages":[]}`,
		`{"model":1}`, `{"messages":"x"}`, `[`, ``, `null`, `{"model":"m","messages":[{"role":"wizard","content":"x"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, e := decodeRequest(body)
		if e != nil {
			if e.status < 400 || e.status >= 500 || strings.TrimSpace(e.msg) == "" {
				t.Fatalf("refusal %d %q: not a client error with a message", e.status, e.msg)
			}
			return
		}
		if d.req.GetTarget() != d.model || d.model == "" {
			t.Fatalf("request for %q decoded with target %q", d.model, d.req.GetTarget())
		}
		if _, err := proto.Marshal(d.req); err != nil {
			t.Fatalf("decoded request does not marshal: %v", err)
		}
	})
}
