package subject

import (
	"regexp"
	"strings"
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

// kvKeyChars is nats.go's validKeyRe (jetstream/kv.go): what a KV key may hold.
var kvKeyChars = regexp.MustCompile(`\A[-/_=\.a-zA-Z0-9]+\z`)

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"thread-1_A": "thread-1_A",
		"":           "=",
		"a.b":        "=YS5i",
		"é":          "=w6k",
	} {
		if got := Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"a.b", "é", "a b>*", strings.Repeat("x.", 128), "", "~", "="} {
		if k := "owner." + Key(in); !kvKeyChars.MatchString(k) {
			t.Errorf("KV key %q (for %q) has characters a KV key may not", k, in)
		}
	}
}
