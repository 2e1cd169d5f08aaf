package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// instance starts a whole Interlingua with the XML routes, its embedded
// nats-server listening on loopback, and the tool service process.
func instance(t *testing.T) (*bridgetest.Instance, *nats.Conn) {
	t.Helper()
	cfg := bridge.DefaultConfig()
	cfg.NATS.EmbeddedListen = "127.0.0.1:0"
	cfg.Routes = append(cfg.Routes,
		bridge.Route{Target: "cortex-example", Backend: "scripted", XML: true},
		bridge.Route{Target: "xml-echo", Backend: "scripted", Model: "echo", XML: true},
	)
	cfg.Tools.Allow = []string{
		"web_scraper", "arxiv_search", "news_api", "comprehensive_analyzer", "results_cache",
		"failing_tool", "calculator", "echo",
	}
	inst := bridgetest.Start(t, &cfg)
	url := inst.Fabric().Conn().ConnectedUrl()
	if !strings.HasPrefix(url, "nats://") {
		t.Fatalf("embedded NATS is not listening: %q", url)
	}
	startToolService(t, url)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return inst, nc
}

// runNative runs a request through the native NDJSON frontend and returns
// the events as they arrived.
func runNative(t *testing.T, base, body string) []*canonical.Event {
	t.Helper()
	resp, err := http.Post(base+"/v1/runs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	var evs []*canonical.Event
	for sc.Scan() {
		ev := &canonical.Event{}
		if err := protojson.Unmarshal(sc.Bytes(), ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// pos is the index of the first event matching pred, or -1.
func pos(evs []*canonical.Event, pred func(*canonical.Event) bool) int {
	return slices.IndexFunc(evs, pred)
}

func toolEv(kind, id string) func(*canonical.Event) bool {
	return func(ev *canonical.Event) bool {
		if len(ev.GetNamespace()) != 0 {
			return false
		}
		switch kind {
		case "started":
			return ev.GetToolStarted().GetToolCallId() == id
		case "finished":
			return ev.GetToolFinished().GetToolCallId() == id
		case "failed":
			return ev.GetToolFailed().GetToolCallId() == id
		}
		return false
	}
}

func rootText(evs []*canonical.Event) string {
	text := map[uint32]bool{}
	var sb strings.Builder
	for _, ev := range evs {
		if len(ev.GetNamespace()) != 0 {
			continue
		}
		if bs := ev.GetBlockStart(); bs != nil {
			text[bs.GetIndex()] = bs.GetType() == canonical.BlockText
		}
		if d := ev.GetBlockDelta(); d != nil && text[d.GetIndex()] {
			sb.WriteString(d.GetText())
		}
	}
	return sb.String()
}

// TestCortexExample runs the complete example of the Cortex spec, streamed
// token by token by the scripted target cortex-example, through the
// decoder and executor, with its five tools served by a NATS micro service
// in another process, and checks the order through the native frontend:
// the three fetches overlap, the analyzer starts after all three, the
// cache write never delays the response, and $comprehensive_analysis in
// the response is the analyzer's output.
func TestCortexExample(t *testing.T) {
	inst, nc := instance(t)
	done, err := nc.SubscribeSync(cacheDone)
	if err != nil {
		t.Fatal(err)
	}
	evs := runNative(t, inst.URL, `{"target":"cortex-example"}`)

	// The fetches overlapped: all three started before any finished (the
	// service answers none of them until all three are in flight).
	fetches := []string{"wiki", "arxiv", "news"}
	firstFinish, lastFinish := len(evs), -1
	for _, id := range fetches {
		f := pos(evs, toolEv("finished", id))
		if f < 0 {
			t.Fatalf("fetch %s did not finish:\n%s", id, dump(evs))
		}
		firstFinish, lastFinish = min(firstFinish, f), max(lastFinish, f)
	}
	for _, id := range fetches {
		if s := pos(evs, toolEv("started", id)); s < 0 || s > firstFinish {
			t.Errorf("fetch %s started at %d, after a fetch finished at %d", id, s, firstFinish)
		}
	}
	// The analyzer started after all three.
	if s := pos(evs, toolEv("started", "analyze")); s < lastFinish {
		t.Errorf("analyze started at %d, before the last fetch finished at %d", s, lastFinish)
	}
	if f := pos(evs, toolEv("finished", "analyze")); f < 0 || evs[f].GetToolFinished().GetOutput().GetStringValue() != analysis {
		t.Fatalf("analyze result:\n%s", dump(evs))
	}
	// The cache write started, and the run ended while it was still
	// blocked (the service lets it finish only after we saw the end).
	if pos(evs, toolEv("started", "cache")) < 0 {
		t.Fatalf("the cache write never started:\n%s", dump(evs))
	}
	if pos(evs, toolEv("finished", "cache")) >= 0 || pos(evs, toolEv("failed", "cache")) >= 0 {
		t.Fatalf("the run waited for the cache write:\n%s", dump(evs))
	}
	if st, _ := canonical.TerminalOf(evs[len(evs)-1]); st != canonical.StatusCompleted {
		t.Fatalf("run ended %v", st)
	}
	// The response carries the analyzer's output in place of the reference.
	text := rootText(evs)
	if !strings.Contains(text, "## Overview\nBased on analysis of Wikipedia, recent research papers, and news articles:\n\n"+analysis+"\n\n## Key Trends") ||
		strings.Contains(text, "$comprehensive_analysis") {
		t.Fatalf("response text:\n%s", text)
	}
	// Now the cache write may finish; it stored the analysis.
	if got := finishCache(t, nc, done); got != analysis {
		t.Errorf("cached value %q", got)
	}
}

const analysis = "ANALYSIS: Artificial intelligence; 2 papers; 2 news items"

// finishCache lets the blocked cache write of a cortex-example run finish
// and returns the value it stored.
func finishCache(t *testing.T, nc *nats.Conn, done *nats.Subscription) string {
	t.Helper()
	if err := nc.Publish(releaseSubject, nil); err != nil {
		t.Fatal(err)
	}
	msg, err := done.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the cache write did not finish: %v", err)
	}
	return string(msg.Data)
}

// TestCortexTriton: a Triton client of the XML-decoded cortex-example sees
// its reasoning (include_reasoning), its tool activity (response
// parameters) and its response with the analysis in it.
func TestCortexTriton(t *testing.T) {
	inst, nc := instance(t)
	done, err := nc.SubscribeSync(cacheDone)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(inst.URL+"/v2/models/cortex-example/generate_stream", "application/json",
		strings.NewReader(`{"text_input":"research AI","stream":true,"include_reasoning":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v\n%s", resp.StatusCode, err, body)
	}
	var p sse.Parser
	evs, err := p.Feed(body, nil)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var tools []string
	for _, e := range evs {
		var r map[string]any
		if err := json.Unmarshal(e.Data, &r); err != nil {
			t.Fatalf("%s: %v", e.Data, err)
		}
		s, _ := r["text_output"].(string)
		text.WriteString(s)
		if n, ok := r["tool_call_name"].(string); ok {
			tools = append(tools, "call "+n)
		}
		if id, ok := r["tool_call_result"].(string); ok {
			tools = append(tools, "result "+r["tool_call_id"].(string)+" "+id)
		}
	}
	out := text.String()
	for _, want := range []string{"<think>", "I'll research this topic by:", "</think>", analysis, "## Key Trends"} {
		if !strings.Contains(out, want) {
			t.Errorf("text_output lacks %q:\n%s", want, out)
		}
	}
	joined := strings.Join(tools, "\n")
	for _, want := range []string{"call web_scraper", "call arxiv_search", "call news_api", "call comprehensive_analyzer", "call results_cache", "result analyze \"" + analysis + "\""} {
		if !strings.Contains(joined, want) {
			t.Errorf("tool activity lacks %q:\n%s", want, joined)
		}
	}
	finishCache(t, nc, done)
}

func dump(evs []*canonical.Event) string {
	var sb strings.Builder
	for i, ev := range evs {
		b, _ := protojson.Marshal(ev)
		fmt.Fprintf(&sb, "%3d %s\n", i, b)
	}
	return sb.String()
}

// TestToolRegistry drives actions through xml-echo (the echo target with
// the decoder on: the input is the model's output) against the bridge's
// real tool registry: a built-in tool, a micro service that fails, a tool
// the allowlist does not name (it never runs), and a nested agent run.
func TestToolRegistry(t *testing.T) {
	inst, nc := instance(t)
	input := `<thought>use tools</thought>` +
		`<action id="c" mode="async">{"name": "calculator", "parameters": {"expression": "6 * 7"}, "output_key": "product"}</action>` +
		`<action id="f" mode="async">{"name": "failing_tool", "parameters": {}}</action>` +
		`<action id="s" mode="async">{"name": "secret_tool", "parameters": {}}</action>` +
		`<action id="n" type="agent" mode="sync">{"name": "echo", "parameters": {"prompt": "nested hello"}, "output_key": "said"}</action>` +
		`<response>product=$product said=$said</response>`
	body := fmt.Sprintf(`{"target":"xml-echo","inputs":[{"name":"prompt","node":{"mime":"text/plain","data":%q}}]}`,
		b64(input))
	evs := runNative(t, inst.URL, body)
	if f := pos(evs, toolEv("finished", "c")); f < 0 || evs[f].GetToolFinished().GetOutput().GetStructValue().GetFields()["result"].GetNumberValue() != 42 {
		t.Errorf("calculator:\n%s", dump(evs))
	}
	checkFailed := func(id string, code canonical.Code, msg string) {
		t.Helper()
		f := pos(evs, toolEv("failed", id))
		if f < 0 {
			t.Fatalf("%s did not fail:\n%s", id, dump(evs))
		}
		e := evs[f].GetToolFailed().GetError()
		if canonical.Code(e.GetCode()) != code || e.GetMessage() != msg {
			t.Errorf("%s failed with %s %q, want %s %q", id, canonical.Code(e.GetCode()), e.GetMessage(), code, msg)
		}
	}
	checkFailed("f", canonical.CodeUnavailable, `action "f": tool failing_tool: backend down`)
	checkFailed("s", canonical.CodeNotFound, `action "s": tool "secret_tool" is not in the allowlist`)
	reply, err := nc.Request(statsSubject, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(reply.Data) != "0" {
		t.Errorf("secret_tool ran %s times", reply.Data)
	}
	// The nested run's events are in namespace [n], opened with cause toolCall.
	i := slices.IndexFunc(evs, func(ev *canonical.Event) bool { return slices.Equal(ev.GetNamespace(), []string{"n"}) })
	if i < 0 || evs[i].GetLifecycle().GetCause().GetType() != "toolCall" || evs[i].GetLifecycle().GetCause().GetToolCallId() != "n" {
		t.Fatalf("nested namespace:\n%s", dump(evs))
	}
	if got := rootText(evs); got != `product={"result":42} said=nested hello` {
		t.Errorf("response %q", got)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestXMLFrontend renders runs at POST /v1/xml/stream as text and as SSE.
func TestXMLFrontend(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	post := func(body, accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", inst.URL+"/v1/xml/stream", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	resp, text := post(`{"target":"demo-agent","input":"what is 6 * 7?","parameters":{}}`, "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	goldenFile(t, "testdata/demo-agent.out", text)

	resp, stream := post(`{"target":"demo-agent","input":"what is 6 * 7?"}`, "text/event-stream")
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("SSE content type %q", resp.Header.Get("Content-Type"))
	}
	var p sse.Parser
	evs, err := p.Feed(stream, nil)
	if err != nil {
		t.Fatal(err)
	}
	if evs, err = p.End(evs); err != nil {
		t.Fatal(err)
	}
	var joined []byte
	for _, e := range evs {
		joined = append(joined, e.Data...)
	}
	if d := cmp.Diff(string(text), string(joined)); d != "" {
		t.Errorf("SSE data differs from the text stream (-text +sse):\n%s", d)
	}
	if len(evs) < 3 {
		t.Errorf("SSE: %d events, want one per rendered piece", len(evs))
	}

	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"input":"x"}`, 400, `<error code="invalid_argument">request: "target" is required</error>` + "\n"},
		{`{"target":"echo"}`, 400, `<error code="invalid_argument">request: "input" is required (a string)</error>` + "\n"},
		{`{"target":"echo","input":"x","model":"y"}`, 400, `<error code="invalid_argument">request: unknown field "model"</error>` + "\n"},
		{`{"target":"echo","input":7}`, 400, `<error code="invalid_argument">request: field "input" must be a string</error>` + "\n"},
		{`{"target":"nope","input":"x"}`, 404, `<error code="not_found">unknown target "nope"</error>` + "\n"},
	} {
		resp, b := post(c.body, "")
		if resp.StatusCode != c.status || string(b) != c.want {
			t.Errorf("%s: %d %q, want %d %q", c.body, resp.StatusCode, b, c.status, c.want)
		}
	}
	// A failed run ends with an <error> element after the 200.
	_, b := post(`{"target":"stream","input":"x","parameters":{"deltas":3,"fail_after":2,"fail_code":"unavailable","fail_message":"upstream gone"}}`, "")
	if want := "<response>tok tok </response>\n<error code=\"unavailable\" status=\"failed\">upstream gone</error>\n"; string(b) != want {
		t.Errorf("failed run: %q, want %q", b, want)
	}
}

// TestXMLFrontendCurl streams with curl, a client we did not write.
func TestXMLFrontendCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed (CI has it)")
	}
	inst := bridgetest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, curl, "-sS", "-N", "-X", "POST",
		"-H", "Content-Type: application/json",
		"--data", `{"target":"demo-agent","input":"what is 6 * 7?"}`,
		inst.URL+"/v1/xml/stream").Output()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	want, err := os.ReadFile("testdata/demo-agent.out")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("curl got:\n%s\nwant:\n%s", out, want)
	}
}

