package load

import "testing"

// TestHasText: a Chat Completions delta counts only with non-empty
// content; the role chunk's "content":"" and reasoning_content do not.
func TestHasText(t *testing.T) {
	key := []byte(`"content":"`)
	for _, c := range []struct {
		in   string
		want bool
	}{
		{`{"delta":{"content":"tok "}}`, true},
		{`{"delta":{"content":"","role":"assistant"}}`, false},
		{`{"delta":{"role":"assistant","content":""}}`, false},
		{`{"delta":{"reasoning_content":"x"}}`, false},
		{`{"delta":{"content":"\"q\""}}`, true},
		{`{"delta":{},"finish_reason":"stop"}`, false},
		{`{"delta":{"content":"`, false},
	} {
		if got := HasText([]byte(c.in), key); got != c.want {
			t.Errorf("HasText(%s) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestLastUserText: the last message's content, a string or its first
// text block.
func TestLastUserText(t *testing.T) {
	for body, want := range map[string]string{
		`{"messages":[{"role":"user","content":"a"},{"role":"user","content":"k1"}]}`:             "k1",
		`{"messages":[{"role":"user","content":[{"type":"image"},{"type":"text","text":"k2"}]}]}`: "k2",
		`{"model":"m","messages":[]}`: "",
		`not json`:                    "",
	} {
		if got := LastUserText([]byte(body)); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}
