package bench

import (
	"context"
	"strings"
	"testing"
)

// TestHasText: a Chat Completions delta counts only with non-empty
// content; the role chunk's "content":"" and reasoning_content do not.
func TestHasText(t *testing.T) {
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
		if got := hasText([]byte(c.in), openaiContentKey); got != c.want {
			t.Errorf("hasText(%s) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestNoParametersFrontends: the OpenAI and Responses frontends cannot
// carry the scripted backend's parameters, so such a pair is refused with
// a message saying why rather than measuring the backend's defaults.
func TestNoParametersFrontends(t *testing.T) {
	for _, fe := range []string{"openai", "responses"} {
		_, err := Run(context.Background(), Options{Frontend: fe, Backend: "scripted", Streams: 1, Deltas: 5, Rounds: 1})
		if err == nil || !strings.Contains(err.Error(), "the "+fe+" frontend carries no bench parameters") {
			t.Errorf("%s:scripted: err %v, want the no-parameters refusal", fe, err)
		}
	}
}
