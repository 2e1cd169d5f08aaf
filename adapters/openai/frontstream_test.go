package openai

import (
	"net/http/httptest"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// TestStreamWriterChunks: each kind of chunk, in each reasoning field
// mode, with include_usage, as testdata/writer/<mode>.sse holds it: a
// first chunk's delta of each kind from its template, the next from it
// again, text that is not valid UTF-8 with U+FFFD for the bad byte (not
// refused), a tool call's first chunk and two calls' argument fragments
// (distinct indexes), the finish and usage chunks and [DONE]. The
// goldens were written by the hand-assembled chunks this writer replaced.
func TestStreamWriterChunks(t *testing.T) {
	for _, mode := range []string{ReasoningContent, ReasoningPlain, ReasoningBoth} {
		t.Run(mode, func(t *testing.T) {
			rec := httptest.NewRecorder()
			sw, err := sse.NewWriter(rec)
			if err != nil {
				t.Fatal(err)
			}
			s := newStreamWriter(rec, sw, "gpt-<m>", mode, 1767225600, true)
			s.id = "chatcmpl-test"
			steps := []func() error{
				s.begin,
				func() error { return s.reasoning("Think \"twice\"") },
				func() error { return s.reasoning(", then") },
				func() error { return s.text("Hello") },
				func() error { return s.text(" w\xfferld <&>\n") },
				func() error { return s.toolStart(0, "call_a", "lookup") },
				func() error { return s.toolStart(1, "call_b", "") },
				func() error { return s.toolArgs(0, `{"q":`) },
				func() error { return s.toolArgs(1, `{}`) },
				func() error { return s.toolArgs(0, `"x"}`) },
				func() error {
					return s.finish("tool_calls", &canonical.Usage{InputTokens: 3, OutputTokens: 5, ReasoningTokens: 2})
				},
			}
			for i, step := range steps {
				if err := step(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			if err := sw.Flush(); err != nil {
				t.Fatal(err)
			}
			goldenFile(t, "writer/"+mode+".sse", rec.Body.Bytes())
			// Every delta kind has its template but reasoning written twice.
			for k, tm := range s.templates {
				if want := !(k == deltaReasoning && mode == ReasoningBoth); (tm != nil) != want {
					t.Errorf("delta kind %d: template %v, want %v", k, tm != nil, want)
				}
			}
		})
	}
}
