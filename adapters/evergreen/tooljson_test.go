package evergreen

import (
	"testing"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// A tool_calls chunk is written byte for byte as encoding/json wrote it
// before the move to internal/json: HTML and JS characters escaped (raw
// values too, whitespace dropped), a null output written, an absent one
// left out.
func TestToolChunkBytes(t *testing.T) {
	for _, tc := range []struct {
		in   toolEvent
		want string
	}{
		{toolEvent{Type: "tool_call", ID: "c<1>", Name: "a&b", Arguments: `{"q":"x<y` + "\u2028" + `"}`},
			`{"type":"tool_call","id":"c\u003c1\u003e","name":"a\u0026b","arguments":"{\"q\":\"x\u003cy\u2028\"}"}`},
		{toolEvent{Type: "tool_finished", ID: "c", Output: json.Value("null")}, `{"type":"tool_finished","id":"c","output":null}`},
		{toolEvent{Type: "tool_finished", ID: "c"}, `{"type":"tool_finished","id":"c"}`},
		{toolEvent{Type: "tool_started", Input: json.Value(`{ "a" : "<b>" }`)}, `{"type":"tool_started","input":{"a":"\u003cb\u003e"}}`},
		{toolEvent{Type: "tool_failed", Error: &toolError{Code: "internal"}}, `{"type":"tool_failed","error":{"code":"internal"}}`},
	} {
		got, err := json.Marshal(tc.in, toolWriteJSON)
		if err != nil || string(got) != tc.want {
			t.Errorf("%+v:\n got %s (%v)\nwant %s", tc.in, got, err, tc.want)
		}
	}
}

// A tool_calls chunk is read as encoding/json read it: names in any case,
// the last of repeated names, invalid UTF-8 as U+FFFD, null kept as null.
func TestToolChunkRead(t *testing.T) {
	var e toolEvent
	in := "{\"TYPE\":\"tool_output\",\"Id\":\"a\",\"id\":\"b\",\"delta\":\"x\xffy\",\"output\":null}"
	if err := json.Unmarshal([]byte(in), &e, toolReadJSON); err != nil {
		t.Fatal(err)
	}
	if e.Type != "tool_output" || e.ID != "b" || e.Delta != "x\uFFFDy" || string(e.Output) != "null" {
		t.Errorf("got %+v", e)
	}
}
