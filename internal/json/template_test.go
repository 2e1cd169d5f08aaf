package json_test

import (
	"math/rand/v2"
	"strings"
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
// and any string, whichever of the two comes first, with the library's
// defaults or other options (HTML and JavaScript escaping, invalid UTF-8
// allowed); a string Marshal refuses (invalid UTF-8, by default) the
// template refuses too, dst untouched.
func TestTemplateIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	escaping := []json.Options{json.EscapeForHTML(true), json.EscapeForJS(true), json.AllowInvalidUTF8(true)}
	for _, opts := range [][]json.Options{nil, escaping} {
		for _, fill := range []func(int64, string) any{fillDelta, stringFirst} {
			tpl, ok := json.NewTemplate(fill, opts...)
			if !ok {
				t.Fatalf("options %v: no template for a value with one integer and one string member", opts)
			}
			alphabet := []string{"a", "b", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f",
				"\u2028", "\u2029", "é", "😀", "\ufffd", "\xff", "\xc3"}
			for range 2000 {
				n := r.Int64() - r.Int64()
				var sb strings.Builder
				for range r.IntN(12) {
					sb.WriteString(alphabet[r.IntN(len(alphabet))])
				}
				checkTemplate(t, tpl, fill, opts, n, sb.String())
			}
		}
	}
}

func checkTemplate(t testing.TB, tpl *json.Template, fill func(int64, string) any, opts []json.Options, n int64, s string) {
	t.Helper()
	want, err := json.Marshal(fill(n, s), opts...)
	got, ok := tpl.Append([]byte("x"), n, s)
	switch {
	case err != nil && (ok || string(got) != "x"):
		t.Fatalf("Append(%d, %q) = %s, %v; Marshal refuses it (%v): want dst untouched, false", n, s, got, ok, err)
	case err == nil && (!ok || string(got) != "x"+string(want)):
		t.Fatalf("Append(%d, %q) = %s, %v; Marshal: %s", n, s, got, ok, want)
	}
}

// No template is made for a value that does not hold both members once,
// whatever their values.
func TestTemplateRefused(t *testing.T) {
	for name, fill := range map[string]func(int64, string) any{
		"string unset":    func(n int64, _ string) any { return map[string]int64{"n": n} },
		"integer unset":   func(_ int64, s string) any { return map[string]string{"s": s} },
		"string twice":    func(n int64, s string) any { return []any{n, s, s} },
		"integer as text": func(n int64, s string) any { return []any{s, float64(n) / 2} },
		"string omitted when empty": func(n int64, s string) any {
			return struct {
				N int64  `json:"n"`
				S string `json:"s,omitzero"`
			}{n, s}
		},
		"integer omitted when zero": func(n int64, s string) any {
			return struct {
				N int64  `json:"n,omitzero"`
				S string `json:"s"`
			}{n, s}
		},
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
		checkTemplate(t, tpl, fillDelta, nil, n, s)
	})
}