func goldenFile(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\n%s", file, cmp.Diff(string(want), string(got)))
	}
}

// TestXMLFrontendFlushes: each rendered event reaches the client at once
// (chunked, flushed), while the run is still waiting on a sync action.
func TestXMLFrontendFlushes(t *testing.T) {
	inst, nc := instance(t)
	done, err := nc.SubscribeSync(cacheDone)
	if err != nil {
		t.Fatal(err)
	}
	input := `<thought>storing</thought><action id="c" mode="sync">{"name":"results_cache","parameters":{"key":"k","value":"v"}}</action><response>stored</response>`
	body, _ := json.Marshal(map[string]any{"target": "xml-echo", "input": input})
	resp, err := http.Post(inst.URL+"/v1/xml/stream", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v", resp.TransferEncoding)
	}
	// The action tag arrives while the cache write (a sync action) blocks
	// the rest of the run: nothing waits in a buffer.
	br := bufio.NewReader(resp.Body)
	var got strings.Builder
	for !strings.Contains(got.String(), "</action>") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended early (%v): %q", err, got.String())
		}
		got.WriteString(line)
	}
	if strings.Contains(got.String(), "<response>") {
		t.Fatalf("the response came before the sync action ended: %q", got.String())
	}
	finishCache(t, nc, done)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	want := `<thought>storing</thought>` + "\n" +
		`<action mode="sync" id="c">{"name":"results_cache","parameters":{"key":"k","value":"v"}}</action>` + "\n" +
		`<observation id="c" status="ok">{"stored":"k"}</observation>` + "\n" +
		`<response>stored</response>` + "\n"
	if all := got.String() + string(rest); all != want {
		t.Errorf("stream:\n%s\nwant:\n%s", all, want)
	}
}
