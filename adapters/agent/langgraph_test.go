package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// langGraphDir is the LangGraph peer: @langchain/langgraph-api 1.5.1's
// startServer serving the scripted graphs of graphs.mjs.
const langGraphDir = "../../conformance/peers/langgraph"

// firstLine is the server's stdout: it hands the first line (the
// "listening <url>" line) to line and discards the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	line chan string
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.line == nil {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.line <- string(w.buf[:i])
		w.line, w.buf = nil, nil
	} else if len(w.buf) > 4<<10 {
		w.line <- string(w.buf)
		w.line, w.buf = nil, nil
	}
	return len(p), nil
}

// startLangGraph starts the LangGraph peer on a free port (it picks one
// and names it) with its state in a temporary folder, and returns its
// URL; the test's cleanup ends it. The test is skipped when the peer's
// node_modules are not installed (make node-deps installs them).
func startLangGraph(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(langGraphDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-api", "package.json")); err != nil {
		t.Skip("conformance/peers/langgraph/node_modules is not installed (make node-deps)")
	}
	cmd := exec.Command("node", "server.mjs", t.TempDir())
	cmd.Dir = dir
	for _, kv := range os.Environ() { // no LangSmith key or tracing reaches it
		if !strings.HasPrefix(kv, "LANGSMITH_") && !strings.HasPrefix(kv, "LANGCHAIN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LOG_LEVEL=error")
	line := make(chan string, 1)
	out := &firstLine{line: line}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close() // the server exits when its stdin ends
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case line := <-line:
		url, ok := strings.CutPrefix(line, "listening ")
		if !ok {
			t.Fatalf("the LangGraph server said %q", line)
		}
		return url
	case err := <-exited:
		exited <- err
		t.Fatalf("the LangGraph server exited: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the LangGraph server did not start in 60 s\n%s", stderr.String())
	}
	return ""
}

// newUUID is a random UUID (version 4): LangGraph's REST routes take
// only UUID thread ids.
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// lgRequest is a run of graph on a new thread (a UUID, or thread).
func lgRequest(thread, graph string) *canonical.Request {
	if thread == "" {
		thread = newUUID()
	}
	return &canonical.Request{RunId: "run-" + thread, ThreadId: thread, Target: graph,
		Inputs: []*canonical.NamedNode{{Name: "messages", Node: canonical.TextNode("user", "What is 6 * 7?")}}}
}

// block is one canonical content block as a client assembles it.
type block struct {
	Type canonical.BlockType
	ID   string
	Name string
	Text string
}

// blocks assembles the run's content blocks in order, per namespace.
func blocks(events []*canonical.Event) []block {
	var out []block
	open := map[string]int{} // namespace -> index in out of its open block
	for _, e := range events {
		ns := strings.Join(e.GetNamespace(), "/")
		switch {
		case e.GetBlockStart() != nil:
			bs := e.GetBlockStart()
			open[ns] = len(out)
			out = append(out, block{Type: bs.GetType(), ID: bs.GetId(), Name: bs.GetName()})
		case e.GetBlockDelta() != nil:
			out[open[ns]].Text += e.GetBlockDelta().GetText()
		}
	}
	return out
}

// rootLifecycle is the statuses of the run's root lifecycle events.
func rootLifecycle(events []*canonical.Event) []canonical.RunStatus {
	var out []canonical.RunStatus
	for _, e := range events {
		if lc := e.GetLifecycle(); lc != nil && len(e.GetNamespace()) == 0 {
			out = append(out, lc.GetStatus())
		}
	}
	return out
}

// updates is the nodes and values of the run's state updates.
func updates(t *testing.T, events []*canonical.Event) (nodes []string, values []string) {
	t.Helper()
	for _, e := range events {
		if u := e.GetStateUpdate(); u != nil {
			b, err := u.GetValues().MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			nodes, values = append(nodes, u.GetNode()), append(values, string(b))
		}
	}
	return nodes, values
}

// TestLangGraphBackend drives the agent backend, over SSE and over a
// WebSocket, against a real LangGraph server (@langchain/langgraph-api
// 1.5.1) and checks the canonical events of each graph of the issue: the
// ReAct graph's interleaved blocks (LangGraph finishes the text block
// after the tool-call block starts) carry each block's content once, in
// order; the root running lifecycle (seq 1, which LangGraph's
// applied_through_seq counts) is there; updates keep LangGraph's payload
// and node; a failure carries LangGraph's error text as it sent it; an
// interrupt's payload comes, and the resume completes over a new
// connection (LangGraph forgot the thread's assistant when the run's
// WebSocket closed); a run the client leaves is cancelled upstream on a
// thread the bridge named after the run (not a UUID).
func TestLangGraphBackend(t *testing.T) {
	url := startLangGraph(t)
	for _, transport := range []string{"sse", "websocket"} {
		b := newBackend(t, url, transport)
		t.Run(transport+"/react", func(t *testing.T) { lgReact(t, b) })
		t.Run(transport+"/failing", func(t *testing.T) { lgFailing(t, b) })
		t.Run(transport+"/approval", func(t *testing.T) { lgApproval(t, b) })
		t.Run(transport+"/cancel", func(t *testing.T) { lgCancel(t, b, url) })
	}
}

