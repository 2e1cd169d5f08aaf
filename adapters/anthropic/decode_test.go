package anthropic

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
)

// TestDecodeRequestErrors: bad input names the member, in Anthropic's
// words where known.
func TestDecodeRequestErrors(t *testing.T) {
	const msg = `"messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct{ body, want string }{
		{`{"max_tokens":5,` + msg + `}`, "model: Field required"},
		{`{"model":"m",` + msg + `}`, "max_tokens: Field required"},
		{`{"model":"m","max_tokens":"5",` + msg + `}`, "max_tokens: Input should be a valid integer"},
		{`{"model":"m","max_tokens":0,` + msg + `}`, "max_tokens: Input should be greater than or equal to 1"},
		{`{"model":"m","max_tokens":5}`, "messages: Field required"},
		{`{"model":"m","max_tokens":5,"messages":[]}`, "messages: List should have at least 1 item after validation, not 0"},
		{`{"model":"m","max_tokens":5,"temperature":1.5,` + msg + `}`, "temperature: Input should be between 0 and 1, got 1.5"},
		{`{"model":"m","max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":5000},` + msg + `}`, "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{`{"model":"m","max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":100},` + msg + `}`, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"},
		{`{"model":"m","max_tokens":5,"tool_choice":{"type":"tool"},` + msg + `}`, "tool_choice.tool.name: Field required"},
		{`{"model":"m","max_tokens":5,"tools":[{"name":"f"}],` + msg + `}`, "tools.0.custom.input_schema: Field required"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!"}}]}]}`, "messages.0.content.0.source.data: Input is not valid base64"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`, "messages.0.content.0.tool_use_id: Field required"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":[1]}]}]}`, "messages.0.content.0.input: Input should be a valid dictionary"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, "messages.0.content.0.type: Input tag 'video' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":7}]}`, "messages.0.content: Input should be a valid string or a list of content blocks"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":"ephemeral"}]}]}`, "messages.0.content.0.cache_control: Input should be a valid dictionary"},
		{`{"model":"m","max_tokens":5,"output_config":[1],` + msg + `}`, "output_config: Input should be a valid dictionary"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"x"}]}`, "messages.0.role: Input should be 'user', 'assistant' or 'system'"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":[{"type":"image","source":{"type":"url","url":"http://x"}}]}]}`, "messages.0.content.0.type: Input tag 'image' found using 'type' does not match the expected tag of a system message: 'text'"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"tool_reference"}]}]}]}`, "messages.0.content.0.content.0.tool_name: Field required"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"video"}]}]}]}`, "messages.0.content.0.content.0.type: Input tag 'video' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'tool_reference'"},
	} {
		_, e := decodeRequest([]byte(tc.body))
		if e == nil || e.Message != tc.want {
			t.Errorf("%s:\n got %v\nwant %q", tc.body, e, tc.want)
		}
	}
}

// FuzzDecodeRequest: any body decodes to a request that marshals (whole
// UTF-8, so it can cross NATS) or is refused with a message and a 4xx.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","max_tokens":3000,"system":"s","thinking":{"type":"enabled","budget_tokens":1024},"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"r"}]}]}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"http://x"}}]}],"x":1}`,
		``, `[`, `{"model":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, e := decodeRequest(body)
		if e != nil {
			if _, status := errorTypeOf(e.Code); e.Message == "" || status >= 500 || strings.TrimSpace(e.Message) == "" {
				t.Fatalf("error without message or 4xx: %v", e)
			}
			return
		}
		if _, err := proto.Marshal(d.req); err != nil {
			t.Fatalf("decoded request does not marshal: %v", err)
		}
	})
}

// TestDecodeDropsServerToolBlocks: an assistant turn's server_tool_use and
// server tool results (what the frontend writes for a call the bridge ran,
// or Anthropic's own tools) are dropped: the text after them is the answer,
// and no backend could take the call again. A user turn may not hold them.
func TestDecodeDropsServerToolBlocks(t *testing.T) {
	d, e := decodeRequest([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[
		{"type":"server_tool_use","id":"call-1","name":"calculator","input":{}},{"type":"web_search_tool_result","tool_use_id":"s","content":[]},{"type":"text","text":"42"}]}]}`))
	if e != nil {
		t.Fatal(e)
	}
	var got []string
	for _, l := range canonical.Leaves(nil, d.req.GetInputs()[0].GetNode()) {
		got = append(got, l.GetRole()+":"+l.GetMime()+":"+string(l.GetData()))
	}
	if want := []string{"user:text/plain:q", "assistant:text/plain:42"}; !slices.Equal(got, want) {
		t.Fatalf("leaves %q, want %q", got, want)
	}
	if _, e := decodeRequest([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"server_tool_use","id":"a","name":"f","input":{}}]}]}`)); e == nil {
		t.Fatal("a user turn's server_tool_use was taken")
	}
}
