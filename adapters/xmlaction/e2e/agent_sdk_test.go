package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/conformance/clients/agent/sdksuite"
)

// nodeSuite and runIn drive the Node SDK suite (conformance/clients/agent).
var (
	nodeSuite = func(t *testing.T) string { return sdksuite.Dir(t) }
	runIn     = sdksuite.Run
)

// cortexSummary is what conformance/clients/agent/test/cortex.test.mjs
// writes: the run's root tool events, block finishes, response deltas and
// terminal event in seq order (as received over the agent protocol), the
// finished blocks' text, and the SDK's projections (thread.messages,
// thread.toolCalls).
type cortexSummary struct {
	Transport string          `json:"transport"`
	Timeline  []timelineEntry `json:"timeline"`
	Reasoning string          `json:"reasoning"`
	Response  string          `json:"response"`
	Calls     []struct {
		ID   string         `json:"id"`
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	} `json:"calls"`
	Terminal []string `json:"terminal"`
	SDK      struct {
		Messages []struct {
			Text      string `json:"text"`
			Reasoning string `json:"reasoning"`
			ToolCalls []struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"toolCalls"`
		} `json:"messages"`
		ToolCalls []struct {
			CallID  string          `json:"callId"`
			Name    string          `json:"name"`
			Input   map[string]any  `json:"input"`
			Output  json.RawMessage `json:"output"`
			Error   string          `json:"error"`
			Pending bool            `json:"pending"`
		} `json:"toolCalls"`
	} `json:"sdk"`
}

// timelineEntry is one root event of the summary's timeline.
type timelineEntry struct {
	Seq     int             `json:"seq"`
	Event   string          `json:"event"` // tool-started, tool-finished, tool-error, block-finish <type>, text-delta, lifecycle <status>
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Output  json.RawMessage `json:"output"`
	Message string          `json:"message"`
}

// at is the timeline index of the first entry with this event and id, or -1.
func (s *cortexSummary) at(event, id string) int {
	return slices.IndexFunc(s.Timeline, func(e timelineEntry) bool {
		return e.Event == event && e.ID == id
	})
}

// TestCortexAgentSDK is issue 6's agent-protocol test: the Cortex complete
// example, streamed by cortex-example through the XML decoder and executor
// (tools in the separate service process), reaches the agent-protocol
// frontend, where @langchain/langgraph-sdk 1.15.0's ThreadStream (over SSE
// and over WebSocket) sees, in seq order: the three fetches overlap, the
// analyzer starts after all three, the cache write never delays the
// response, and $comprehensive_analysis in the response is the analyzer's
// output. The order is made deterministic by the service (the fetch
// barrier; the cache write held until released), not by timing. The
// payloads the SDK received are then type-checked against
// @langchain/protocol with tsc --strict.
func TestCortexAgentSDK(t *testing.T) {
	dir := nodeSuite(t)
	capture := t.TempDir()
	for _, transport := range []string{"sse", "websocket"} {
		t.Run(transport, func(t *testing.T) {
			inst, nc := instance(t)
			done, err := nc.SubscribeSync(cacheDone)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "cortex.json")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", "--test", "test/cortex.test.mjs")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(),
				"INTERLINGUA_URL="+inst.URL,
				"INTERLINGUA_CORTEX=1",
				"INTERLINGUA_CORTEX_TRANSPORT="+transport,
				"INTERLINGUA_CORTEX_OUT="+file,
				"CAPTURE_DIR="+capture,
			)
			out, nodeErr := cmd.CombinedOutput()
			raw, err := os.ReadFile(file)
			if nodeErr != nil || !strings.Contains(string(out), "# pass 1") || !strings.Contains(string(out), "# skipped 0") {
				t.Fatalf("the Node test did not run and pass (%v):\n%s\nsummary (%v):\n%s", nodeErr, out, err, raw)
			}
			if err != nil {
				t.Fatalf("no summary from the Node test: %v\n%s", err, out)
			}
			var s cortexSummary
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			checkCortexSummary(t, &s, string(raw))
			// The run ended with the cache write still held: now it may
			// finish, and it stored the analysis.
			if got := finishCache(t, nc, done); got != analysis {
				t.Errorf("cached value %q", got)
			}
		})
	}
	// Every payload both runs received matches @langchain/protocol.
	typecheckCapture(t, dir, capture)
}

// checkCortexSummary asserts the order and content one SDK client saw.
func checkCortexSummary(t *testing.T, s *cortexSummary, raw string) {
	t.Helper()
	if !slices.Equal(s.Terminal, []string{"completed"}) {
		t.Fatalf("terminal %v, want [completed]\n%s", s.Terminal, raw)
	}
	// The three fetches overlapped: all started before any finished.
	fetches := []string{"wiki", "arxiv", "news"}
	firstFinish, lastFinish := len(s.Timeline), -1
	for _, id := range fetches {
		f := s.at("tool-finished", id)
		if f < 0 {
			t.Fatalf("fetch %s did not finish:\n%s", id, raw)
		}
		firstFinish, lastFinish = min(firstFinish, f), max(lastFinish, f)
	}
	for _, id := range fetches {
		if st := s.at("tool-started", id); st < 0 || st > firstFinish {
			t.Errorf("fetch %s started at %d, after a fetch finished at %d", id, st, firstFinish)
		}
	}
	// The analyzer started after all three, with their results, and
	// produced the analysis.
	st := s.at("tool-started", "analyze")
	if st < lastFinish {
		t.Errorf("analyze started at %d, before the last fetch finished at %d", st, lastFinish)
	}
	if st >= 0 && !strings.Contains(string(s.Timeline[st].Input), `"Artificial intelligence"`) {
		t.Errorf("analyze input lacks the scraper's result: %s", s.Timeline[st].Input)
	}
	f := s.at("tool-finished", "analyze")
	var got string
	if f < 0 || json.Unmarshal(s.Timeline[f].Output, &got) != nil || got != analysis {
		t.Fatalf("analyze result:\n%s", raw)
	}
	// The cache write started with the analysis, and the response streamed
	// and the run completed while it was still held.
	c := s.at("tool-started", "cache")
	var cacheIn struct{ Value string }
	if c < 0 || json.Unmarshal(s.Timeline[c].Input, &cacheIn) != nil || cacheIn.Value != analysis {
		t.Fatalf("the cache write did not start with the analysis:\n%s", raw)
	}
	if s.at("tool-finished", "cache") >= 0 || s.at("tool-error", "cache") >= 0 {
		t.Fatalf("the run waited for the cache write:\n%s", raw)
	}
	textFinish := s.at("block-finish text", "")
	if textFinish < c || s.Timeline[len(s.Timeline)-1].Event != "lifecycle completed" {
		t.Errorf("the response did not finish after the cache write started and before the run completed:\n%s", raw)
	}
	// The response carries the analyzer's output in place of the reference.
	if !strings.Contains(s.Response, "## Overview\nBased on analysis of Wikipedia, recent research papers, and news articles:\n\n"+analysis+"\n\n## Key Trends") ||
		strings.Contains(s.Response, "$comprehensive_analysis") {
		t.Errorf("response text:\n%s", s.Response)
	}
	// The thoughts arrived as reasoning.
	if !strings.Contains(s.Reasoning, "I'll research this topic by:") || !strings.Contains(s.Reasoning, "5. Generating a comprehensive report") {
		t.Errorf("reasoning:\n%s", s.Reasoning)
	}
	// The tool calls as the model wrote them, as tool_call blocks.
	var calls []string
	for _, c := range s.Calls {
		calls = append(calls, c.ID+" "+c.Name)
	}
	wantCalls := []string{"wiki web_scraper", "arxiv arxiv_search", "news news_api", "analyze comprehensive_analyzer", "cache results_cache"}
	if !slices.Equal(calls, wantCalls) {
		t.Errorf("tool_call blocks %q, want %q", calls, wantCalls)
	}
	// The SDK's projections agree: one AI message with the thoughts, the
	// five calls and the response; five tool calls, four with outputs and
	// the cache write still pending when the run ended.
	if len(s.SDK.Messages) != 1 {
		t.Fatalf("SDK messages: %d, want 1\n%s", len(s.SDK.Messages), raw)
	}
	m := s.SDK.Messages[0]
	if m.Text != s.Response || m.Reasoning != s.Reasoning || len(m.ToolCalls) != 5 {
		t.Errorf("SDK message: text equal %v, reasoning equal %v, %d tool calls\n%s", m.Text == s.Response, m.Reasoning == s.Reasoning, len(m.ToolCalls), raw)
	}
	var tools []string
	for _, tc := range s.SDK.ToolCalls {
		state := "output"
		switch {
		case tc.Pending:
			state = "pending"
		case tc.Error != "":
			state = "error " + tc.Error
		}
		tools = append(tools, tc.CallID+" "+tc.Name+" "+state)
	}
	wantTools := []string{"wiki web_scraper output", "arxiv arxiv_search output", "news news_api output", "analyze comprehensive_analyzer output", "cache results_cache pending"}
	if !slices.Equal(tools, wantTools) {
		t.Errorf("SDK toolCalls %q, want %q", tools, wantTools)
	}
	for _, tc := range s.SDK.ToolCalls {
		if tc.CallID == "analyze" && string(tc.Output) != `"`+analysis+`"` {
			t.Errorf("SDK analyze output %s", tc.Output)
		}
	}
}

// typecheckCapture checks the captured payloads against @langchain/protocol
// with tsc --strict, as adapters/agent TestSDK does.
func typecheckCapture(t *testing.T, dir, capture string) {
	t.Helper()
	if files, _ := filepath.Glob(filepath.Join(capture, "capture-*.jsonl")); len(files) == 0 {
		t.Fatalf("the Node test captured no payloads in %s", capture)
	}
	out := t.TempDir()
	runIn(t, dir, time.Minute, nil, "node", "typecheck/generate.mjs", capture, out)
	res := runIn(t, dir, 2*time.Minute, nil, filepath.Join(dir, "node_modules", ".bin", "tsc"), "--strict", "--noEmit", "-p", out)
	if strings.TrimSpace(res) != "" {
		t.Logf("tsc: %s", res)
	}
}
