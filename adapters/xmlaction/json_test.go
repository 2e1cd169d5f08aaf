package xmlaction

// The JSON moved from encoding/json to internal/json (issue 29 §2). These
// tests hold it to what the protocol needs of it, with encoding/json (v1*)
// as the reference where it read and wrote the same: the values (numbers
// as written, the last of duplicates, U+FFFD for invalid UTF-8) and the
// bytes written. Error messages are the library's.

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// v1Decode is the action body's and tool result's decode as it was.
func v1Decode(b []byte) (v any, err error) {
	dec := stdjson.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// fromV1 is a value decoded with UseNumber as this package decodes it.
func fromV1(v any) any {
	switch x := v.(type) {
	case stdjson.Number:
		return number(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = fromV1(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = fromV1(e)
		}
		return l
	}
	return v
}

func v1Marshal(v any) string {
	var buf bytes.Buffer
	enc := stdjson.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null"
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func v1DecodeJSONString(raw []byte) string {
	var s string
	if stdjson.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil {
		return ""
	}
	return s
}

// checkJSONAsV1 holds the decoding we keep to encoding/json's: the same
// JSON accepted, the same values (numbers as written, the last duplicate,
// U+FFFD for invalid UTF-8), the same bytes written back. Error wording is
// the library's and not compared.
func checkJSONAsV1(t *testing.T, b []byte) {
	t.Helper()
	wantV, wantErr := v1Decode(b)
	v, err := decodeJSON(b)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, encoding/json %v", b, err, wantErr)
	}
	if err != nil {
		return
	}
	if !reflect.DeepEqual(v, fromV1(wantV)) {
		t.Fatalf("%q: decoded %#v, encoding/json %#v", b, v, fromV1(wantV))
	}
	if got, want := marshalCompact(v), v1Marshal(wantV); got != want {
		t.Fatalf("%q: marshalled %s, encoding/json %s", b, got, want)
	}
	if want, err := structpb.NewValue(wantV); err == nil {
		if got := toProto(v); !proto.Equal(got, want) {
			t.Fatalf("%q: proto %v, structpb %v", b, got, want)
		}
	}
	if got, want := decodeJSONString(b), v1DecodeJSONString(b); !bytes.ContainsAny(b, `"`) && got != want {
		t.Fatalf("%q: decodeJSONString %q, encoding/json %q", b, got, want)
	}
}

var jsonSeeds = []string{
	`{"name":"n","parameters":{"a":1,"b":[1.5e3,-0,true,null,"x\u00e9\ud83d\ude00"]}}`,
	`{"name": "w", `, `{"name":"n",<thought>x</thought> "p":1}`, `{"name":"n","parameters":{"a":"x`,
	`{"a":1} x`, `{"a":1}{`, `{"a":1}[`, `{"a":1}]`, `{"a":1} "s" x`, `{"a":1} 12`, `{"a":1} 1.`, `{"a":1} tru`,
	`123x`, `01`, `-`, `-x`, `1.x`, `1e+`, `1ex`, `trux`, `fals`, `nul1`, `"\x"`, `"\u12g4"`, "\"a\x01\"",
	`{"a" 1}`, `{"a":1 2}`, `[1 2]`, `[1,]`, `{,}`, `{"a":}`, "{\"a\":\"\xff\xfe\"}", "\xc3\xa9", `'`, `"`,
	`"\ud800"`, `"\ud800\ud800\udc00"`, `"\udc00x"`, `{"name":"a","name":"b"}`, `{"NAME":"a"}`, `{"name":1e400}`,
	`{"name":{"x":1},"name":"y"}`, `{"target":"t","input":"i","parameters":{"a":1}}`, `{"Target":"t","INPUT":null}`,
	`{"target":7}`, `{"input":[1]}`, `{"parameters":"x"}`, `{"parameters":{"a":1e400}}`, `{"model":1,"target":2}`,
	`{"parameters":{"a":1},"parameters":{"b":2}}`, `{"parameters":{"a":{"x":1},"a":{"y":2}}}`, `null`, ``, `  `,
	`[1]`, `"s"`, `true`, `5`, `{"target":"t","input":"i"} }`, `{"target":"t","input":"i"} x`, `{"targeſ":1}`,
	`{"parameterſ":{"a":1}}`, `{"a":"<>&\u2028"}`, `{"a":1e21,"b":1e-7,"c":0.000001,"d":123456789012345678901234}`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
}

func TestJSONAsEncodingJSON(t *testing.T) {
	for _, s := range jsonSeeds {
		checkJSONAsV1(t, []byte(s))
	}
	// Mutations of the seeds: a byte replaced, cut, or doubled.
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("{}[]:,\"\\ \t\n01-.eE+tfnrulasxu\x00\x1f\x7f\xc3\xa9\xff")
	for range 20000 {
		b := []byte(jsonSeeds[r.IntN(len(jsonSeeds)-2)])
		for range 1 + r.IntN(3) {
			if len(b) == 0 {
				b = append(b, alphabet[r.IntN(len(alphabet))])
				continue
			}
			i := r.IntN(len(b))
			switch r.IntN(4) {
			case 0:
				b[i] = alphabet[r.IntN(len(alphabet))]
			case 1:
				b = b[:i]
			case 2:
				b = append(b[:i:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[i:]...)...)
			default:
				b = append(b[:i:i], b[i/2:]...)
			}
		}
		checkJSONAsV1(t, b)
	}
}

func FuzzJSONAsEncodingJSON(f *testing.F) {
	for _, s := range jsonSeeds[:len(jsonSeeds)-2] {
		f.Add([]byte(s))
	}
	f.Fuzz(checkJSONAsV1)
}

// The client's request body and a rendered tool-call name are the bytes
// encoding/json.Marshal wrote.
func TestMarshalAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"calc", "<b>&</b>", "a\u2028b\u2029", "\x01\b\f\n\r\t\x7f\"\\", "é😀"} {
		want, _ := stdjson.Marshal(s)
		if got, _ := json.Marshal(s, htmlSafeOptions); string(got) != string(want) {
			t.Errorf("name %q: %s, encoding/json %s", s, got, want)
		}
		params := map[string]any{"z": s, "a": []any{1.5, 1e21, 1e-7, nil, true}, "m": map[string]any{"y": s, "b": 2.0}}
		want, _ = stdjson.Marshal(map[string]any{"target": s, "input": s, "parameters": params})
		if got, _ := marshalClientRequest(s, s, params); string(got) != string(want) {
			t.Errorf("request %q:\n%s\nencoding/json\n%s", s, got, want)
		}
	}
}

