package subject

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestToken(t *testing.T) {
	for in, want := range map[string]string{
		"thread-1_A": "thread-1_A",
		"":           "~",
		"a.b":        "~YS5i",
		"a b>*":      "~YSBiPio",
		"é":          "~w6k",
	} {
		if got := Token(in); got != want {
			t.Errorf("Token(%q) = %q, want %q", in, got, want)
		}
	}
}
