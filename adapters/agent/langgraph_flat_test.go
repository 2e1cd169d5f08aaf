package agent_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// TestLangGraphFlatClients (issue 30 #6): clients of the protocols
// without namespaces (Triton generate_stream, Glide chatStream, the XML
// action stream) in front of a real LangGraph agent (the agent backend,
// over SSE) get its answer: LangGraph streams each node's model call in a
// namespace ["model:<task id>"] and runs tools in ["tools:<task id>"],
// which canonical.AnswerStream renders on the root. The react graph's
// text (both messages, in order), its tool call and result as far as each
// wire carries them; the approval graph's interrupt with its payload;
// the failing graph's error as LangGraph wrote it; the nested graph's
// subgraph messages (two deep) are not the answer, as in LangGraph's
// messages stream mode without subgraphs.
func TestLangGraphFlatClients(t *testing.T) {
	lg := startLangGraph(t)
	url := fronted(t, lg, "sse", "nested")
	t.Run("triton/react", func(t *testing.T) {
		got := tritonStream(t, url, "react")
		if got.text != "Let me multiply.The answer is 42." {
			t.Errorf("text_output %q", got.text)
		}
		want := `call_1 multiply {"a":6,"b":7}`
		if len(got.calls) != 1 || got.calls[0] != want {
			t.Errorf("tool calls %q, want [%s]", got.calls, want)
		}
		if len(got.results) != 1 || !strings.HasPrefix(got.results[0], "call_1 ") || !strings.Contains(got.results[0], `"content":"42"`) {
			t.Errorf("tool results %q", got.results)
		}
	})
	t.Run("triton/react/aggregated", func(t *testing.T) {
		resp := post(t, url+"/v2/models/react/generate", `{"text_input":"What is 6 * 7?"}`)
		defer resp.Body.Close()
		var r struct {
			Text  string `json:"text_output"`
			Calls string `json:"tool_calls"`
		}
		if err := json.UnmarshalRead(resp.Body, &r); err != nil {
			t.Fatal(err)
		}
		var calls []struct {
			ID        string     `json:"id"`
			Name      string     `json:"name"`
			Arguments string     `json:"arguments"`
			Result    json.Value `json:"result"`
		}
		if err := json.Unmarshal([]byte(r.Calls), &calls); err != nil || len(calls) != 1 {
			t.Fatalf("tool_calls %s: %v", r.Calls, err)
		}
		c := calls[0]
		if r.Text != "Let me multiply.The answer is 42." || c.ID != "call_1" || c.Name != "multiply" || c.Arguments != `{"a":6,"b":7}` || !bytes.Contains(c.Result, []byte(`"content":"42"`)) {
			t.Errorf("text_output %q, tool_calls %s", r.Text, r.Calls)
		}
	})
	t.Run("triton/approval", func(t *testing.T) {
		got := tritonStream(t, url, "approval")
		if got.interruptID == "" || !jsonEqual(json.Value(got.interrupt), json.Value(`{"question":"Approve the transfer?"}`)) || got.err != "" {
			t.Errorf("interrupt %q %s, error %q", got.interruptID, got.interrupt, got.err)
		}
	})
	t.Run("triton/failing", func(t *testing.T) {
		got := tritonStream(t, url, "failing")
		if got.text != "Partial answer" || !strings.Contains(got.err, "scripted model failure after 2 tokens") {
			t.Errorf("text %q, error %q", got.text, got.err)
		}
	})
	t.Run("triton/nested", func(t *testing.T) {
		got := tritonStream(t, url, "nested")
		if got.text != "" || got.err != "" {
			t.Errorf("text %q, error %q: a subgraph's own messages are not the answer", got.text, got.err)
		}
	})
	t.Run("glide/react", func(t *testing.T) {
		text, reason, errMsg := glideChat(t, url, "react")
		if text != "Let me multiply.The answer is 42." || reason != "complete" || errMsg != "" {
			t.Errorf("text %q, finish_reason %q, error %q", text, reason, errMsg)
		}
	})
	t.Run("glide/approval", func(t *testing.T) {
		_, _, errMsg := glideChat(t, url, "approval")
		if !strings.Contains(errMsg, "run interrupted waiting for input") || !strings.Contains(errMsg, `: {"question":"Approve the transfer?"}`) {
			t.Errorf("error %q, want the interrupt and its payload", errMsg)
		}
	})
	t.Run("xml/react", func(t *testing.T) {
		body := xmlStream(t, url, "react")
		for _, want := range []string{"<response>Let me multiply.</response>\n<action", `"name":"multiply"`, `"parameters":{"a":6,"b":7}`,
			`<observation id="call_1" status="ok">{`, "<response>The answer is 42.</response>\n"} {
			if !strings.Contains(body, want) {
				t.Errorf("the XML stream lacks %q:\n%s", want, body)
			}
		}
	})
	t.Run("xml/approval", func(t *testing.T) {
		body := xmlStream(t, url, "approval")
		if !strings.Contains(body, `<interrupt id=`) || !strings.Contains(body, `>{"question":"Approve the transfer?"}</interrupt>`) {
			t.Errorf("the XML stream lacks the interrupt:\n%s", body)
		}
	})
}