// A tool gets the parameters' numbers as the model wrote them.
func TestNumbersAsWritten(t *testing.T) {
	var a action
	if err := a.parseBody([]byte(`{"name":"n","parameters":{"a":1.0,"b":12345678901234567890,"c":[-0,1e400],"a":2.50}}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := marshalCompact(a.params), `{"a":2.50,"b":12345678901234567890,"c":[-0,1e400]}`; got != want {
		t.Fatalf("params %s, want %s", got, want)
	}
	if got, want := toProto(a.params["c"]), structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{
		structpb.NewNumberValue(0), structpb.NewNullValue()}}); !proto.Equal(got, want) {
		t.Fatalf("proto %v, want %v", got, want)
	}
}

// The action errors name the code and the library's detail with its offset.
func TestActionJSONErrors(t *testing.T) {
	for body, want := range map[string]string{
		`{"name": "w",`:          "unexpected EOF at offset 13",
		`{"name":"n",<x> "p":1}`: "invalid character '<' at start of value at offset 12",
		`{"name":"n"} x`:         "data after the JSON value at offset 13",
		`{"name":"n"}{}`:         "data after the JSON value at offset 12",
	} {
		var a action
		err := a.parseBody([]byte(body))
		if err == nil || err.kind != kindInvalidJSON || err.detail != want {
			t.Errorf("%s: %+v, want invalid_json %q", body, err, want)
		}
	}
}

// A request error names the field at fault.
func TestParseRequestErrors(t *testing.T) {
	for body, want := range map[string]string{
		`{"target":7,"input":"i"}`:        `request: field "target" must be a string`,
		`{"target":"t","input":[1]}`:      `request: field "input" must be a string`,
		`{"target":"t","parameters":"x"}`: `request: field "parameters" must be an object`,
		`{"parameters":{"a":1e400}}`:      `request: field "parameters.a" must be a number within float64's range`,
		`{"model":1,"target":"t"}`:        `request: unknown field "model"`,
		`{"tar_get":"t"}`:                 `request: unknown field "tar_get"`,
		`[1]`:                             `request: the body must be a JSON object`,
		``:                                `request: unexpected EOF at offset 0`,
		`{"target":"t","input":"i"} x`:    `request: invalid character 'x' after top-level value at offset 27`,
		`{"target":"t"`:                   `request: unexpected EOF at offset 13`,
		`null`:                            `request: "target" is required`,
		`{"target":"t"}`:                  `request: "input" is required (a string)`,
		`{"TARGET":"t","Input":null}`:     `request: "input" is required (a string)`,
	} {
		_, err := parseRequest([]byte(body))
		if err == nil || err.Code != canonical.CodeInvalidArgument || err.Message != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	req, err := parseRequest([]byte(`{"Target":"a","target":"t","input":"i` + "\xff" + `","parameters":{"n":1.5},"parameters":{"m":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.GetTarget() != "t" || canonical.PromptText(req) != "i\uFFFD" || len(req.GetParameters()) != 2 {
		t.Fatalf("request %v", req)
	}
}
