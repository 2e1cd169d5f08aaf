package xmlaction

// The JSON moved from encoding/json to internal/json (issue 29 §2) with
// the promise that nothing on the wire changed. These tests hold the new
// code to the encoding/json code it replaced (kept here as the reference,
// v1*): the same values, the same messages at the same offsets, the same
// bytes written.

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
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
func v1Decode(b []byte) (v any, msg string, trailing int, more bool) {
	dec := stdjson.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		var se *stdjson.SyntaxError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Sprintf("%s at offset %d", se.Error(), se.Offset), 0, false
		case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return nil, "the JSON ends early at offset " + itoa(len(b)), 0, false
		}
		return nil, err.Error(), 0, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, "", int(dec.InputOffset()), true
	}
	return v, "", 0, false
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

func v1DecodeValue(b []byte) (any, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	dec := stdjson.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func v1BodyName(body []byte) string {
	var v struct {
		Name any `json:"name"`
	}
	if stdjson.Unmarshal(trimFence(body), &v) != nil {
		return ""
	}
	s, _ := v.Name.(string)
	return s
}

func v1DecodeJSONString(raw []byte) string {
	var s string
	if stdjson.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil {
		return ""
	}
	return s
}

// v1ParseRequest is parseRequest as it was.
func v1ParseRequest(body []byte) (*canonical.Request, *canonical.Error) {
	dec := stdjson.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var in streamRequest
	if err := dec.Decode(&in); err != nil {
		var te *stdjson.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: field %q must be %s", te.Field, te.Type.String())
		}
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: data after the JSON object")
	}
	if in.Target == "" {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, `request: "target" is required`)
	}
	if in.Input == nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, `request: "input" is required (a string)`)
	}
	params := make(map[string]*structpb.Value, len(in.Parameters))
	for k, v := range in.Parameters {
		pv, err := structpb.NewValue(v)
		if err != nil {
			return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: parameters.%s: %v", k, err)
		}
		params[k] = pv
	}
	return &canonical.Request{
		Target:     in.Target,
		Inputs:     []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", *in.Input)}},
		Parameters: params,
	}, nil
}

// checkJSONAsV1 compares every JSON path of the package on b with the
// encoding/json code it replaced.
func checkJSONAsV1(t *testing.T, b []byte) {
	t.Helper()
	wantV, wantMsg, wantOff, wantMore := v1Decode(b)
	v, end, err := decodeJSON(b)
	if err != nil {
		if got := jsonErr(err, b); got != wantMsg {
			t.Fatalf("%q: error %q, encoding/json %q", b, got, wantMsg)
		}
	} else {
		if wantMsg != "" {
			t.Fatalf("%q: decoded %v, encoding/json: %s", b, v, wantMsg)
		}
		if !reflect.DeepEqual(v, fromV1(wantV)) {
			t.Fatalf("%q: decoded %#v, encoding/json %#v", b, v, fromV1(wantV))
		}
		off, more := trailingOffset(b, end)
		if more != wantMore || more && off != wantOff {
			t.Fatalf("%q: data after at %d (%v), encoding/json at %d (%v)", b, off, more, wantOff, wantMore)
		}
		if got, want := marshalCompact(v), v1Marshal(wantV); got != want {
			t.Fatalf("%q: marshalled %s, encoding/json %s", b, got, want)
		}
		var want *structpb.Value
		if pv, err := structpb.NewValue(wantV); err == nil {
			want = pv
		}
		if got := protoValue(v); !proto.Equal(got, want) {
			t.Fatalf("%q: proto %v, structpb %v", b, got, want)
		}
	}
	gotV, gotErr := decodeValue(b)
	wantV, wantErr := v1DecodeValue(b)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(gotV, fromV1(wantV)) {
		t.Fatalf("%q: decodeValue %v, %v; encoding/json %v, %v", b, gotV, gotErr, wantV, wantErr)
	}
	if got, want := bodyName(b), v1BodyName(b); got != want {
		t.Fatalf("%q: bodyName %q, encoding/json %q", b, got, want)
	}
	if got, want := decodeJSONString(b), v1DecodeJSONString(b); !bytes.ContainsAny(b, `"`) && got != want {
		t.Fatalf("%q: decodeJSONString %q, encoding/json %q", b, got, want)
	}
	gotReq, gotErr := parseRequest(b)
	wantReq, wantErr := v1ParseRequest(b)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !proto.Equal(gotReq, wantReq) {
		t.Fatalf("%q: request %v %v, encoding/json %v %v", b, gotReq, gotErr, wantReq, wantErr)
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
