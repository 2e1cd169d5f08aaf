package jsonw

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestModes(t *testing.T) {
	in := "a\"b\\c\n\r\t\b\f\x01\x1f<>&\u2028é\xffz"
	tests := []struct {
		mode Mode
		want string
	}{
		{EncodingJSON, `"a\"b\\c\n\r\t\b\f\u0001\u001f\u003c\u003e\u0026\u2028é\ufffdz"`},
		{RapidJSON, "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001F<>&\u2028é\xffz\""},
		{Plain, "\"a\\\"b\\\\c\\n\\r\\t\\u0008\\u000c\\u0001\\u001f<>&\u2028é\\ufffdz\""},
	}
	for _, tt := range tests {
		if got := string(AppendString(nil, in, tt.mode)); got != tt.want {
			t.Errorf("%+v:\n got %s\nwant %s", tt.mode, got, tt.want)
		}
		if got := string(AppendString(nil, []byte(in), tt.mode)); got != tt.want {
			t.Errorf("%+v on []byte differs from string", tt.mode)
		}
	}
}

// FuzzEncodingJSON: EncodingJSON is byte for byte what encoding/json
// writes, and every mode's output of valid UTF-8 parses back to the input.
func FuzzEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "hello", "<a href='x'>&amp;</a>", "\u2028\u2029", "\xff\xfe", "\x00\x1f\x7f", "\U0001F600"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s, EncodingJSON); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, encoding/json %s", s, got, want)
		}
		if !utf8.ValidString(s) {
			return
		}
		for _, m := range []Mode{RapidJSON, Plain} {
			var back string
			if err := json.Unmarshal(AppendString(nil, s, m), &back); err != nil || back != s {
				t.Fatalf("%+v: %q does not round-trip: %q %v", m, s, back, err)
			}
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	buf := make([]byte, 0, 256)
	s := "Hello, world! This is a typical delta of model output."
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendString(buf[:0], s, EncodingJSON)
	}
}

// Unquote decodes what encoding/json decodes, for every string the
// scanner side would accept: escapes of each kind, surrogate pairs and
// lone halves, invalid UTF-8.
func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		``, `plain`, `a\"b\\c\/d`, `\b\f\n\r\t`, `\u00e9\u4E2D`, `\ud83d\ude00`, `\ud83d`, `\ude00x`, `\ud83d\u0041`,
		"caf\xc3\xa9", "bad\xff\xfebyte", "cut\xe2\x82", `\u0000\u001f`, "mixed é \\n \\ud83d\\ude00 \xff",
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+raw+`"`), &want); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if got := string(Unquote(nil, []byte(raw))); got != want {
			t.Errorf("Unquote(%q) = %q, want %q", raw, got, want)
		}
	}
}

func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`a\nb`, `\ud83d\ude00`, "\xff", `\u0041`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want string
		if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &want) != nil {
			return // not string contents: Unquote's precondition
		}
		if got := string(Unquote(nil, raw)); got != want {
			t.Fatalf("Unquote(%q) = %q, want %q", raw, got, want)
		}
	})
}

// PlainByte holds exactly the plain ASCII bytes, which the modes that are
// not HTML-safe write as they are: AppendString of a one-byte string gives
// the byte in quotes.
func TestPlainByte(t *testing.T) {
	for c := range 256 {
		want := c >= 0x20 && c < 0x80 && c != '"' && c != '\\'
		if PlainByte[c] != want {
			t.Errorf("PlainByte[%#x] = %v, want %v", c, PlainByte[c], want)
		}
		if PlainByte[c] {
			for _, m := range []Mode{Plain, RapidJSON, {ReplaceInvalid: true, UpperHex: true}} {
				if got := string(AppendString(nil, string(rune(c)), m)); got != `"`+string(rune(c))+`"` {
					t.Errorf("AppendString(%q) = %s", rune(c), got)
				}
			}
		}
	}
}
