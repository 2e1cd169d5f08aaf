package triton

import (
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
		_, err := parseTree([]byte(tc.in))
		if err == nil {
			t.Errorf("parseTree(%q): no error, want %q", tc.in, tc.want)
			continue
		}
		if got := err.Error(); got != tc.want {
			t.Errorf("parseTree(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseJSONValues(t *testing.T) {
	v, err := parseTree([]byte(` {"s":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00","i":-12,"u":18446744073709551615,"big":18446744073709551616,"f":0.5,"e":1E2,"t":true,"n":null,"a":[1,[2]],"s":"dup"}` + "\x00trailing"))
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
	if _, err := parseTree([]byte(ok)); err != nil {
		t.Fatalf("depth %d: %v", maxJSONDepth, err)
	}
	deep := `{"a":` + strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth) + "}"
	_, err := parseTree([]byte(deep))
	if err == nil || !err.tooDeep || err.msg != "JSON nesting depth exceeds maximum allowed limit (100)" {
		t.Fatalf("depth %d: %v", maxJSONDepth+1, err)
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
		var r responseReader
		err := r.read([]byte(tc.in), &f, true)
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
	if _, err := parseTree([]byte(many)); err != nil {
		t.Fatalf("%d values: %v", maxJSONValues, err)
	}
	_, err := parseTree([]byte("[" + strings.Repeat("0,", maxJSONValues-1) + "0]"))
	if err == nil || !err.tooMany {
		t.Fatalf("%d values: %v", maxJSONValues+1, err)
	}
}
