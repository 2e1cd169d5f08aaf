package triton

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// TestKnownPrefix: a stream's reader, which reads a response that begins
// with the known prefix from there, reads exactly what a fresh reader
// reads from the whole response (fields and error), over responses whose
// members before text_output change, stay, or are respaced, some of them
// corrupted.
func TestKnownPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	ws := func() string { return []string{"", "", "", " ", "\n\t"}[rng.IntN(5)] }
	member := func() string {
		return []string{
			`"model_name":"ensemble"`,
			`"model_version":"1"`,
			`"batch_index":` + []string{"0", "1", "0.0"}[rng.IntN(3)],
			`"output_log_probs":[0.0,` + ws() + `{"x":[1]}]`,
			`"error":"boom"`,
			`"finish_reason":` + []string{`"stop"`, `""`, `"length"`}[rng.IntN(3)],
			`"num_input_tokens":` + []string{"0", "3", `"7"`}[rng.IntN(3)],
			`"num_output_tokens":5`,
			`"text_output":"early"`,
			`"model\u005fname":"esc"`,
			`"other":{"a":[1,2,{"b":null}]}`,
			`"sequence_index":0`,
		}[rng.IntN(12)]
	}
	text := func() string {
		return []string{`"tok"`, `" a\nb\u00e9"`, `["a","b"]`, `[]`, `5`, `"x`, "\"\xf0\x9f\""}[rng.IntN(7)]
	}
	// head is the part of a response up to text_output's value: what a
	// stream repeats.
	head := func(before []string) string {
		b := "{" + ws()
		for _, m := range before {
			b += m + ws() + "," + ws()
		}
		return b + `"text_output"` + ws() + ":" + ws()
	}
	response := func(head string) string {
		b := head + text()
		for range rng.IntN(3) {
			b += ws() + "," + ws() + member()
		}
		b += ws() + "}" + ws()
		if rng.IntN(10) == 0 { // corrupt a byte
			i := rng.IntN(len(b))
			b = b[:i] + string([]byte{"\",:{}[]x\x00 "[rng.IntN(10)]}) + b[i+1:]
		}
		return b
	}
	hits := 0
	for range 20_000 {
		var before []string
		for range rng.IntN(5) {
			before = append(before, member())
		}
		h := head(before)
		var stream responseReader
		for i := range 4 {
			switch rng.IntN(6) {
			case 0: // other members before text_output
				before = slices.Clone(before)
				if len(before) > 0 && rng.IntN(2) == 0 {
					before[rng.IntN(len(before))] = member()
				} else {
					before = append(before, member())
				}
				h = head(before)
			case 1: // the same members, other blanks
				h = head(before)
			}
			in := []byte(response(h))
			meta := i == 0 && rng.IntN(2) == 0
			if !meta && len(stream.known) > 0 && slices.Equal(in[:min(len(in), len(stream.known))], stream.known) {
				hits++
			}
			var got, want responseFields
			var fresh responseReader
			gerr := stream.read(in, &got, meta)
			werr := fresh.read(in, &want, meta)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) || string(got.text) != string(want.text) || got.hasText != want.hasText ||
				got.err != want.err || got.hasErr != want.hasErr || got.modelName != want.modelName || got.modelVersion != want.modelVersion ||
				got.finishReason != want.finishReason || got.numInput != want.numInput || got.numOutput != want.numOutput {
				t.Fatalf("response %q (meta %v, known prefix %q):\n got %+v, %v\nwant %+v, %v", in, meta, stream.known, got, gerr, want, werr)
			}
		}
	}
	if hits < 10_000 {
		t.Fatalf("the known prefix was met %d times in 80,000 responses: the test no longer exercises it", hits)
	}
	t.Logf("known prefix met in %d of 80,000 responses", hits)
}

// TestStringBytes: stringBytes reads what the library's Unmarshal reads
// from each run of valid UTF-8 (nothing from a run it refuses) and keeps
// invalid bytes as they came, on random strings the Decoder takes.
func TestStringBytes(t *testing.T) {
	// reference is stringBytes as first written, through json.Unmarshal.
	reference := func(v json.Value) []byte {
		body := v[1 : len(v)-1]
		var dst []byte
		for len(body) > 0 {
			n := validPrefix(body)
			if n == 0 {
				dst, body = append(dst, body[0]), body[1:]
				continue
			}
			var s string
			if json.Unmarshal([]byte(`"`+string(body[:n])+`"`), &s) == nil {
				dst = append(dst, s...)
			}
			body = body[n:]
		}
		return dst
	}
	pieces := []string{"a", " ", `\n`, `\"`, `\\`, `\/`, `\u00e9`, `\ud83d\ude00`, `\ud800`, "\xff", "\xf0\x9f", "é", "\t"}
	rng := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for range 50_000 {
		s := `"`
		for range rng.IntN(6) {
			s += pieces[rng.IntN(len(pieces))]
		}
		s += `"`
		d := json.NewDecoder(bytes.NewBufferString(s), responseOptions)
		v, err := d.ReadValue()
		if err != nil {
			continue
		}
		checked++
		if got, want := stringBytes(nil, v), reference(v); !bytes.Equal(got, want) {
			t.Fatalf("stringBytes(%q) = %q, want %q", v, got, want)
		}
	}
	if checked < 10_000 {
		t.Fatalf("only %d strings checked", checked)
	}
}
