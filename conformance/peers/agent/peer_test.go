package agentpeer

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/internal/json"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestPlaysScriptOverSSE runs research-agent and reads it back with since.
func TestPlaysScriptOverSSE(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(p.Handler())
	defer ts.Close()
	defer p.Close()
	resp := post(t, ts.URL+"/threads/t/commands", `{"id":1,"method":"run.start","params":{"assistant_id":"research-agent","input":{}}}`)
	var res struct {
		Type   string
		Result struct {
			RunID string `json:"run_id"`
		}
		Meta struct {
			AppliedThroughSeq uint64 `json:"applied_through_seq"`
		}
	}
	_ = json.UnmarshalRead(resp.Body, &res, readOptions)
	resp.Body.Close()
	if res.Type != "success" || res.Result.RunID == "" || res.Meta.AppliedThroughSeq != 0 {
		t.Fatalf("run.start: %+v", res)
	}
	stream := post(t, ts.URL+"/threads/t/stream/events", `{"channels":["lifecycle","input"],"since":0}`)
	defer stream.Body.Close()
	sc := bufio.NewScanner(stream.Body)
	var got []string
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		var ev struct {
			Method string
			Params struct{ Data struct{ Event string } }
		}
		_ = json.Unmarshal(line[6:], &ev, readOptions)
		got = append(got, ev.Method+":"+ev.Params.Data.Event)
		if ev.Params.Data.Event == "interrupted" {
			break
		}
	}
	want := "lifecycle:running lifecycle:started lifecycle:completed input.requested: lifecycle:interrupted"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %v", got)
	}
	if len(p.Script("research-agent")) != 38 {
		t.Fatalf("script has %d events", len(p.Script("research-agent")))
	}
	bad := post(t, ts.URL+"/threads/t/commands", `{"method":"run.start"}`)
	bad.Body.Close()
	if bad.StatusCode != 400 {
		t.Fatalf("missing id: %d", bad.StatusCode)
	}
}

func line(method, params string) Line { return Line{Method: method, Params: json.Value(params)} }

// sendCommand posts one command and returns the response's type, error code
// and run id.
func sendCommand(t *testing.T, url, body string) (typ, code, run string) {
	t.Helper()
	resp := post(t, url, body)
	defer resp.Body.Close()
	var r struct {
		Type   string
		Error  string
		Result struct {
			RunID string `json:"run_id"`
		}
	}
	if err := json.UnmarshalRead(resp.Body, &r, readOptions); err != nil {
		t.Fatal(err)
	}
	return r.Type, r.Error, r.Result.RunID
}

// events reads an SSE stream's lifecycle and messages events until the
// root terminal lifecycle, as "method:event" strings.
func events(t *testing.T, body *bufio.Scanner) []string {
	t.Helper()
	var got []string
	for body.Scan() {
		l := body.Bytes()
		if !bytes.HasPrefix(l, []byte("data: ")) {
			continue
		}
		var ev struct {
			Method string
			Params struct {
				Data struct{ Event, Error string }
			}
		}
		if err := json.Unmarshal(l[6:], &ev, readOptions); err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Method+":"+ev.Params.Data.Event+ev.Params.Data.Error)
		if ev.Method == "lifecycle" && ev.Params.Data.Event != "running" {
			break
		}
	}
	return got
}