// tritonResult is what a Triton generate_stream client read.
type tritonResult struct {
	text             string
	calls, results   []string // "id name arguments", "id result"
	interruptID, err string
	interrupt        string
}

// tritonStream reads a generate_stream of target at url, a response per
// delta (stream true).
func tritonStream(t *testing.T, url, target string) tritonResult {
	t.Helper()
	resp := post(t, url+"/v2/models/"+target+"/generate_stream", `{"text_input":"What is 6 * 7?","stream":true}`)
	defer resp.Body.Close()
	var r tritonResult
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		r.text += str("text_output")
		switch {
		case str("error") != "":
			r.err = str("error")
		case str("tool_call_arguments") != "":
			r.calls = append(r.calls, str("tool_call_id")+" "+str("tool_call_name")+" "+str("tool_call_arguments"))
		case str("tool_call_result") != "":
			r.results = append(r.results, str("tool_call_id")+" "+str("tool_call_result"))
		case str("interrupt_id") != "":
			r.interruptID, r.interrupt = str("interrupt_id"), str("interrupt")
		}
	}
	return r
}

// glideChat sends one chatStream request to router at url and reads its
// frames to the terminal one.
func glideChat(t *testing.T, url, router string) (text, reason, errMsg string) {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(url, "http")+"/v1/language/"+router+"/chatStream", nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer c.Close()
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"id":"q1","message":{"role":"user","content":"What is 6 * 7?"}}`)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	for {
		_, frame, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v (text so far %q)", err, text)
		}
		var f struct {
			Chunk *struct {
				ModelResponse struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"model_response"`
				FinishReason *string `json:"finish_reason"`
			} `json:"chunk"`
			Error *struct {
				Message      string  `json:"message"`
				FinishReason *string `json:"finish_reason"`
			} `json:"error"`
		}
		if err := json.Unmarshal(frame, &f); err != nil {
			t.Fatalf("%s: %v", frame, err)
		}
		switch {
		case f.Chunk != nil:
			text += f.Chunk.ModelResponse.Message.Content
			if f.Chunk.FinishReason != nil {
				return text, *f.Chunk.FinishReason, ""
			}
		case f.Error != nil && f.Error.FinishReason != nil:
			return text, *f.Error.FinishReason, f.Error.Message
		}
	}
}

// xmlStream reads the XML action stream of target at url.
func xmlStream(t *testing.T, url, target string) string {
	t.Helper()
	resp := post(t, url+"/v1/xml/stream", fmt.Sprintf(`{"target":%q,"input":"What is 6 * 7?"}`, target))
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return resp
}

