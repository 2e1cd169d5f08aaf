package triton

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// render runs events through an encoder and returns the responses it
// sends, one per line, then "END" or "FAIL <code> <message>".
func render(t *testing.T, e *responseEncoder, events []*canonical.Event) string {
	t.Helper()
	if err := canonical.Validate(events); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range events {
		resp, done, fail := e.event(ev)
		if resp != nil {
			out = append(out, string(resp))
		}
		if !done {
			continue
		}
		if fail != nil {
			return strings.Join(append(out, "FAIL "+fail.Code.String()+" "+fail.Message), "\n")
		}
		if !e.stream {
			out = append(out, string(e.final()))
		}
		return strings.Join(append(out, "END"), "\n")
	}
	t.Fatal("no terminal event")
	return ""
}

// agentRun is a run like scripted's demo-agent, with extras the encoder
// must drop: a user message, a subgraph namespace, a data block.
func agentRun() []*canonical.Event {
	b := canonical.NewBuilder()
	var ev []*canonical.Event
	ev = b.Lifecycle(ev, canonical.StatusRunning)
	ev = b.StartMessage(ev, "u", "user")
	ev = b.Text(ev, "echoed user text")
	ev = b.FinishMessage(ev, canonical.FinishStop, nil)
	ev = b.StartMessage(ev, "", "assistant")
	ev = b.Reasoning(ev, "think")
	ev = b.Reasoning(ev, " hard")
	ev = b.ToolCall(ev, "call-1", "calculator")
	ev = b.ToolArgs(ev, `{"expression"`)
	ev = b.ToolArgs(ev, `: "6 * 7"}`)
	ev = b.FinishMessage(ev, canonical.FinishToolCalls, nil)
	ev = b.Emit(ev, &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{ToolCallId: "call-1", Name: "calculator"}}})
	ev = b.Emit(ev, &canonical.Event{Kind: &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{ToolCallId: "call-1", Output: canonical.Value(map[string]any{"result": 42})}}})
	ev = b.Emit(ev, &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{ToolCallId: "call-2", Name: "search"}}})
	ev = b.Emit(ev, &canonical.Event{Kind: &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{ToolCallId: "call-2", Error: &canonical.ErrorProto{Code: 14, Message: "search down"}}}})
	sub := canonical.NewBuilder("subgraph")
	ev = sub.Text(ev, "nested text")
	ev = sub.FinishMessage(ev, canonical.FinishStop, nil)
	ev = b.StartMessage(ev, "", "assistant")
	ev = b.Data(ev, "image/png", []byte{1, 2})
	ev = b.Text(ev, "6 * 7")
	ev = b.Text(ev, " = 42.")
	return b.End(ev, canonical.StatusCompleted, nil)
}

