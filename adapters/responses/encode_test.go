package responses

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/sse/ssetest"
)

// encodeCase is a run's canonical events and the stream our frontend
// writes for them.
type encodeCase struct {
	name    string
	summary bool
	tools   []string // the function tools the request declared
	events  func(b *canonical.Builder) []*canonical.Event
}

var encodeCases = []encodeCase{
	{name: "text", events: func(b *canonical.Builder) []*canonical.Event {
		out := b.Text(nil, "Hel")
		out = b.Text(out, "lo")
		out = b.FinishBlock(out)
		out = b.Text(out, "second part")
		out = b.FinishMessage(out, canonical.FinishStop, &canonical.Usage{InputTokens: 7, OutputTokens: 3, CacheReadTokens: 2})
		return b.End(out, canonical.StatusCompleted, nil)
	}},
	{name: "reasoning_summary", summary: true, events: reasoningThenText},
	{name: "reasoning_text", events: reasoningThenText},
	// A call of a tool the request did not declare is the bridge's (an
	// agent's calculator): not rendered, the text after it joins the
	// message.
	{name: "bridge_call", tools: []string{"get_weather"}, events: func(b *canonical.Builder) []*canonical.Event {
		out := b.Text(nil, "Let me compute.")
		out = b.ToolCall(out, "call-1", "calculator")
		out = b.ToolArgs(out, `{"expression":"6*7"}`)
		out = b.Text(out, "42.")
		out = b.FinishMessage(out, canonical.FinishStop, nil)
		return b.End(out, canonical.StatusCompleted, nil)
	}},
	{name: "tool_calls", tools: []string{"get_weather", "get_time"}, events: func(b *canonical.Builder) []*canonical.Event {
		out := b.ToolCall(nil, "call_A", "get_weather")
		out = b.ToolArgs(out, `{"city":`)
		out = b.ToolArgs(out, `"Paris"}`)
		out = b.ToolCall(out, "", "get_time") // no call id: one is derived
		out = b.ToolArgs(out, `{}`)
		out = b.FinishMessage(out, canonical.FinishToolCalls, nil)
		return b.End(out, canonical.StatusCompleted, nil)
	}},
	{name: "length", events: func(b *canonical.Builder) []*canonical.Event {
		out := b.Text(nil, "cut sh")
		out = b.FinishMessage(out, canonical.FinishLength, nil)
		return b.End(out, canonical.StatusCompleted, nil)
	}},
	{name: "content_filter", events: func(b *canonical.Builder) []*canonical.Event {
		out := b.FinishMessage(b.Text(nil, "no"), canonical.FinishContentFilter, nil)
		return b.End(out, canonical.StatusCompleted, nil)
	}},
	{name: "failed", events: func(b *canonical.Builder) []*canonical.Event {
		out := b.Text(nil, "partial")
		return b.End(out, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "upstream down"))
	}},
	{name: "data_dropped", events: func(b *canonical.Builder) []*canonical.Event {
		out := b.Data(nil, "image/png", []byte{1, 2})
		out = b.Text(out, "after the image")
		return b.End(out, canonical.StatusCompleted, nil)
	}},
}

func reasoningThenText(b *canonical.Builder) []*canonical.Event {
	out := b.Reasoning(nil, "Greet")
	out = b.Reasoning(out, "ing.")
	out = b.Text(out, "Hello!")
	out = b.FinishMessage(out, canonical.FinishStop, &canonical.Usage{InputTokens: 5, OutputTokens: 9, ReasoningTokens: 4})
	return b.End(out, canonical.StatusCompleted, nil)
}

// testResponse is the response object of the encoder tests.
func testResponse() *response {
	return newResponse(&createRequest{Model: "m"}, "resp_test", time.Unix(1741476777, 0), true)
}

