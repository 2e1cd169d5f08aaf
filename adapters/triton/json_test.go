package triton

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestParseJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // rapidjson message + " at " + offset
	}{
		{"", "The document is empty. at 0"},
		{"  \n", "The document is empty. at 3"},
		{"\x00{}", "The document is empty. at 0"},
		{`{} x`, "The document root must not be followed by other values. at 3"},
		{`{"a":1 "b":2}`, "Missing a comma or '}' after an object member. at 7"},
		{`{"a" 1}`, "Missing a colon after a name of object member. at 5"},
		{`{1:2}`, "Missing a name for object member. at 1"},
		{`{"a":1,}`, "Missing a name for object member. at 7"},
		{`[1 2]`, "Missing a comma or ']' after an array element. at 3"},
		{`[1,]`, "Invalid value. at 3"},
		{`{"a":tru}`, "Invalid value. at 8"},
		{`{"a":-}`, "Invalid value. at 6"},
		{`{"a":NaN}`, "Invalid value. at 5"},
		{`{"a":1.}`, "Miss fraction part in number. at 7"},
		{`{"a":1e}`, "Miss exponent in number. at 7"},
		{`{"a":1e400}`, "Number too big to be stored in double. at 5"},
		{`{"a":"x`, "Missing a closing quotation mark in string. at 7"},
		{`{"a":"\q"}`, "Invalid escape character in string. at 6"},
		{`{"a":"\u12G4"}`, "Incorrect hex digit after \\u escape in string. at 6"},
		{`{"a":"\ud800"}`, "The surrogate pair in string is invalid. at 6"},
		{`{"a":"\udc00"}`, "The surrogate pair in string is invalid. at 6"},
		{"{\"a\":\"\x01\"}", "Invalid encoding in string. at 6"},
		{"{\"a\":\"\xff\"}", "Invalid encoding in string. at 6"},
		{`{"a":01}`, "Missing a comma or '}' after an object member. at 6"},
	} {
		_, err := parseJSON([]byte(tc.in))
		if err == nil {
			t.Errorf("parseJSON(%q): no error, want %q", tc.in, tc.want)
			continue
		}
		if got := err.Error(); got != tc.want {
			t.Errorf("parseJSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseJSONValues(t *testing.T) {
	v, err := parseJSON([]byte(` {"s":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00","i":-12,"u":18446744073709551615,"big":18446744073709551616,"f":0.5,"e":1E2,"t":true,"n":null,"a":[1,[2]],"s":"dup"}` + "\x00trailing"))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.obj) != 10 {
		t.Fatalf("%d members, want 10 (duplicates kept)", len(v.obj))
	}
	s, _ := find(v.obj, "s")
	if want := "a\"\\/\b\f\n\r\té😀"; s.s != want {
		t.Errorf("s = %q, want %q (first of duplicates)", s.s, want)
	}
	for _, tc := range []struct {
		key  string
		kind numKind
		f    float64
	}{
		{"i", numInt, -12}, {"u", numUint, 18446744073709551615}, {"big", numDouble, 18446744073709551616},
		{"f", numDouble, 0.5}, {"e", numDouble, 100},
	} {
		n, _ := find(v.obj, tc.key)
		if n.kind != jNumber || n.num != tc.kind || n.f != tc.f {
			t.Errorf("%s = %+v, want kind %d value %v", tc.key, n, tc.kind, tc.f)
		}
	}
	if n, _ := find(v.obj, "u"); n.s != "18446744073709551615" || n.u != 18446744073709551615 {
		t.Errorf("u keeps text %q and value %d", n.s, n.u)
	}
}

func TestParseJSONDepth(t *testing.T) {
	ok := `{"a":` + strings.Repeat("[", maxJSONDepth-1) + strings.Repeat("]", maxJSONDepth-1) + "}"
	if _, err := parseJSON([]byte(ok)); err != nil {
		t.Fatalf("depth %d: %v", maxJSONDepth, err)
	}
	deep := `{"a":` + strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth) + "}"
	_, err := parseJSON([]byte(deep))
	if err == nil || !err.tooDeep || err.msg != "JSON nesting depth exceeds maximum allowed limit (100)" {
		t.Fatalf("depth %d: %v", maxJSONDepth+1, err)
	}
}

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", `"plain"`},
		{`q"b\s/`, `"q\"b\\s/"`},
		{"\b\t\n\f\r\x00\x1f\x7f", `"\b\t\n\f\r\u0000\u001F` + "\x7f\""},
		{"é😀<>&\u2028", "\"é😀<>&\u2028\""},
		{"\xf0\x9f", "\"\xf0\x9f\""}, // raw bytes pass, as rapidjson writes them
	} {
		if got := string(appendString(nil, tc.in)); got != tc.want {
			t.Errorf("appendString(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if got := string(appendString(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("appendString([]byte %q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// Whatever we write, encoding/json reads back (for valid UTF-8).
	for _, s := range []string{"a\x00b", "tab\there", `"\`, "é"} {
		var back string
		if err := json.Unmarshal(appendString(nil, s), &back); err != nil || back != s {
			t.Errorf("round trip %q: %q, %v", s, back, err)
		}
	}
}

func TestParseResponse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		text    string
		hasText bool
		err     string
		wantErr bool
	}{
		{in: `{"model_name":"m","model_version":"1","text_output":"hi"}`, text: "hi", hasText: true},
		{in: `{"text_output":"a\nb\u00e9"}`, text: "a\nb\u00e9", hasText: true},
		{in: "{\"text_output\":\"\xf0\x9f\"}", text: "\xf0\x9f", hasText: true},
		{in: `{"text_output":["a","b"]}`, text: "ab", hasText: true},
		{in: `{"text_output":[]}`, text: "", hasText: true},
		{in: `{"batch_index":0,"cum_log_probs":0.0,"output_log_probs":[0.0,{"x":[1]}],"text_output":"x"}`, text: "x", hasText: true},
		{in: `{"error":"boom"}`, err: "boom"},
		{in: `{}`},
		{in: ` {"text_output":"x"} `, text: "x", hasText: true},
		{in: `{"text_output":5}`, wantErr: true},
		{in: `{"text_output":["a",1]}`, wantErr: true},
		{in: `[1]`, wantErr: true},
		{in: `{"text_output":"x"`, wantErr: true},
		{in: `{"text_output":"x"} {}`, wantErr: true},
		{in: `{"a":` + strings.Repeat("[", 200), wantErr: true},
	} {
		var f responseFields
		_, err := parseResponse([]byte(tc.in), nil, &f, true, nil)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseResponse(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if string(f.text) != tc.text || f.hasText != tc.hasText || f.err != tc.err {
			t.Errorf("parseResponse(%q) = text %q (%v) err %q", tc.in, f.text, f.hasText, f.err)
		}
	}
}

func TestParseJSONValueLimit(t *testing.T) {
	many := "[" + strings.Repeat("0,", maxJSONValues-2) + "0]"
	if _, err := parseJSON([]byte(many)); err != nil {
		t.Fatalf("%d values: %v", maxJSONValues, err)
	}
	_, err := parseJSON([]byte("[" + strings.Repeat("0,", maxJSONValues-1) + "0]"))
	if err == nil || !err.tooMany {
		t.Fatalf("%d values: %v", maxJSONValues+1, err)
	}
}

// A stream's responses read with a known prefix (parseResponse's known)
// give what each gives read whole: fields, text and error, in sequences of
// responses built from shared and varied members before text_output (so
// that the prefix is met, missed, and met half-way), members after it,
// white space, escapes, and bytes corrupted at random.
func TestKnownPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	ws := func() string { return []string{"", "", "", " ", "\n\t"}[rng.IntN(5)] }
	member := func() string {
		switch rng.IntN(12) {
		case 0:
			return `"model_name":"ensemble"`
		case 1:
			return `"model_version":"1"`
		case 2:
			return `"batch_index":` + []string{"0", "1", "0.0"}[rng.IntN(3)]
		case 3:
			return `"output_log_probs":[0.0,` + ws() + `{"x":[1]}]`
		case 4:
			return `"error":"boom"`
		case 5:
			return `"finish_reason":` + []string{`"stop"`, `""`, `"length"`}[rng.IntN(3)]
		case 6:
			return `"num_input_tokens":` + []string{"0", "3", `"7"`}[rng.IntN(3)]
		case 7:
			return `"num_output_tokens":5`
		case 8:
			return `"text_output":"early"`
		case 9:
			return `"model\u005fname":"esc"`
		case 10:
			return `"other":{"a":[1,2,{"b":null}]}`
		}
		return `"sequence_index":0`
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
		return b + `"text_output":` + ws()
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
		var known knownPrefix
		var scratch []byte
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
			var got, want responseFields
			if !meta && known.starts(in) {
				hits++
			}
			var gerr, werr error
			scratch, gerr = parseResponse(in, scratch, &got, meta, &known)
			_, werr = parseResponse(in, nil, &want, meta, nil)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) || string(got.text) != string(want.text) || got.hasText != want.hasText ||
				got.err != want.err || got.hasErr != want.hasErr || got.modelName != want.modelName || got.modelVersion != want.modelVersion ||
				got.finishReason != want.finishReason || got.numInput != want.numInput || got.numOutput != want.numOutput {
				t.Fatalf("response %q (meta %v, known prefix %q):\n got %+v, %v\nwant %+v, %v", in, meta, known.b, got, gerr, want, werr)
			}
		}
	}
	if hits < 10_000 {
		t.Fatalf("the known prefix was met %d times in 80,000 responses: the test no longer exercises it", hits)
	}
	t.Logf("known prefix met in %d of 80,000 responses", hits)
}