func lgReact(t *testing.T, b *agent.Backend) {
	events := collect(t, b, lgRequest("", "react"))
	want := []block{
		{Type: canonical.BlockText, Text: "Let me multiply."},
		{Type: canonical.BlockToolCall, ID: "call_1", Name: "multiply", Text: `{"a":6,"b":7}`},
		{Type: canonical.BlockText, Text: "The answer is 42."},
	}
	if got := blocks(events); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("blocks:\n got %v\nwant %v", got, want)
	}
	if got := rootLifecycle(events); fmt.Sprint(got) != fmt.Sprint([]canonical.RunStatus{canonical.StatusRunning, canonical.StatusCompleted}) {
		t.Errorf("root lifecycle %v, want running then completed", got)
	}
	var tools []string
	for _, e := range events {
		switch {
		case e.GetToolStarted() != nil:
			tools = append(tools, "started "+e.GetToolStarted().GetToolCallId()+" "+e.GetToolStarted().GetName())
		case e.GetToolFinished() != nil:
			tools = append(tools, "finished "+e.GetToolFinished().GetToolCallId())
		}
	}
	if fmt.Sprint(tools) != "[started call_1 multiply finished call_1]" {
		t.Errorf("tool events %v", tools)
	}
	nodes, values := updates(t, events)
	if fmt.Sprint(nodes) != "[model tools model]" {
		t.Errorf("update nodes %v, want [model tools model]", nodes)
	}
	for i, v := range values {
		if !strings.HasPrefix(v, `{"messages":[`) {
			t.Errorf("update %d is not LangGraph's payload: %.120s", i, v)
		}
	}
	if len(values) == 3 && !strings.Contains(values[2], `"The answer is 42."`) {
		t.Errorf("the last update lacks the answer: %.300s", values[2])
	}
}

func lgFailing(t *testing.T, b *agent.Backend) {
	events := collect(t, b, lgRequest("", "failing"))
	text, st, code, msg := outcome(t, events)
	const upstream = `{"error":"Error","message":"scripted model failure after 2 tokens"}`
	if st != canonical.StatusFailed || code != canonical.CodeUnknown || msg != upstream || text != "Partial answer" {
		t.Errorf("ended %v %v %q after %q; want failed, unknown, LangGraph's %q after %q", st, code, msg, text, upstream, "Partial answer")
	}
	if got := rootLifecycle(events); got[0] != canonical.StatusRunning {
		t.Errorf("root lifecycle %v, want running first", got)
	}
}

func lgApproval(t *testing.T, b *agent.Backend) {
	req := lgRequest("", "approval")
	events := collect(t, b, req)
	var id string
	var payload []byte
	for _, e := range events {
		if ir := e.GetInputRequested(); ir != nil {
			id = ir.GetInterruptId()
			payload, _ = ir.GetPayload().MarshalJSON()
		}
	}
	if _, st, _, _ := outcome(t, events); st != canonical.StatusInterrupted || id == "" || !bytes.Contains(payload, []byte(`"Approve the transfer?"`)) {
		t.Fatalf("ended %v with interrupt %q %s", st, id, payload)
	}
	resume := lgRequest(req.GetThreadId(), "approval")
	resume.RunId += "-resume"
	resume.Inputs = nil
	answer, _ := structpb.NewValue(map[string]any{"approved": true})
	resume.Resume = map[string]*structpb.Value{id: answer}
	events = collect(t, b, resume)
	if _, st, code, msg := outcome(t, events); st != canonical.StatusCompleted {
		t.Fatalf("the resumed run ended %v %v %q", st, code, msg)
	}
	nodes, values := updates(t, events)
	if fmt.Sprint(nodes) != "[ask]" || !strings.Contains(values[0], `You said: {\"approved\":true}`) {
		t.Errorf("resumed run's updates %v %v", nodes, values)
	}
}

// lgCancel starts the slow graph on a thread named after the run, as the
// bridge names a thread the client gave none, reads a few tokens, and
// leaves: LangGraph's run must stop (its status is no longer running).
func lgCancel(t *testing.T, b *agent.Backend, url string) {
	req := lgRequest("", "slow")
	req.ThreadId = "" // the backend names the thread after the run
	req.RunId = "run-" + newUUID()[:8]
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := b.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for deltas := 0; deltas < 3; {
		ev, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetBlockDelta() != nil {
			deltas++
		}
	}
	st.Close()
	thread := agent.UpstreamThread(req.GetRunId())
	deadline := time.Now().Add(wait)
	for {
		status := lgRunStatus(t, url, thread)
		if status != "running" && status != "pending" {
			if status != "interrupted" {
				t.Errorf("the cancelled LangGraph run's status is %q, want interrupted", status)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the LangGraph run is still %s %v after the client left", status, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lgRunStatus is the status of the thread's only run on LangGraph.
func lgRunStatus(t *testing.T, url, thread string) string {
	t.Helper()
	resp, err := http.Get(url + "/threads/" + thread + "/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var runs []struct {
		Status string `json:"status"`
	}
	if err := json.UnmarshalRead(resp.Body, &runs); err != nil || len(runs) != 1 {
		t.Fatalf("GET /threads/%s/runs: %d runs, %v (HTTP %d)", thread, len(runs), err, resp.StatusCode)
	}
	return runs[0].Status
}