// TestEncoder renders each case's events as the stream in
// testdata/encode/<case>.sse, and checks the stream's rules: sequence
// numbers from 0 by one, every delta between its item's added and done,
// the terminal response holding every item output_item.done carried.
func TestEncoder(t *testing.T) {
	for _, c := range encodeCases {
		t.Run(c.name, func(t *testing.T) {
			evs := c.events(canonical.NewBuilder())
			end := evs[len(evs)-1]
			end.TimeUnixNano = time.Unix(1741476778, 0).UnixNano()
			var buf bytes.Buffer
			var got []*streamEvent
			r := testResponse()
			for _, name := range c.tools {
				r.Tools = append(r.Tools, echoedTool{Type: "function", Name: name})
			}
			enc := newEncoder(r, c.summary, 1<<20, func(ev *streamEvent) error {
				data, err := json.Marshal(ev)
				if err != nil {
					return err
				}
				buf.WriteString("event: " + ev.Type + "\ndata: ")
				buf.Write(data)
				buf.WriteString("\n\n")
				var back streamEvent
				if err := json.Unmarshal(data, &back); err != nil {
					return err
				}
				got = append(got, &back)
				return nil
			})
			if err := enc.start(); err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if err := enc.event(ev); err != nil {
					t.Fatal(err)
				}
			}
			if !enc.done {
				t.Fatal("no terminal event")
			}
			checkStreamRules(t, got)
			checkGolden(t, filepath.Join("testdata", "encode", c.name+".sse"), buf.Bytes())
		})
	}
}

// checkStreamRules checks what openai-node's stream helper enforces.
func checkStreamRules(t *testing.T, evs []*streamEvent) {
	t.Helper()
	open := map[string]bool{}
	var done []*item
	for i, ev := range evs {
		if ev.SequenceNumber != int64(i) {
			t.Fatalf("event %d has sequence_number %d", i, ev.SequenceNumber)
		}
		switch ev.Type {
		case "response.output_item.added":
			if *ev.OutputIndex != len(done)+len(open) {
				t.Fatalf("output_index %d, want %d", *ev.OutputIndex, len(done)+len(open))
			}
			open[ev.Item.ID] = true
		case "response.output_item.done":
			delete(open, ev.Item.ID)
			done = append(done, ev.Item)
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			if !open[ev.ItemID] {
				t.Fatalf("%s for item %s not open", ev.Type, ev.ItemID)
			}
		}
	}
	last := evs[len(evs)-1].Response
	if last == nil || len(last.Output) != len(done) {
		t.Fatalf("terminal response holds %d items, %d were done", len(last.Output), len(done))
	}
}

// BenchmarkEncodeDelta is the frontend's per-delta cost: a canonical text
// delta rendered as response.output_text.delta and written as SSE.
func BenchmarkEncodeDelta(b *testing.B) {
	rw := ssetest.NewDiscard()
	sw, err := sse.NewWriter(rw)
	if err != nil {
		b.Fatal(err)
	}
	out := &writer{sw: sw}
	enc := newEncoder(testResponse(), false, 1<<40, out.event)
	bl := canonical.NewBuilder()
	for _, ev := range bl.StartMessage(nil, "m1", "assistant") {
		if err := enc.event(ev); err != nil {
			b.Fatal(err)
		}
	}
	for _, ev := range bl.Text(nil, "first") {
		if err := enc.event(ev); err != nil {
			b.Fatal(err)
		}
	}
	delta := bl.Text(nil, " token")[0]
	b.ReportAllocs()
	for b.Loop() {
		if err := enc.event(delta); err != nil {
			b.Fatal(err)
		}
		if err := sw.Flush(); err != nil {
			b.Fatal(err)
		}
		if enc.text.Len() > 1<<20 {
			enc.text.Reset()
		}
	}
}