// Scripts given by Config play like the embedded ones; a script's Input
// is checked and its Refusal answers run.start.
func TestConfigScripts(t *testing.T) {
	p, err := NewWithConfig(Config{Scripts: map[string]Script{
		"a": {Input: "hi", Lines: []Line{
			line("lifecycle", `{"namespace":[],"data":{"event":"running"}}`),
			{Method: "messages", Params: json.Value(`{"namespace":[],"node":"agent","data":{"event":"message-start","role":"ai","id":"m"}}`), DelayMs: 1},
			line("lifecycle", `{"namespace":[],"data":{"event":"completed"}}`),
		}},
		"no": {Refusal: &Refusal{Code: "unknown_error", Message: "down"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(p.Handler())
	defer ts.Close()
	defer p.Close()
	if typ, code, _ := sendCommand(t, ts.URL+"/threads/t/commands", `{"id":1,"method":"run.start","params":{"assistant_id":"no","input":{}}}`); typ != "error" || code != "unknown_error" {
		t.Fatalf("refusal: %s %s", typ, code)
	}
	if typ, code, _ := sendCommand(t, ts.URL+"/threads/t/commands", `{"id":2,"method":"run.start","params":{"assistant_id":"a","input":{"messages":[{"role":"user","content":"ho"}]}}}`); typ != "error" || code != "invalid_argument" {
		t.Fatalf("wrong input: %s %s", typ, code)
	}
	in := `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`
	if typ, _, _ := sendCommand(t, ts.URL+"/threads/t/commands", `{"id":3,"method":"run.start","params":{"assistant_id":"a","input":`+in+`}}`); typ != "success" {
		t.Fatalf("run.start: %s", typ)
	}
	if len(p.Script("research-agent")) != 38 {
		t.Fatal("the embedded scripts are gone")
	}
	stream := post(t, ts.URL+"/threads/t/stream/events", `{"channels":["lifecycle","messages"]}`)
	defer stream.Body.Close()
	got := strings.Join(events(t, bufio.NewScanner(stream.Body)), " ")
	if got != "lifecycle:running messages:message-start lifecycle:completed" {
		t.Fatalf("got %s", got)
	}
	for _, bad := range []Script{{Lines: []Line{{}}}, {Lines: []Line{{Pause: "forever"}}}} {
		if _, err := NewWithConfig(Config{Scripts: map[string]Script{"x": bad}}); err == nil {
			t.Fatalf("%+v: no error", bad)
		}
	}
}

// A run cancelled while it waits (a delay) ends with a failed lifecycle
// event, and Cancelled reports its assistant.
func TestCancelDuringDelay(t *testing.T) {
	p, err := NewWithConfig(Config{Scripts: map[string]Script{"slow": {Lines: []Line{
		line("lifecycle", `{"namespace":[],"data":{"event":"running"}}`),
		{Method: "lifecycle", Params: json.Value(`{"namespace":[],"data":{"event":"completed"}}`), DelayMs: 600_000},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(p.Handler())
	defer ts.Close()
	defer p.Close()
	_, _, run := sendCommand(t, ts.URL+"/threads/c/commands", `{"id":1,"method":"run.start","params":{"assistant_id":"slow","input":null}}`)
	resp := post(t, ts.URL+"/threads/c/runs/"+run+"/cancel", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	if a := <-p.Cancelled(); a != "slow" {
		t.Fatalf("cancelled %q", a)
	}
	stream := post(t, ts.URL+"/threads/c/stream", `{"channels":["lifecycle"]}`)
	defer stream.Body.Close()
	got := strings.Join(events(t, bufio.NewScanner(stream.Body)), " ")
	if got != "lifecycle:running lifecycle:failedcancelled: cancelled by client" {
		t.Fatalf("got %s", got)
	}
}

// flushRecorder records each write a handler makes (and flushes).
type flushRecorder struct {
	mu     sync.Mutex
	header http.Header
	writes []string
	done   chan struct{} // closed once the terminal event is written
	seen   strings.Builder
}

func (f *flushRecorder) Header() http.Header { return f.header }
func (f *flushRecorder) WriteHeader(int)     {}
func (f *flushRecorder) Flush()              {}
func (f *flushRecorder) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, string(b))
	f.seen.Write(b)
	if strings.Contains(f.seen.String(), `"completed"`) && f.done != nil {
		close(f.done)
		f.done = nil
	}
	return len(b), nil
}

// WriteBytes cuts every SSE frame into writes of that size: the 4-byte
// rune of the script is cut across two of them.
func TestWriteBytes(t *testing.T) {
	p, err := NewWithConfig(Config{Scripts: map[string]Script{"w": {WriteBytes: 5, Lines: []Line{
		line("custom", `{"namespace":[],"data":{"name":"x","payload":"ab😀"}}`),
		line("lifecycle", `{"namespace":[],"data":{"event":"completed"}}`),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := p.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/threads/w/commands", strings.NewReader(`{"id":1,"method":"run.start","params":{"assistant_id":"w","input":null}}`)))
	if !strings.Contains(rec.Body.String(), "success") {
		t.Fatal(rec.Body.String())
	}
	done := make(chan struct{})
	fr := &flushRecorder{header: http.Header{}, done: done}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		h.ServeHTTP(fr, httptest.NewRequest("POST", "/threads/w/stream", strings.NewReader(`{"channels":["custom","lifecycle"]}`)).WithContext(ctx))
	}()
	<-done
	cancel()
	<-served
	fr.mu.Lock()
	defer fr.mu.Unlock()
	cut := false
	for _, w := range fr.writes {
		if len(w) > 5 {
			t.Fatalf("a write of %d bytes", len(w))
		}
		if !utf8.ValidString(w) {
			cut = true
		}
	}
	if !cut || !strings.Contains(fr.seen.String(), "😀") {
		t.Fatalf("the rune was not cut across writes: %q", fr.writes)
	}
}