func TestResponseEncoder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		enc    *responseEncoder
		events []*canonical.Event
		want   string
	}{
		{"stream", newResponseEncoder("", "m", true, false, "", 1<<20), agentRun(), `{"model_name":"m","model_version":"1","text_output":"","tool_call_arguments":"{\"expression\": \"6 * 7\"}","tool_call_id":"call-1","tool_call_name":"calculator"}
{"model_name":"m","model_version":"1","text_output":"","tool_call_id":"call-1","tool_call_result":"{\"result\":42}"}
{"model_name":"m","model_version":"1","text_output":"","tool_call_error":"search down","tool_call_id":"call-2"}
{"model_name":"m","model_version":"1","text_output":"6 * 7"}
{"model_name":"m","model_version":"1","text_output":" = 42."}
END`},
		{"stream with reasoning and id", newResponseEncoder("7", "m", true, true, "", 1<<20), agentRun(), `{"id":"7","model_name":"m","model_version":"1","text_output":"<think>think"}
{"id":"7","model_name":"m","model_version":"1","text_output":" hard"}
{"id":"7","model_name":"m","model_version":"1","text_output":"</think>"}
{"id":"7","model_name":"m","model_version":"1","text_output":"","tool_call_arguments":"{\"expression\": \"6 * 7\"}","tool_call_id":"call-1","tool_call_name":"calculator"}
{"id":"7","model_name":"m","model_version":"1","text_output":"","tool_call_id":"call-1","tool_call_result":"{\"result\":42}"}
{"id":"7","model_name":"m","model_version":"1","text_output":"","tool_call_error":"search down","tool_call_id":"call-2"}
{"id":"7","model_name":"m","model_version":"1","text_output":"6 * 7"}
{"id":"7","model_name":"m","model_version":"1","text_output":" = 42."}
END`},
		{"aggregate", newResponseEncoder("", "m", false, true, "Q: ", 1<<20), agentRun(),
			`{"model_name":"m","model_version":"1","text_output":"Q: <think>think hard</think>6 * 7 = 42.","tool_calls":"[{\"id\":\"call-1\",\"name\":\"calculator\",\"arguments\":\"{\\\"expression\\\": \\\"6 * 7\\\"}\",\"result\":{\"result\":42}},{\"id\":\"call-2\",\"name\":\"search\",\"arguments\":\"\",\"error\":\"search down\"}]"}
END`},
		{"aggregate over the limit", newResponseEncoder("", "m", false, false, "", 10), agentRun(),
			`FAIL resource_exhausted response exceeds max_output_bytes (10 bytes of text and tool arguments)`},
		{"failure", newResponseEncoder("", "m", true, false, "", 1<<20), func() []*canonical.Event {
			b := canonical.NewBuilder()
			ev := b.Text(nil, "partial")
			return b.End(ev, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "upstream down"))
		}(), `{"model_name":"m","model_version":"1","text_output":"partial"}
FAIL unavailable upstream down`},
		{"cancelled", newResponseEncoder("", "m", true, false, "", 1<<20), canonical.NewBuilder().End(nil, canonical.StatusCancelled, nil),
			`FAIL canceled run cancelled`},
		{"interrupt", newResponseEncoder("", "m", true, false, "", 1<<20), func() []*canonical.Event {
			b := canonical.NewBuilder()
			ev := b.Emit(nil, &canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{
				InterruptId: "approve-1", Payload: structpb.NewStringValue("ok?")}}})
			return b.End(ev, canonical.StatusInterrupted, nil)
		}(), `{"interrupt":"\"ok?\"","interrupt_id":"approve-1","model_name":"m","model_version":"1","text_output":""}
END`},
		{"empty", newResponseEncoder("", "m", false, false, "", 1<<20), canonical.NewBuilder().End(nil, canonical.StatusCompleted, nil),
			`{"model_name":"m","model_version":"1","text_output":""}
END`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(t, tc.enc, tc.events); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestEncodeRequest(t *testing.T) {
	req := &canonical.Request{
		Target: "m",
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "Say \"hi\"\n")}},
		Parameters: map[string]*structpb.Value{
			"id":                structpb.NewStringValue("42"),
			"stream":            structpb.NewBoolValue(false),
			"include_reasoning": structpb.NewBoolValue(true),
			"temperature":       structpb.NewNumberValue(0.7),
			"top_k":             structpb.NewNumberValue(40),
			"seed":              structpb.NewNumberValue(18446744073709551615),
			"ratio":             structpb.NewNumberValue(1),
			"stop_words":        structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("\n")}}),
			"config":            structpb.NewStructValue(&structpb.Struct{}),
			"nothing":           structpb.NewNullValue(),
			"label":             structpb.NewStringValue("x"),
			"max_tokens_str":    structpb.NewStringValue("5"),
			"max_tokens":        structpb.NewStringValue("12"),
		},
		Extensions: map[string]*structpb.Value{extNumbers: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"seed":  structpb.NewStringValue("18446744073709551615"),
			"ratio": structpb.NewStringValue("1.0"),
		}})},
	}
	trtllm := modelInputs{"text_input": "BYTES", "max_tokens": "INT32", "stream": "BOOL", "bad_words": "BYTES", "stop_words": "BYTES",
		"temperature": "FP32", "top_k": "INT32", "seed": "UINT64", "exclude_input_in_output": "BOOL"}
	for _, tc := range []struct {
		name   string
		inputs modelInputs
		stream bool
		want   string
	}{
		{"untyped", nil, true,
			`{"text_input":"Say \"hi\"\n","exclude_input_in_output":true,"id":"42","label":"x","max_tokens":"12","max_tokens_str":"5","ratio":1.0,"seed":18446744073709551615,"stop_words":["\n"],"stream":true,"temperature":0.7,"top_k":40}`},
		{"typed by metadata", trtllm, false,
			`{"text_input":"Say \"hi\"\n","bad_words":"","exclude_input_in_output":true,"id":"42","label":"x","max_tokens":12,"max_tokens_str":"5","ratio":1.0,"seed":18446744073709551615,"stop_words":["\n"],"stream":false,"temperature":0.7,"top_k":40}`},
		{"vllm", modelInputs{"text_input": "BYTES", "stream": "BOOL", "sampling_parameters": "BYTES"}, true,
			`{"text_input":"Say \"hi\"\n","id":"42","label":"x","max_tokens":"12","max_tokens_str":"5","ratio":1.0,"seed":18446744073709551615,"stream":true,"temperature":0.7,"top_k":40}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(encodeRequest(req, tc.stream, tc.inputs, 99)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	// A model that requires max_tokens gets the default when none is set.
	delete(req.Parameters, "max_tokens")
	got := string(encodeRequest(req, true, trtllm, 99))
	if !strings.Contains(got, `"max_tokens":99`) {
		t.Errorf("default max_tokens missing: %s", got)
	}
}
