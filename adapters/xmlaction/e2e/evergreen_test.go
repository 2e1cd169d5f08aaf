package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
)

// evergreenSession runs one Evergreen session over gRPC (connect-go on
// h2c): it sends msgs, half-closes, and returns every message received
// and the final status (nil for OK).
func evergreenSession(t *testing.T, base string, msgs ...*ev.SessionMessage) ([]*ev.SessionMessage, error) {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer hc.CloseIdleConnections()
	c := evergreenv2connect.NewEvergreenServiceClient(hc, base, connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := c.StartSession(ctx)
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			break // the server ended the stream; Receive has the status
		}
	}
	_ = s.CloseRequest()
	var got []*ev.SessionMessage
	for {
		m, err := s.Receive()
		if errors.Is(err, io.EOF) {
			return got, s.CloseResponse()
		}
		if err != nil {
			_ = s.CloseResponse()
			return got, err
		}
		got = append(got, m)
	}
}

// egNode is one node as a client reassembles it: its fragments' data and
// child ids in seq order, whether its final fragment came, and the index
// of the message that completed it.
type egNode struct {
	data     []byte
	children []string
	frags    int
	final    bool
	finalMsg int
	nextSeq  int32
}

// evergreenNodes reassembles the server's fragments, checking that each
// node's fragments arrive in seq order and none follows the final one.
func evergreenNodes(t *testing.T, msgs []*ev.SessionMessage) map[string]*egNode {
	t.Helper()
	nodes := map[string]*egNode{}
	for i, m := range msgs {
		if len(m.GetActions()) > 0 {
			t.Errorf("message %d: the server sent an action", i)
		}
		for _, f := range m.GetNodeFragments() {
			n := nodes[f.GetId()]
			if n == nil {
				n = &egNode{}
				nodes[f.GetId()] = n
			}
			if n.final || f.GetSeq() != n.nextSeq {
				t.Fatalf("node %q: fragment seq %d (want %d, final %v)", f.GetId(), f.GetSeq(), n.nextSeq, n.final)
			}
			n.nextSeq++
			n.frags++
			n.data = append(n.data, f.GetChunkFragment().GetData()...)
			n.children = append(n.children, f.GetChildIds()...)
			if !f.GetContinued() {
				n.final, n.finalMsg = true, i
			}
		}
	}
	return nodes
}

// egToolEvent is one leaf of the tool_calls output.
type egToolEvent struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	Output    json.RawMessage `json:"output"`
	Error     json.RawMessage `json:"error"`
	msg       int             // the message that completed the leaf
}

// TestCortexEvergreen: an Evergreen client (connect-go, gRPC over h2c) runs
// GENERATE on cortex-example, routed with the XML action decoder on and its
// tools served by the separate service process, asking for the response,
// reasoning and tool_calls outputs. It sees the thoughts as reasoning,
// each of the five tools' call and activity in tool_calls (in the order
// the executor ran them: the fetches overlapping, the analyzer after them,
// the cache write started but not awaited), and the response streamed with
// $comprehensive_analysis replaced by the analyzer's output.
func TestCortexEvergreen(t *testing.T) {
	inst, nc := instance(t)
	done, err := nc.SubscribeSync(cacheDone)
	if err != nil {
		t.Fatal(err)
	}
	action := &ev.SessionMessage{Actions: []*ev.Action{{
		Name:       "GENERATE",
		TargetSpec: &ev.TargetSpec{Id: "cortex-example"},
		Inputs:     []*ev.NamedParameter{{Name: "prompt", Id: "p"}},
		Outputs: []*ev.NamedParameter{
			{Name: "response", Id: "r"}, {Name: "reasoning", Id: "th"}, {Name: "tool_calls", Id: "tc"},
		},
	}}}
	prompt := &ev.SessionMessage{NodeFragments: []*ev.NodeFragment{{
		Id: "p",
		ChunkFragment: &ev.Chunk{
			Metadata: &ev.ChunkMetadata{Mimetype: "text/plain", Role: "user"},
			Payload:  &ev.Chunk_Data{Data: []byte("Research the state of AI")},
		},
	}}}
	msgs, err := evergreenSession(t, inst.URL, action, prompt)
	if err != nil {
		t.Fatalf("session ended with %v", err)
	}
	nodes := evergreenNodes(t, msgs)
	for _, id := range []string{"r", "th", "tc"} {
		if n := nodes[id]; n == nil || !n.final {
			t.Fatalf("output %q incomplete", id)
		}
	}

	// The thoughts: the reasoning output's child leaves.
	var thoughts strings.Builder
	for _, c := range nodes["th"].children {
		thoughts.Write(nodes[c].data)
	}
	if th := thoughts.String(); !strings.Contains(th, "I'll research this topic by:") || !strings.Contains(th, "5. Generating a comprehensive report") {
		t.Errorf("reasoning:\n%s", th)
	}

	checkCortexTools(t, cortexTools(t, nodes), nodes["r"])

	// The response streamed (a fragment per delta) with the analysis in it.
	r := nodes["r"]
	if r.frags < 10 {
		t.Errorf("response in %d fragments: not streamed", r.frags)
	}
	text := string(r.data)
	if !strings.Contains(text, "## Overview\nBased on analysis of Wikipedia, recent research papers, and news articles:\n\n"+analysis+"\n\n## Key Trends") ||
		strings.Contains(text, "$comprehensive_analysis") || strings.Contains(text, "<response>") {
		t.Errorf("response text:\n%s", text)
	}
	if got := finishCache(t, nc, done); got != analysis {
		t.Errorf("cached value %q", got)
	}
}

