package bench

import (
	"context"
	"strings"
	"testing"
)

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