// TestLangGraphGatewayClients (issue 30 #6): the OpenAI Chat Completions,
// Anthropic Messages and OpenAI Responses frontends, in front of the real
// LangGraph react agent through the agent backend, answer with what the
// graph's nodes said (canonical.AnswerStream's view, as Triton's): both
// messages' text in order; the tool call, which the graph ran itself (the
// client declared no tool), is Anthropic's server_tool_use and on the two
// OpenAI wires, which have no server-run call, is not sent.
func TestLangGraphGatewayClients(t *testing.T) {
	lg := startLangGraph(t)
	url := fronted(t, lg, "sse")
	const ask = `"What is 6 * 7?"`
	t.Run("openai", func(t *testing.T) {
		var got struct {
			Choices []struct {
				Message struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		decodeBody(t, post(t, url+"/v1/chat/completions", `{"model":"react","messages":[{"role":"user","content":`+ask+`}]}`), &got)
		if len(got.Choices) != 1 {
			t.Fatalf("choices %+v", got.Choices)
		}
		m := got.Choices[0].Message
		if m.Content != "Let me multiply.The answer is 42." || len(m.ToolCalls) != 0 {
			t.Errorf("message %+v", m)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		var got struct {
			Content []struct {
				Type  string     `json:"type"`
				Text  string     `json:"text"`
				ID    string     `json:"id"`
				Name  string     `json:"name"`
				Input json.Value `json:"input"`
			} `json:"content"`
		}
		decodeBody(t, post(t, url+"/v1/messages", `{"model":"react","max_tokens":100,"messages":[{"role":"user","content":`+ask+`}]}`), &got)
		var blocks []string
		for _, b := range got.Content {
			blocks = append(blocks, b.Type+" "+b.Text+b.ID+" "+b.Name+" "+string(b.Input))
		}
		want := []string{"text Let me multiply.  ", `server_tool_use call_1 multiply {"a":6,"b":7}`, "text The answer is 42.  "}
		if fmt.Sprint(blocks) != fmt.Sprint(want) {
			t.Errorf("content %q, want %q", blocks, want)
		}
	})
	t.Run("responses", func(t *testing.T) {
		var got struct {
			Output []struct {
				Type    string `json:"type"`
				CallID  string `json:"call_id"`
				Name    string `json:"name"`
				Args    string `json:"arguments"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		decodeBody(t, post(t, url+"/v1/responses", `{"model":"react","input":`+ask+`,"store":false}`), &got)
		var items []string
		for _, o := range got.Output {
			s := o.Type + " " + o.CallID + o.Name + o.Args
			for _, c := range o.Content {
				s += c.Text
			}
			items = append(items, s)
		}
		want := []string{"message Let me multiply.", "message The answer is 42."}
		if fmt.Sprint(items) != fmt.Sprint(want) {
			t.Errorf("output %q, want %q", items, want)
		}
	})
}

// decodeBody decodes resp's JSON body into v and closes it.
func decodeBody(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.UnmarshalRead(resp.Body, v); err != nil {
		t.Fatal(err)
	}
}

// TestLangGraphEvergreenClient (issue 30 #6): an Evergreen client (the
// protocol's own client over h2c gRPC) in front of the real LangGraph
// react agent gets both messages' text, in order, and the tool call; the
// nested graph's subgraph messages are not its answer (as for the other
// flat clients: canonical.AnswerStream).
func TestLangGraphEvergreenClient(t *testing.T) {
	lg := startLangGraph(t)
	url := fronted(t, lg, "sse", "nested")
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	cl, err := protocols.Get("evergreen").Client(protocol.ClientConfig{Base: url, Target: "react", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := cl.(io.Closer); ok {
		defer c.Close()
	}
	req := &canonical.Request{Target: "react", Inputs: []*canonical.NamedNode{{Name: canonical.InputPrompt, Node: canonical.TextNode("user", "What is 6 * 7?")}}}
	// Evergreen's response is one text leaf (the messages' text joined,
	// in order) and the tool call after it, as its client reassembles
	// them.
	want := []block{
		{Type: canonical.BlockText, Text: "Let me multiply.The answer is 42."},
		{Type: canonical.BlockToolCall, ID: "call_1", Name: "multiply", Text: `{"a":6,"b":7}`},
	}
	if got := blocks(collect(t, cl, req)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("blocks:\n got %v\nwant %v", got, want)
	}
	req.Target = "nested"
	if got := blocks(collect(t, cl, req)); len(got) != 0 {
		t.Errorf("nested graph's blocks %v, want none", got)
	}
}

// TestLangGraphNativeClient (issue 30): a native client (the canonical
// wire, which carries namespaces) in front of the real LangGraph react
// agent sees the blocks the agent backend reads from LangGraph, in the
// graph nodes' namespaces, as TestLangGraphBackend's react scenario does
// without a frontend; and the nested graph's subgraph text (a native
// client is not flat: it gets every namespace).
func TestLangGraphNativeClient(t *testing.T) {
	lg := startLangGraph(t)
	url := fronted(t, lg, "sse", "nested")
	cl, err := protocols.Get("native").Client(protocol.ClientConfig{Base: url, Target: "react", HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	req := &canonical.Request{Target: "react", Inputs: []*canonical.NamedNode{{Name: canonical.InputPrompt, Node: canonical.TextNode("user", "What is 6 * 7?")}}}
	events := collect(t, cl, req)
	want := []block{
		{Type: canonical.BlockText, Text: "Let me multiply."},
		{Type: canonical.BlockToolCall, ID: "call_1", Name: "multiply", Text: `{"a":6,"b":7}`},
		{Type: canonical.BlockText, Text: "The answer is 42."},
	}
	if got := blocks(events); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("blocks:\n got %v\nwant %v", got, want)
	}
	nsSeen := false
	for _, e := range events {
		if ns := e.GetNamespace(); len(ns) == 1 && strings.HasPrefix(ns[0], "model:") && e.GetBlockDelta() != nil {
			nsSeen = true
		}
	}
	if !nsSeen {
		t.Error(`no delta in a ["model:<task id>"] namespace: the native wire lost LangGraph's namespaces`)
	}
	req.Target = "nested"
	if got := blocks(collect(t, cl, req)); len(got) != 1 || got[0].Text != "From the subgraph." {
		t.Errorf("nested graph's blocks %v, want the subgraph's text", got)
	}
}
