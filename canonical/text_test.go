package canonical

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/interlingua-dev/interlingua/internal/chunk"
)

func accumulate(pieces [][]byte) (string, []string) {
	var a TextAccumulator
	var sb strings.Builder
	var deltas []string
	for _, p := range pieces {
		s := a.Append(p)
		deltas = append(deltas, s)
		sb.WriteString(s)
	}
	s := a.Flush()
	deltas = append(deltas, s)
	sb.WriteString(s)
	return sb.String(), deltas
}

func TestTextAccumulatorHoldsSplitRunes(t *testing.T) {
	in := []byte("a\U0001F600b\u00e9c\u4e16")
	for i := 0; i <= len(in); i++ {
		got, deltas := accumulate(chunk.TwoWay(in, i))
		if got != string(in) {
			t.Fatalf("split at %d: got %q", i, got)
		}
		for _, d := range deltas {
			if !utf8.ValidString(d) {
				t.Fatalf("split at %d: delta %q is broken UTF-8", i, d)
			}
		}
	}
	got, _ := accumulate(chunk.Bytes(in))
	if got != string(in) {
		t.Fatalf("byte by byte: got %q", got)
	}
}

func TestTextAccumulatorInvalidBytes(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a\xffb", "a\uFFFDb"},
		{"\xf0\x9f", "\uFFFD\uFFFD"},           // truncated at end of stream
		{"\xc0\x80x", "\uFFFD\uFFFDx"},         // overlong: never a prefix, a U+FFFD per byte
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate
	}
	for _, tt := range tests {
		got, deltas := accumulate([][]byte{[]byte(tt.in)})
		if got != tt.want {
			t.Errorf("%q: got %q want %q", tt.in, got, tt.want)
		}
		for _, d := range deltas {
			if !utf8.ValidString(d) {
				t.Errorf("%q: delta %q broken", tt.in, d)
			}
		}
	}
}

// FuzzTextAccumulator: any chunking yields valid deltas, and for valid
// input the concatenation is the input.
func FuzzTextAccumulator(f *testing.F) {
	f.Add([]byte("hello \U0001F600 world"), uint64(1))
	f.Add([]byte("\xf0\x9f\x98"), uint64(2))
	f.Add([]byte("\xe0\xa0\x80\xed\x9f\xbf"), uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		whole, _ := accumulate([][]byte{data})
		got, deltas := accumulate(chunk.Split(data, seed, 1+int(seed%7)))
		for _, d := range deltas {
			if !utf8.ValidString(d) {
				t.Fatalf("delta %q is broken UTF-8", d)
			}
		}
		if utf8.Valid(data) && got != string(data) {
			t.Fatalf("valid input changed: %q -> %q", data, got)
		}
		if got != whole {
			t.Fatalf("result depends on chunking: %q vs %q", got, whole)
		}
	})
}

func BenchmarkTextAccumulatorASCII(b *testing.B) {
	p := []byte("hello world ")
	var a TextAccumulator
	b.ReportAllocs()
	for b.Loop() {
		_ = a.Append(p)
	}
}

// AppendValidUTF8 keeps dst, copies valid input as it is and puts one
// U+FFFD for each byte that is not part of a valid sequence.
func TestAppendValidUTF8(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain é 😀", "plain é 😀"},
		{"a\xa0b", "a\uFFFDb"},
		{"\xf0\x9f\x98", "\uFFFD\uFFFD\uFFFD"}, // a cut rune: a replacement per byte
		{"\xc3\xa9\xff\xfe", "é\uFFFD\uFFFD"},
	} {
		if got := string(AppendValidUTF8([]byte("pre:"), []byte(c.in))); got != "pre:"+c.want {
			t.Errorf("AppendValidUTF8(%q) = %q, want %q", c.in, got, "pre:"+c.want)
		}
	}
}