// TestResponseHasOpenResponsesRequiredMembers: Open Responses'
// ResponseResource requires a function tool's description, parameters and
// strict (each may be null) and an output_text part's annotations and
// logprobs, so a response echoing a tool that set none of them, and the
// parts of its output, carry them all (the compliance suite's schema
// check failed every test on these two before).
func TestResponseHasOpenResponsesRequiredMembers(t *testing.T) {
	r := newResponse(&createRequest{Model: "m", Tools: []tool{{Type: "function", Name: "f"}}}, "resp_test", time.Unix(1741476777, 0), true)
	enc := newEncoder(r, false, 1<<20, func(*streamEvent) error { return nil })
	b := canonical.NewBuilder()
	for _, ev := range b.End(b.Text(nil, "hi"), canonical.StatusCompleted, nil) {
		if err := enc.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tools  []map[string]json.Value `json:"tools"`
		Output []struct {
			Content []map[string]json.Value `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "name", "description", "parameters", "strict"} {
		if _, ok := got.Tools[0][k]; !ok {
			t.Errorf("tools[0] lacks %q: %s", k, data)
		}
	}
	if len(got.Output) != 1 || len(got.Output[0].Content) != 1 {
		t.Fatalf("output: %s", data)
	}
	for k, want := range map[string]string{"annotations": "[]", "logprobs": "[]"} {
		if v := got.Output[0].Content[0][k]; string(v) != want {
			t.Errorf("output_text %s = %s, want %s", k, v, want)
		}
	}
}

// TestOfferedTools: the request's function and custom tools, a
// namespace's among them, are offered to the model; web_search,
// tool_search and the other types (which run on OpenAI's side) are not,
// and do not refuse the request (Codex lists them by default). A call of
// a namespace's function names its namespace; a custom tool is a
// function of one string, whose call is a custom_tool_call with that
// string as its input, and a custom_tool_call sent back is that call.
func TestOfferedTools(t *testing.T) {
	c, e := decodeCreate([]byte(`{"model":"m","tools":[{"type":"web_search","external_web_access":false},
		{"type":"function","name":"shell","parameters":{"type":"object"}},
		{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: \"*** Begin Patch\""}},
		{"type":"namespace","name":"agents","tools":[{"type":"function","name":"spawn"}]},{"type":"tool_search"}],
		"input":[{"type":"custom_tool_call","call_id":"c0","name":"apply_patch","input":"*** Begin Patch"},{"type":"custom_tool_call_output","call_id":"c0","output":"done"}]}`))
	if e != nil {
		t.Fatal(e)
	}
	items, e := c.inputItems()
	if e != nil {
		t.Fatal(e)
	}
	req := c.canonicalRequest(items)
	var names []string
	for _, s := range req.GetTools() {
		names = append(names, s.GetName())
	}
	if want := []string{"shell", "apply_patch", "spawn"}; !slices.Equal(names, want) {
		t.Fatalf("offered %q, want %q", names, want)
	}
	if d := req.GetTools()[1].GetDescription(); d != "Edit files.\n\nThe input follows this lark grammar:\nstart: \"*** Begin Patch\"" {
		t.Fatalf("apply_patch's description %q", d)
	}
	leaves := canonical.Leaves(nil, req.GetInputs()[0].GetNode())
	if len(leaves) != 2 || string(leaves[0].GetData()) != `{"input":"*** Begin Patch"}` || string(leaves[1].GetData()) != "done" {
		t.Fatalf("the custom call sent back reads as %v", leaves)
	}
	r := newResponse(c, "resp_test", time.Unix(1741476777, 0), true)
	var evs []string
	enc := newEncoder(r, false, 1<<20, func(ev *streamEvent) error {
		evs = append(evs, ev.Type)
		return nil
	})
	b := canonical.NewBuilder()
	out := b.ToolCall(nil, "call_s", "spawn")
	out = b.ToolArgs(out, `{}`)
	out = b.ToolCall(out, "call_p", "apply_patch")
	out = b.ToolArgs(out, `{"input": "*** Begin`)
	out = b.ToolArgs(out, ` Patch"}`)
	for _, ev := range b.End(b.FinishMessage(out, canonical.FinishToolCalls, nil), canonical.StatusCompleted, nil) {
		if err := enc.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.Output) != 2 || r.Output[0].Name != "spawn" || r.Output[0].Namespace != "agents" {
		t.Fatalf("output %+v, want spawn's call in namespace agents", r.Output)
	}
	if p := r.Output[1]; p.Type != "custom_tool_call" || p.Input == nil || *p.Input != "*** Begin Patch" || p.Arguments != nil {
		t.Fatalf("apply_patch's call %+v", p)
	}
	count := func(typ string) (n int) {
		for _, ev := range evs {
			if ev == typ {
				n++
			}
		}
		return n
	}
	if count("response.function_call_arguments.delta") != 1 || count("response.custom_tool_call_input.delta") != 1 || count("response.custom_tool_call_input.done") != 1 {
		t.Fatalf("events %q: want spawn's arguments and apply_patch's input, once each", evs)
	}
}

// TestTextEchoHasFormat: the response echoes the request's text config
// with the default format when it sets none (Codex sends only verbosity).
func TestTextEchoHasFormat(t *testing.T) {
	for in, want := range map[string]string{
		``:                                  `{"format":{"type":"text"}}`,
		`{"verbosity":"low"}`:               `{"format":{"type":"text"},"verbosity":"low"}`,
		`{"format":{"type":"json_object"}}`: `{"format":{"type":"json_object"}}`,
	} {
		if got := string(textWithFormat(json.Value(in))); got != want {
			t.Errorf("text %s echoed %s, want %s", in, got, want)
		}
	}
}

// TestToolStrict: a function tool's strict is the canonical tool's, and
// the backend sends it for that tool (false, not OpenAI's default true,
// where the client said nothing: the bridge enforces no schema).
func TestToolStrict(t *testing.T) {
	c, e := decodeCreate([]byte(`{"model":"m","input":"x","tools":[{"type":"function","name":"a","strict":true},{"type":"function","name":"b"}]}`))
	if e != nil {
		t.Fatal(e)
	}
	req := c.canonicalRequest(nil)
	if got := req.GetTools(); got[0].Strict == nil || !*got[0].Strict || got[1].Strict != nil {
		t.Fatalf("canonical tools %v", got)
	}
	body, ce := encodeCreate(req, "m", false)
	if ce != nil {
		t.Fatal(ce)
	}
	var sent struct {
		Tools []struct {
			Name   string `json:"name"`
			Strict bool   `json:"strict"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &sent); err != nil || len(sent.Tools) != 2 || !sent.Tools[0].Strict || sent.Tools[1].Strict {
		t.Fatalf("upstream tools %s", body)
	}
}

// The end another instance appended for a run whose owner died skips the
// seqs the owner may have given its own clients (Event.skipped_after):
// its stream events are numbered past as many stream events as those seqs
// may have rendered, so a client of the dead owner resuming from the last
// number it read (starting_after) still reads response.failed.
func TestEncoderNumbersPastAnOwnersSkip(t *testing.T) {
	b := canonical.NewBuilder()
	evs := b.Lifecycle(nil, canonical.StatusRunning)
	evs = b.StartMessage(evs, "m", "assistant")
	evs = b.Text(evs, "partial")
	var g canonical.Guard
	for i, ev := range evs {
		ev.Seq = uint64(i + 1)
		if v := g.Observe(ev); v != nil {
			t.Fatal(v)
		}
	}
	const gap = 999 // seqs skipped
	logged := uint64(len(evs))
	end := g.End(nil, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "owner gone"))
	for i, ev := range end {
		ev.Seq = logged + gap + 1 + uint64(i)
	}
	end[0].SkippedAfter = &logged
	var got []*streamEvent
	enc := newEncoder(testResponse(), false, 1<<20, func(ev *streamEvent) error { got = append(got, ev); return nil })
	if err := enc.start(); err != nil {
		t.Fatal(err)
	}
	var before int64
	for _, ev := range append(evs, end...) {
		if ev == end[0] {
			before = enc.seq
		}
		if err := enc.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	var jumped bool
	for i, ev := range got[1:] {
		switch prev := got[i].SequenceNumber; {
		case ev.SequenceNumber == before+gap*streamEventsPerEvent && prev == before-1:
			jumped = true
		case ev.SequenceNumber != prev+1:
			t.Fatalf("%s numbered %d after %d", ev.Type, ev.SequenceNumber, prev)
		}
	}
	if last := got[len(got)-1]; !jumped || last.Type != "response.failed" {
		t.Fatalf("jumped %v to the end's first number (%d); last event %s", jumped, before+gap*streamEventsPerEvent, last.Type)
	}
}
