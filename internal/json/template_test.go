package json_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// deltaEvent is a delta event's shape: the integer before the string, a
// nested string after it, an omitted member.
type deltaEvent struct {
	Type     string `json:"type"`
	Seq      int64  `json:"sequence_number"`
	Item     string `json:"item_id"`
	Delta    *inner `json:"delta"`
	Omitted  string `json:"omitted,omitzero"`
	Logprobs []int  `json:"logprobs"`
}

type inner struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func fillDelta(n int64, s string) any {
	return &deltaEvent{Type: "d", Seq: n, Item: "msg_1", Delta: &inner{Type: "text_delta", Text: s}, Logprobs: []int{}}
}

// stringFirst has the string before the integer.
func stringFirst(n int64, s string) any {
	return struct {
		Text  string `json:"text"`
		Index int64  `json:"index"`
	}{s, n}
}

// A template writes what Marshal writes, byte for byte, for any integer
// and any valid string, whichever of the two comes first; a string that
// is not UTF-8 is left to Marshal (which refuses it).
func TestTemplateIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, fill := range []func(int64, string) any{fillDelta, stringFirst} {
		tpl, ok := json.NewTemplate(fill)
		if !ok {
			t.Fatal("no template for a value with one integer and one string member")
		}
		alphabet := []rune("ab \"\\/<>&\n\t\u0000\u001f\u007f\u2028\u2029é😀\ufffd")
		for range 2000 {
			n := r.Int64() - r.Int64()
			rs := make([]rune, r.IntN(12))
			for i := range rs {
				rs[i] = alphabet[r.IntN(len(alphabet))]
			}
			checkTemplate(t, tpl, fill, n, string(rs))
		}
		if got, ok := tpl.Append([]byte("x"), 1, "bad \xff"); ok || string(got) != "x" {
			t.Fatalf("invalid UTF-8: %q, %v; want dst untouched, false", got, ok)
		}
	}
}

func checkTemplate(t testing.TB, tpl *json.Template, fill func(int64, string) any, n int64, s string) {
	t.Helper()
	want, err := json.Marshal(fill(n, s))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := tpl.Append(nil, n, s)
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("Append(%d, %q) = %s, %v; Marshal: %s", n, s, got, ok, want)
	}
}

// No template is made for a value that does not hold both members once.
func TestTemplateRefused(t *testing.T) {
	for name, fill := range map[string]func(int64, string) any{
		"string unset":    func(n int64, _ string) any { return map[string]int64{"n": n} },
		"integer unset":   func(_ int64, s string) any { return map[string]string{"s": s} },
		"string twice":    func(n int64, s string) any { return []any{n, s, s} },
		"integer as text": func(n int64, s string) any { return []any{s, float64(n) / 2} },
	} {
		if _, ok := json.NewTemplate(fill); ok {
			t.Errorf("%s: a template was made", name)
		}
	}
}

func FuzzTemplate(f *testing.F) {
	f.Add(int64(0), "tok ")
	f.Add(int64(-1), "\u2028<\"")
	tpl, ok := json.NewTemplate(fillDelta)
	if !ok {
		f.Fatal("no template")
	}
	f.Fuzz(func(t *testing.T, n int64, s string) {
		if got, ok := tpl.Append(nil, n, s); !ok {
			if _, err := json.Marshal(fillDelta(n, s)); err == nil {
				t.Fatalf("Append refused %q, which Marshal takes: %s", s, got)
			}
			return
		}
		checkTemplate(t, tpl, fillDelta, n, s)
	})
}
