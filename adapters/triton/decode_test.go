package triton

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// summary renders a decoded request for comparison.
func summary(g *generateRequest) string {
	m := map[string]any{
		"prompt":  canonical.PromptText(g.req),
		"target":  g.req.GetTarget(),
		"params":  (&structpb.Struct{Fields: g.req.GetParameters()}).AsMap(),
		"stream":  g.stream,
		"exclude": g.exclude,
	}
	if g.reasoning {
		m["reasoning"] = true
	}
	if len(g.req.GetExtensions()) > 0 {
		m["ext"] = (&structpb.Struct{Fields: g.req.GetExtensions()}).AsMap()
	}
	return string(marshal(m))
}

func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"documented", `{"text_input":"client input","parameters":{"stream":false,"temperature":0}}`,
			`{"exclude":true,"ext":{"triton.numbers":{"temperature":"0"}},"params":{"stream":false,"temperature":0},"prompt":"client input","stream":false,"target":"m"}`},
		{"genai-perf", `{"text_input":["p"],"stream":true,"max_tokens":16,"temperature":0.7,"top_p":0.9}`,
			`{"exclude":true,"ext":{"triton.numbers":{"max_tokens":"16","temperature":"0.7","top_p":"0.9"}},"params":{"max_tokens":16,"stream":true,"temperature":0.7,"top_p":0.9},"prompt":"p","stream":true,"target":"m"}`},
		{"trt-llm", `{"text_input":"hello world","max_tokens":20,"bad_words":"","stop_words":["a","b"],"stream":true,"exclude_input_in_output":false}`,
			`{"exclude":false,"ext":{"triton.numbers":{"max_tokens":"20"}},"params":{"bad_words":[""],"exclude_input_in_output":false,"max_tokens":20,"stop_words":["a","b"],"stream":true},"prompt":"hello world","stream":true,"target":"m"}`},
		{"id and passthrough", `{"id":"42","text_input":"x","seed":18446744073709551615,"custom":"v","n":2.50,"flag":true}`,
			`{"exclude":true,"ext":{"triton.numbers":{"n":"2.50","seed":"18446744073709551615"},"triton.request_id":"42"},"params":{"custom":"v","flag":true,"id":"42","n":2.5,"seed":18446744073709552000},"prompt":"x","stream":false,"target":"m"}`},
		{"vllm sampling_parameters", `{"text_input":"x","sampling_parameters":"{\"max_tokens\": 8, \"temperature\": 0.5, \"stop\": [\"a\"], \"top_k\": 3}","top_k":5}`,
			`{"exclude":true,"ext":{"triton.numbers":{"max_tokens":"8","temperature":"0.5","top_k":"5"}},"params":{"max_tokens":8,"sampling_parameters":"{\"max_tokens\": 8, \"temperature\": 0.5, \"stop\": [\"a\"], \"top_k\": 3}","temperature":0.5,"top_k":5},"prompt":"x","stream":false,"target":"m"}`},
		{"include_reasoning", `{"text_input":"x","parameters":{"include_reasoning":true}}`,
			`{"exclude":true,"params":{"include_reasoning":true},"prompt":"x","reasoning":true,"stream":false,"target":"m"}`},
		{"nested array text", `{"text_input":[["x"]]}`,
			`{"exclude":true,"params":{},"prompt":"x","stream":false,"target":"m"}`},
		{"empty list input", `{"text_input":"x","stop_words":[]}`,
			`{"exclude":true,"params":{"stop_words":[]},"prompt":"x","stream":false,"target":"m"}`},
		{"parameters set twice: last wins", `{"text_input":"x","temperature_p":1,"parameters":{"temperature_p":2}}`,
			`{"exclude":true,"ext":{"triton.numbers":{"temperature_p":"2"}},"params":{"temperature_p":2},"prompt":"x","stream":false,"target":"m"}`},
		{"duplicate parameter keys read the first", `{"text_input":"x","p":1,"p":2}`,
			`{"exclude":true,"ext":{"triton.numbers":{"p":"1"}},"params":{"p":1},"prompt":"x","stream":false,"target":"m"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := decodeRequest([]byte(tc.body), "m", 1<<20)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if got := summary(g); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	const typeMsg = "parameter 'p' has invalid type. It should be either 'int', 'bool', or 'string'."
	for _, tc := range []struct {
		name, body string
		code       canonical.Code
		msg        string
	}{
		{"empty", ``, canonical.CodeInternal, "failed to parse the request JSON buffer: The document is empty. at 0"},
		{"invalid json", `{"text_input": `, canonical.CodeInternal, "failed to parse the request JSON buffer: Invalid value. at 15"},
		{"not an object", `["x"]`, canonical.CodeInternal, "attempt to get members for non-object"},
		{"id not a string", `{"id":7,"text_input":"x"}`, canonical.CodeInternal, "Unable to parse 'id': attempt to access JSON non-string as string"},
		{"parameters not an object", `{"text_input":"x","parameters":[1]}`, canonical.CodeInternal,
			"Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object"},
		{"object parameter", `{"text_input":"x","p":{"a":1}}`, canonical.CodeInvalidArgument, typeMsg},
		{"array parameter", `{"text_input":"x","p":[1]}`, canonical.CodeInvalidArgument, typeMsg},
		{"null parameter", `{"text_input":"x","p":null}`, canonical.CodeInvalidArgument, typeMsg},
		{"nested bad parameter", `{"text_input":"x","parameters":{"p":null}}`, canonical.CodeInvalidArgument, "Converting keyword: 'parameters': " + typeMsg},
		{"parameters in parameters", `{"text_input":"x","parameters":{"parameters":{}}}`, canonical.CodeInvalidArgument,
			"Converting keyword: 'parameters': parameter 'parameters' has invalid type. It should be either 'int', 'bool', or 'string'."},
		{"text_input number", `{"text_input":5}`, canonical.CodeInternal, "Unable to parse JSON bytes array: attempt to access JSON non-string as string"},
		{"text_input null", `{"text_input":null}`, canonical.CodeInternal, "Unable to parse JSON bytes array: attempt to access JSON non-string as string"},
		{"stream string", `{"text_input":"x","stream":"yes"}`, canonical.CodeInternal, "Unable to parse 'data': attempt to access JSON non-boolean as boolean"},
		{"max_tokens double", `{"text_input":"x","max_tokens":1.5}`, canonical.CodeInternal, "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"},
		{"seed negative", `{"text_input":"x","seed":-1}`, canonical.CodeInternal, "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer"},
		{"temperature string", `{"text_input":"x","temperature":"0.5"}`, canonical.CodeInternal, "Unable to parse 'data': attempt to access JSON non-number as double"},
		{"first error in document order (1)", `{"text_input":true,"stream":123}`, canonical.CodeInternal, "Unable to parse JSON bytes array: attempt to access JSON non-string as string"},
		{"first error in document order (2)", `{"stream":123,"text_input":true}`, canonical.CodeInternal, "Unable to parse 'data': attempt to access JSON non-boolean as boolean"},
		{"nested array too long", `{"text_input":"x","max_tokens":[[1,2]]}`, canonical.CodeInternal, "Unable to parse 'data': Shape does not match true shape of 'data' field"},
		{"nested array empty", `{"text_input":"x","max_tokens":[[]]}`, canonical.CodeInternal, "Failed to parse 'data' field: shape does not match true shape"},
		{"two prompts", `{"text_input":["a","b"]}`, canonical.CodeInvalidArgument, "input 'text_input' must have exactly 1 element"},
		{"no prompt element", `{"text_input":[]}`, canonical.CodeInvalidArgument, "input 'text_input' must have exactly 1 element"},
		{"two max_tokens", `{"text_input":"x","max_tokens":[1,2]}`, canonical.CodeInvalidArgument, "input 'max_tokens' must have exactly 1 element"},
		{"duplicate input", `{"text_input":"a","text_input":"b"}`, canonical.CodeInvalidArgument, "input 'text_input' already exists in request"},
		{"duplicate across parameters", `{"text_input":"a","parameters":{"stream":true},"stream":false}`, canonical.CodeInvalidArgument, "input 'stream' already exists in request"},
		{"duplicate parameters key", `{"text_input":"a","parameters":{"stream":true},"parameters":{}}`, canonical.CodeInvalidArgument,
			"Converting keyword: 'parameters': input 'stream' already exists in request"},
		{"missing prompt", `{"max_tokens":5,"stream":true}`, canonical.CodeInvalidArgument,
			"[request id: <id_unknown>] expected number of inputs between 1 and 11 but got 2 inputs for model 'm'. Got input(s) ['max_tokens','stream'], but missing required input(s) ['text_input']. Please provide all required input(s)."},
		{"missing prompt with id", `{"id":"7"}`, canonical.CodeInvalidArgument,
			"[request id: 7] expected number of inputs between 1 and 11 but got 0 inputs for model 'm'. Got input(s) [], but missing required input(s) ['text_input']. Please provide all required input(s)."},
		{"too deep", `{"text_input":"x","p":` + strings.Repeat("[", 120) + strings.Repeat("]", 120) + `}`, canonical.CodeInvalidArgument,
			"JSON nesting depth exceeds maximum allowed limit (100)"},
		{"too many values", `{"text_input":"x","stop_words":[` + strings.Repeat(`"",`, 70000) + `""]}`, canonical.CodeResourceExhausted,
			"request JSON has more than 65536 values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRequest([]byte(tc.body), "m", 1<<20)
			if err == nil {
				t.Fatal("no error")
			}
			if err.Code != tc.code || err.Message != tc.msg {
				t.Errorf("got %v %q\nwant %v %q", err.Code, err.Message, tc.code, tc.msg)
			}
		})
	}
}

func TestDecodeRequestInputLimit(t *testing.T) {
	body := `{"stop_words":["` + strings.Repeat("a", 20) + `"],"text_input":"` + strings.Repeat("b", 40) + `"}`
	_, err := decodeRequest([]byte(body), "m", 60)
	const want = "request size of 24 bytes with input 'text_input' of size 44 bytes exceeds the maximum allowed input size of 60. Use --http-max-input-size to increase the limit."
	if err == nil || err.Code != canonical.CodeInvalidArgument || err.Message != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if _, err := decodeRequest([]byte(body), "m", 68); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
}

// FuzzDecodeRequest: any body decodes or is refused with a Triton
// message and a status, never a panic; a decoded request is valid
// protobuf (whole UTF-8), so it can cross NATS.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"text_input":"client input","parameters":{"stream":false,"temperature":0}}`,
		`{"id":"42","text_input":["p"],"stream":true,"max_tokens":16,"bad_words":"","stop_words":["a"]}`,
		`{"text_input":"x","sampling_parameters":"{\"max_tokens\": 8}","seed":18446744073709551615}`,
		`{"text_input":"a","text_input":"b"}`, `{"text_input":[[1]]}`, `{"parameters":[]}`, ``, `[`, "{\"a\":\"\\ud83d\\ude00\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := decodeRequest(body, "m", 1<<16)
		if err != nil {
			if err.Message == "" || statusOf(err.Code) < 400 {
				t.Fatalf("error without message or status: %v", err)
			}
			return
		}
		if _, perr := proto.Marshal(g.req); perr != nil {
			t.Fatalf("decoded request does not marshal: %v", perr)
		}
		if !utf8.ValidString(g.prompt) {
			t.Fatalf("prompt %q is not UTF-8", g.prompt)
		}
	})
}
