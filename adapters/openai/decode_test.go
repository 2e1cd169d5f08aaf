package openai

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/internal/json"
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

// TestToolStrictCrossesWires: a tool's strict, as a client of Chat
// Completions or Responses set it, is the canonical tool's, and the
// backend sends it on for that tool alone (unset stays unset): the OpenAI
// Agents SDK makes its tools strict, and an upstream enforces the schema
// only when told.
func TestToolStrictCrossesWires(t *testing.T) {
	d, e := decodeRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[
		{"type":"function","function":{"name":"a","strict":true,"parameters":{"type":"object"}}},
		{"type":"function","function":{"name":"b","parameters":{"type":"object"}}}]}`))
	if e != nil {
		t.Fatal(e)
	}
	if got := d.req.GetTools(); got[0].Strict == nil || !*got[0].Strict || got[1].Strict != nil {
		t.Fatalf("canonical tools %v", got)
	}
	be := &Backend{}
	r, ce := be.encodeRequest(d.req, "m")
	if ce != nil {
		t.Fatal(ce)
	}
	out, err := json.Marshal(r.Tools)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"type":"function","function":{"name":"a","parameters":{"type":"object"},"strict":true}},{"type":"function","function":{"name":"b","parameters":{"type":"object"}}}]`; string(out) != want {
		t.Fatalf("upstream tools %s, want %s", out, want)
	}
}
