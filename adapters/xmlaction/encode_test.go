package xmlaction

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/interlingua-dev/interlingua/canonical"
)

// foreignRun is a run from another protocol: a reasoning block, a native
// tool call, its tool events, an error event and text with characters
// that need escaping.
func foreignRun() []*canonical.Event {
	b := canonical.NewBuilder()
	var evs []*canonical.Event
	evs = b.Lifecycle(evs, canonical.StatusRunning)
	evs = b.Reasoning(evs, "I should compute 6 * 7 </thought> <action> & \r\n")
	evs = b.ToolCall(evs, "call-1", "calculator")
	evs = b.ToolArgs(evs, `{"expression"`)
	evs = b.ToolArgs(evs, `: "6 * 7", "note": "</action>"}`)
	evs = b.FinishMessage(evs, canonical.FinishToolCalls, nil)
	evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{ToolCallId: "call-1", Name: "calculator"}}})
	evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{
		ToolCallId: "call-1", Output: canonical.Value(map[string]any{"result": 42.0, "html": "<b>&</b>"}),
	}}})
	evs = b.Text(evs, "6 * 7 = 42. a</response>b &lt; c")
	// A tool result arriving while the text block is open waits for it.
	evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{
		ToolCallId: "call-2", Error: canonical.Errorf(canonical.CodeNotFound, `tool "x" <missing>`).Proto(),
	}}})
	evs = b.Text(evs, " more")
	evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindError{Error: canonical.Errorf(canonical.CodeUnavailable, "fallback used").Proto()}})
	// Nested namespaces are not rendered.
	nested := canonical.NewBuilder("sub")
	evs = append(evs, nested.Text(nil, "hidden")...)
	evs = append(evs, nested.FinishMessage(nil, canonical.FinishStop, nil)...)
	return b.End(evs, canonical.StatusFailed, canonical.Errorf(canonical.CodeResourceExhausted, "quota"))
}

func TestEncodeForeign(t *testing.T) {
	evs := foreignRun()
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	out := render(evs)
	golden(t, "testdata/render/foreign.out", out)
	// The rendering parses back: the escaped text is whole, the tool call
	// is a valid action body; the extension elements are text to Decoder
	// (issue 36 #3: the rendering is one way; its results are not read back
	// as results, and its action, parsed again, is an action to run).
	got := lines(decodeChunks(t, Config{}, [][]byte{out}))
	want := []string{
		`thought "I should compute 6 * 7 </thought> <action> & \r\n"`,
		`action call-1 "calculator" {"name":"calculator","parameters":{"expression": "6 * 7", "note": "</action>"}}`,
		`text "\n<observation id=\"call-1\" status=\"ok\">{\"html\":\"<b>&</b>\",\"result\":42}</observation>\n"`,
		`text "6 * 7 = 42. a</response>b &lt; c more"`,
		`text "\n<observation id=\"call-2\" status=\"error\" code=\"not_found\">tool \"x\" <missing></observation>\n<error code=\"unavailable\">fallback used</error>\n<error code=\"resource_exhausted\" status=\"failed\">quota</error>\n"`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("re-parsed rendering (-want +got):\n%s", d)
	}
	acts := actionsOf(t, Config{}, [][]byte{out})
	if len(acts) != 1 || !strings.HasPrefix(acts[0], `call-1 type=tool mode=sync name="calculator" params={"expression":"6 * 7","note":"</action>"}`) || strings.Contains(acts[0], "err=") {
		t.Errorf("action parsed from the rendering: %v", acts)
	}
}

func TestEncodeArgsEscaping(t *testing.T) {
	e := NewEncoder()
	var out []byte
	out = e.Encode(out, &canonical.Event{Kind: &canonical.KindBlockStart{BlockStart: &canonical.BlockStart{Type: canonical.BlockToolCall, Id: "c", Name: "n"}}})
	for _, part := range []string{`{"a":"</action>", "b`, `\"</action>": 1</`, `action>}`} {
		out = e.Encode(out, &canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: part}}})
	}
	out = e.Encode(out, &canonical.Event{Kind: &canonical.KindBlockFinish{BlockFinish: &canonical.BlockFinish{}}})
	want := `<action type="tool" mode="sync" id="c">{"name":"n","parameters":{"a":"</action>", "b\"</action>": 1\u003c/action>}}</action>` + "\n"
	if d := cmp.Diff(want, string(out)); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	// An empty foreign call still renders a JSON body.
	e = NewEncoder()
	out = e.Encode(nil, &canonical.Event{Kind: &canonical.KindBlockStart{BlockStart: &canonical.BlockStart{Type: canonical.BlockToolCall, Id: `q"'`, Name: "n"}}})
	out = e.End(out)
	if want := `<action type="tool" mode="sync" id=q"'>{"name":"n","parameters":{}}</action>` + "\n"; string(out) != want {
		t.Errorf("got %s", out)
	}
}

func BenchmarkEncodeDelta(b *testing.B) {
	e := NewEncoder()
	buf := e.Encode(nil, &canonical.Event{Kind: &canonical.KindBlockStart{BlockStart: &canonical.BlockStart{Type: canonical.BlockText}}})
	ev := &canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "a token & <b> "}}}
	b.ReportAllocs()
	b.SetBytes(int64(len(ev.GetBlockDelta().GetText())))
	for b.Loop() {
		buf = e.Encode(buf[:0], ev)
	}
}
