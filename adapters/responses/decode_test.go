package responses

import (
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/interlingua-dev/interlingua/canonical"
)

var createSeeds = []string{
	`{"model":"m","input":"hi"}`,
	`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,AAEC","detail":"low"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"ok"}]},{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"s"}],"encrypted_content":"e"}],"instructions":"be","tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"f"},"reasoning":{"effort":"low","summary":"auto"},"text":{"format":{"type":"json_object"}},"max_output_tokens":5,"temperature":0.5,"top_p":1,"metadata":{"k":"v"},"include":["reasoning.encrypted_content"],"truncation":"auto","parallel_tool_calls":false}`,
	`{"model":"m","input":[{"type":"item_reference"}]}`,
	`{"model":"m","input":[{"role":"developer","content":"sys"},{"type":"input_file"}]}`,
	`{"model":"m","input":"x","temperature":3}`,
	`{"model":"m","conversation":"c","previous_response_id":"p"}`,
	`{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_file","file_data":"AAEC","filename":"a.bin"}]}]}`,
}

// TestDecodeCreate: each seed decodes to a request or a 400 naming its
// param.
func TestDecodeCreate(t *testing.T) {
	for i, s := range createSeeds {
		req, e := decodeForRun([]byte(s))
		switch i {
		case 0, 1, 6:
			if e != nil || req == nil {
				t.Errorf("seed %d refused: %+v", i, e)
			}
		default:
			if e == nil || e.status != http.StatusBadRequest || e.param == "" {
				t.Errorf("seed %d: %+v", i, e)
			}
		}
	}
	_, e := decodeForRun([]byte(`{"model":"m","input":"a","tools":[{"type":"function","name":"f"},{"type":"function"}]}`))
	if e == nil || e.param != "tools[1].name" || e.msg != "Missing required parameter: 'tools[1].name'." {
		t.Errorf("a tool without a name: %+v", e)
	}
	req, _ := decodeForRun([]byte(createSeeds[1]))
	leaves := canonical.Leaves(nil, canonical.Input(req, canonical.InputPrompt))
	if len(leaves) != 6 || leaves[0].GetRole() != "system" || leaves[3].GetMime() != canonical.MimeToolCall || leaves[4].GetRole() != "tool" || leaves[5].GetMime() != canonical.MimeReasoning {
		t.Fatalf("leaves %v", leaves)
	}
	if got := string(leaves[2].GetData()); got != "\x00\x01\x02" || leaves[2].GetMime() != "image/png" {
		t.Fatalf("image leaf %q %s", got, leaves[2].GetMime())
	}
}

// decodeForRun is what the frontend does with a body before it runs.
func decodeForRun(body []byte) (*canonical.Request, *apiError) {
	c, e := decodeCreate(body)
	if e == nil {
		e = c.validate()
	}
	if e != nil {
		return nil, e
	}
	items, e := c.inputItems()
	if e != nil {
		return nil, e
	}
	return c.canonicalRequest(items), nil
}

// FuzzDecodeCreate: any body is a request or a 400 with a message, never
// a panic; an accepted request re-encodes for a backend and decodes again.
func FuzzDecodeCreate(f *testing.F) {
	for _, s := range createSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeForRun(body)
		if e != nil {
			if e.status != http.StatusBadRequest || e.msg == "" || !utf8.Valid(e.body()) {
				t.Fatalf("bad refusal %+v", e)
			}
			return
		}
		wire, err := encodeCreate(req, "m", false)
		if err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		if _, e := decodeForRun(wire); e != nil {
			t.Fatalf("re-encoded request %s refused: %+v", wire, e)
		}
	})
}