// cortexTools reads the tool_calls output: one JSON leaf per tool event,
// in event order.
func cortexTools(t *testing.T, nodes map[string]*egNode) []egToolEvent {
	t.Helper()
	var tools []egToolEvent
	for _, c := range nodes["tc"].children {
		leaf := nodes[c]
		if leaf == nil || !leaf.final {
			t.Fatalf("tool_calls leaf %q incomplete", c)
		}
		var e egToolEvent
		if err := json.Unmarshal(leaf.data, &e); err != nil {
			t.Fatalf("tool_calls leaf %q: %v: %s", c, err, leaf.data)
		}
		e.msg = leaf.finalMsg
		tools = append(tools, e)
	}
	return tools
}

// checkCortexTools checks the order of the tool events: each tool called
// and started, the fetches overlapping, the analyzer after them on their
// results, and the cache write started with the analysis but not awaited.
func checkCortexTools(t *testing.T, tools []egToolEvent, response *egNode) {
	t.Helper()
	at := func(typ, id string) int {
		return slices.IndexFunc(tools, func(e egToolEvent) bool { return e.Type == typ && e.ID == id })
	}
	for _, c := range []struct{ id, name string }{
		{"wiki", "web_scraper"}, {"arxiv", "arxiv_search"}, {"news", "news_api"},
		{"analyze", "comprehensive_analyzer"}, {"cache", "results_cache"},
	} {
		call, started := at("tool_call", c.id), at("tool_started", c.id)
		if call < 0 || tools[call].Name != c.name || !json.Valid([]byte(tools[call].Arguments)) ||
			!strings.Contains(tools[call].Arguments, `"name": "`+c.name+`"`) {
			t.Errorf("no tool_call for %s (%s): %+v", c.id, c.name, tools)
		}
		if started < call || tools[started].Name != c.name {
			t.Errorf("%s: tool_started at %d, its call at %d", c.id, started, call)
		}
	}
	// The fetches overlapped, and the analyzer ran after them on their results.
	firstFinish, lastFinish := len(tools), -1
	for _, id := range []string{"wiki", "arxiv", "news"} {
		f := at("tool_finished", id)
		if f < 0 {
			t.Fatalf("fetch %s has no result: %+v", id, tools)
		}
		firstFinish, lastFinish = min(firstFinish, f), max(lastFinish, f)
		if s := at("tool_started", id); s > firstFinish {
			t.Errorf("fetch %s started at %d, after a fetch finished at %d", id, s, firstFinish)
		}
	}
	if s := at("tool_started", "analyze"); s < lastFinish || !strings.Contains(string(tools[s].Input), `"Artificial intelligence"`) {
		t.Errorf("analyze started at %d (last fetch result at %d) with %s", s, lastFinish, tools[max(s, 0)].Input)
	}
	var result string
	if f := at("tool_finished", "analyze"); f < 0 || json.Unmarshal(tools[f].Output, &result) != nil || result != analysis {
		t.Fatalf("analyze result: %+v", tools)
	}
	// The cache write started with the analysis; the response completed
	// and the session ended while it was held: its result is not in the
	// run (it is checked below, once released).
	cs := at("tool_started", "cache")
	var cacheIn struct{ Value string }
	if cs < 0 || json.Unmarshal(tools[cs].Input, &cacheIn) != nil || cacheIn.Value != analysis {
		t.Fatalf("cache write input: %+v", tools)
	}
	if at("tool_finished", "cache") >= 0 || at("tool_failed", "cache") >= 0 {
		t.Fatalf("the run waited for the cache write: %+v", tools)
	}
	if response.finalMsg < tools[cs].msg {
		t.Errorf("the response completed (message %d) before the cache write started (message %d)", response.finalMsg, tools[cs].msg)
	}
}
