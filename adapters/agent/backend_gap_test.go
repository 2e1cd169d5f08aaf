package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/canonical"
)

// bufferless is an agent-protocol thread server that keeps no event at
// all: run.start hands its run's frames to the streams open at that
// moment, before it answers, and a stream opened later never sees them
// (the upstream that has already pushed a run's start out of its buffer).
// Each run's frames come from script, given the seq the command was
// applied through.
type bufferless struct {
	script func(after uint64) (frames [][]byte, last uint64)

	mu   sync.Mutex
	seq  uint64
	subs map[chan []byte]bool // each open stream's frames, in order
	runs int
}

// subscriberQueue bounds a stream's frames not yet written (the scripts
// are short).
const subscriberQueue = 1024

func startBufferless(t *testing.T, script func(after uint64) ([][]byte, uint64)) string {
	t.Helper()
	u := &bufferless{script: script, subs: map[chan []byte]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /threads/{thread}/commands", u.command)
	mux.HandleFunc("POST /threads/{thread}/stream/events", u.sse)
	mux.HandleFunc("GET /threads/{thread}/stream/events", u.websocket)
	mux.HandleFunc("POST /threads/{thread}/runs/{run}/cancel", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		ts.CloseClientConnections() // ends the open streams
		ts.Close()
	})
	return ts.URL
}

func (u *bufferless) subscribe() chan []byte {
	ch := make(chan []byte, subscriberQueue)
	u.mu.Lock()
	u.subs[ch] = true
	u.mu.Unlock()
	return ch
}

func (u *bufferless) unsubscribe(ch chan []byte) {
	u.mu.Lock()
	delete(u.subs, ch)
	u.mu.Unlock()
}

// start runs the script: its frames go to the streams open now; the
// answer (for the connection answer, when the command came over one) goes
// after them.
func (u *bufferless) start(id json.RawMessage, answer chan []byte) []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	after := u.seq
	frames, last := u.script(after)
	u.seq = last
	u.runs++
	for ch := range u.subs {
		for _, f := range frames {
			ch <- f
		}
	}
	res := fmt.Appendf(nil, `{"type":"success","id":%s,"result":{"run_id":"run-%d"},"meta":{"applied_through_seq":%d}}`, id, u.runs, after)
	if answer != nil {
		answer <- res
	}
	return res
}

type fakeCommand struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func (u *bufferless) command(w http.ResponseWriter, r *http.Request) {
	var c fakeCommand
	if json.NewDecoder(r.Body).Decode(&c) != nil || c.Method != "run.start" {
		http.Error(w, "run.start only", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(u.start(c.ID, nil))
}

func (u *bufferless) sse(w http.ResponseWriter, r *http.Request) {
	ch := u.subscribe()
	defer u.unsubscribe(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	for {
		select {
		case f := <-ch:
			if _, err := fmt.Fprintf(w, "data: %s\n\n", f); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func (u *bufferless) websocket(w http.ResponseWriter, r *http.Request) {
	conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	out := make(chan []byte, subscriberQueue) // the connection's frames: one writer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f := range out {
			if conn.WriteMessage(websocket.TextMessage, f) != nil {
				return
			}
		}
	}()
	defer func() { close(out); <-done }()
	subscribed := false
	defer func() {
		if subscribed {
			u.unsubscribe(out)
		}
	}()
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var c fakeCommand
		_ = json.Unmarshal(data, &c)
		switch c.Method {
		case "subscription.subscribe":
			u.mu.Lock()
			u.subs[out], subscribed = true, true
			u.mu.Unlock()
			out <- fmt.Appendf(nil, `{"type":"success","id":%s,"result":{"subscription_id":"s"}}`, c.ID)
		case "run.start":
			u.start(c.ID, out)
		}
	}
}

// runFrames builds a run's frames, numbering the events from the command's
// seq on.
type runFrames struct {
	seq uint64
	out [][]byte
}

func (f *runFrames) event(method, data string) *runFrames {
	f.seq++
	f.out = append(f.out, fmt.Appendf(nil, `{"type":"event","event_id":"%d","seq":%d,"method":%q,"params":{"namespace":[],"timestamp":1710000000000,"data":%s}}`, f.seq, f.seq, method, data))
	return f
}

func (f *runFrames) raw(frame string) *runFrames {
	f.out = append(f.out, []byte(frame))
	return f
}

// begin is the run's start: running, then a message with a text block.
func (f *runFrames) begin() *runFrames {
	return f.event("lifecycle", `{"event":"running"}`).
		event("messages", `{"event":"message-start","role":"ai","id":"m1"}`).
		event("messages", `{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}`)
}

func (f *runFrames) text(s string) *runFrames {
	return f.event("messages", `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":`+strconv.Quote(s)+`}}`)
}

// finish ends the block, the message and the run (completed).
func (f *runFrames) finish() *runFrames {
	return f.event("messages", `{"event":"content-block-finish","index":0,"content":{"type":"text","text":""}}`).
		event("messages", `{"event":"message-finish","reason":"stop"}`).
		event("lifecycle", `{"event":"completed"}`)
}

// outcome is a run's text and terminal event.
func outcome(t *testing.T, events []*canonical.Event) (text string, status canonical.RunStatus, code canonical.Code, msg string) {
	t.Helper()
	for _, e := range events {
		if d := e.GetBlockDelta(); d != nil {
			text += d.GetText()
		}
	}
	last := events[len(events)-1].GetLifecycle()
	return text, last.GetStatus(), canonical.Code(last.GetError().GetCode()), last.GetError().GetMessage()
}

// TestBackendReadsFromTheRunsFirstEvent (subscribe before start): an
// upstream that keeps no event hands a run's frames, from its running
// lifecycle on, only to the streams open when run.start arrives. Each
// run, on a new event stream, on the thread's kept one, and over a
// WebSocket, is read from its first event.
func TestBackendReadsFromTheRunsFirstEvent(t *testing.T) {
	url := startBufferless(t, func(after uint64) ([][]byte, uint64) {
		f := (&runFrames{seq: after}).begin().text("a").text("b").text("c").finish()
		return f.out, f.seq
	})
	for _, transport := range []string{"sse", "websocket"} {
		b := newBackend(t, url, transport)
		for run := range 2 { // the second SSE run reads the kept stream
			req := request("first-"+transport, "agent")
			req.RunId += strconv.Itoa(run)
			events := collect(t, b, req)
			if st := events[0].GetLifecycle().GetStatus(); st != canonical.StatusRunning {
				t.Fatalf("%s run %d: first event %v, want the running lifecycle", transport, run, events[0])
			}
			if text, st, _, msg := outcome(t, events); text != "abc" || st != canonical.StatusCompleted {
				t.Fatalf("%s run %d: text %q, end %v %s", transport, run, text, st, msg)
			}
		}
	}
}

// TestBackendFailsOnUpstreamGap: an upstream's error frame or gap report,
// and a jump in its seqs, end the run failed with the canonical code
// (data_loss for lost events, the upstream's code otherwise), with nothing
// after the hole; a gap report that lost only events before the run is
// not a failure.
func TestBackendFailsOnUpstreamGap(t *testing.T) {
	cases := []struct {
		name string
		run  func(f *runFrames)
		text string
		code canonical.Code // CodeOK: the run completes
		msg  string         // in the error message
	}{
		{"gap report", func(f *runFrames) {
			f.begin().text("a")
			f.raw(fmt.Sprintf(`{"type":"error","id":null,"error":"invalid_argument","message":"events after seq %d are no longer buffered","since":%d,"min_available_seq":%d}`, f.seq, f.seq, f.seq+5))
			f.seq += 4
			f.text("b").finish()
		}, "a", canonical.CodeDataLoss, "no longer buffered"},
		{"resume_gap", func(f *runFrames) {
			f.begin().text("a").raw(`{"type":"error","id":null,"error":"resume_gap","message":"missed events"}`).text("b").finish()
		}, "a", canonical.CodeDataLoss, "missed events"},
		{"error frame", func(f *runFrames) {
			f.begin().text("a").raw(`{"type":"error","id":null,"error":"permission_denied","message":"key revoked"}`).text("b").finish()
		}, "a", canonical.CodePermissionDenied, "key revoked"},
		{"error frame with a member of another type", func(f *runFrames) {
			f.begin().text("a").raw(`{"type":"error","id":null,"error":"no_such_run","message":["gone"]}`).text("b").finish()
		}, "a", canonical.CodeNotFound, "no_such_run"},
		{"gap report of unknown extent", func(f *runFrames) {
			f.begin().text("a").raw(`{"type":"error","id":null,"error":"invalid_argument","message":"gone","min_available_seq":"x"}`).text("b").finish()
		}, "a", canonical.CodeDataLoss, "unknown"},
		{"frame of an unknown type", func(f *runFrames) {
			f.begin().text("a").raw(`{"type":"notice","id":null}`).text("b").finish()
		}, "a", canonical.CodeInvalidArgument, "notice"},
		{"seq jump", func(f *runFrames) {
			f.begin().text("a")
			f.seq += 2
			f.text("b").finish()
		}, "a", canonical.CodeDataLoss, "lost"},
		{"gap before the run", func(f *runFrames) {
			f.raw(fmt.Sprintf(`{"type":"error","id":null,"error":"invalid_argument","message":"old","since":0,"min_available_seq":%d}`, f.seq+1))
			f.begin().text("a").text("b").finish()
		}, "ab", canonical.CodeOK, ""},
	}
	for _, tc := range cases {
		url := startBufferless(t, func(after uint64) ([][]byte, uint64) {
			f := &runFrames{seq: after}
			tc.run(f)
			return f.out, f.seq
		})
		for _, transport := range []string{"sse", "websocket"} {
			events := collect(t, newBackend(t, url, transport), request("gap-"+transport, "agent"))
			text, st, code, msg := outcome(t, events)
			switch {
			case tc.code == canonical.CodeOK && st != canonical.StatusCompleted:
				t.Errorf("%s over %s: ended %v %v %q, want completed", tc.name, transport, st, code, msg)
			case tc.code != canonical.CodeOK && (st != canonical.StatusFailed || code != tc.code || !strings.Contains(msg, tc.msg)):
				t.Errorf("%s over %s: ended %v %v %q, want failed %v (%q)", tc.name, transport, st, code, msg, tc.code, tc.msg)
			case text != tc.text:
				t.Errorf("%s over %s: text %q, want %q", tc.name, transport, text, tc.text)
			}
		}
	}
}

// numberedRunner runs its target as one message of deltas text deltas,
// "0 ", "1 ", ...: as fast as it can, so a reader can tell each delta's
// place.
type numberedRunner struct{ deltas int }

func (p *numberedRunner) Run(context.Context, *canonical.Request) (canonical.Stream, error) {
	s := &numberedStream{deltas: p.deltas, b: canonical.NewBuilder()}
	s.out = s.b.Lifecycle(s.out, canonical.StatusRunning)
	return s, nil
}

// Start makes it a backend.
func (p *numberedRunner) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	return p.Run(ctx, req)
}

func (p *numberedRunner) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name, Backend: "numbered"}, name == "numbered"
}

func (p *numberedRunner) Targets() []canonical.TargetInfo {
	return []canonical.TargetInfo{{Name: "numbered", Backend: "numbered"}}
}

type numberedStream struct {
	deltas int
	b      *canonical.Builder
	out    []*canonical.Event
	next   int
	sent   int
}

func (s *numberedStream) Recv() (*canonical.Event, error) {
	for s.next == len(s.out) {
		if s.b.Ended() {
			return nil, io.EOF
		}
		s.out, s.next = s.out[:0], 0
		if s.sent == s.deltas {
			s.out = s.b.End(s.out, canonical.StatusCompleted, nil)
		} else {
			s.out = s.b.Text(s.out, strconv.Itoa(s.sent)+" ")
			s.sent++
		}
	}
	ev := s.out[s.next]
	s.next++
	return ev, nil
}

func (s *numberedStream) Close() error { return nil }

// TestAgentToAgentWholeRun: 12,000 deltas, more than the upstream
// frontend's thread buffer (BufferEvents, 10,000), through agent:agent
// (client -> our frontend -> bridge -> agent backend -> our frontend ->
// producer), unpaced, arrive whole: every delta, in order, then
// completed. The upstream waits for the backend's stream, as the
// downstream frontend waits for the client's, rather than drop events.
func TestAgentToAgentWholeRun(t *testing.T) {
	const deltas = 12_000
	numbered, _ := startBridge(t, bridgeOpts{backend: &numberedRunner{deltas: deltas}, targets: []string{"numbered"}})
	upstream := newServer(t, agent.Config{Runner: numbered})
	for _, transport := range []string{"sse", "websocket"} {
		runner, _ := startBridge(t, bridgeOpts{backend: newBackend(t, upstream.URL, transport), targets: []string{"numbered"}})
		front := newServer(t, agent.Config{Runner: runner})
		thread := "whole-" + transport
		st := front.openSSE(t, thread, `{"channels":["lifecycle","messages"]}`, nil)
		front.runStart(t, thread, "numbered", user("go"), nil)
		var text strings.Builder
		var end envelope
		received := 0
		for {
			e := st.envelope()
			if e.Type != "event" {
				t.Fatalf("%s: frame %+v", transport, e)
			}
			var d struct {
				Event string
				Delta struct{ Type, Text string }
			}
			_ = json.Unmarshal(e.Params.Data, &d)
			if d.Delta.Type == "text-delta" {
				text.WriteString(d.Delta.Text)
				received++
			}
			if e.rootTerminal() {
				end = e
				break
			}
		}
		var want strings.Builder
		for i := range deltas {
			want.WriteString(strconv.Itoa(i) + " ")
		}
		if received != deltas || text.String() != want.String() || end.status() != "completed" {
			t.Fatalf("%s: %d deltas (want %d), text in order %v, end %s %s", transport, received, deltas, text.String() == want.String(), end.status(), end.Params.Data)
		}
	}
}

// TestBackendWebSocketDropsReplay: a WebSocket run on a thread whose
// upstream buffer holds more events than MaxPendingEvents starts: the
// subscription's replay, events before the command, is not held while
// the run.start answer is awaited.
func TestBackendWebSocketDropsReplay(t *testing.T) {
	const deltas = 500
	numbered, _ := startBridge(t, bridgeOpts{backend: &numberedRunner{deltas: deltas}, targets: []string{"numbered"}})
	upstream := newServer(t, agent.Config{Runner: numbered})
	for run := range 2 {
		b, err := agent.NewBackend(agent.BackendConfig{URL: upstream.URL, Transport: "websocket", MaxPendingEvents: 100, Timeout: wait})
		if err != nil {
			t.Fatal(err)
		}
		req := request("replayed", "numbered")
		req.RunId += strconv.Itoa(run)
		text, st, code, msg := outcome(t, collect(t, b, req))
		b.Close()
		if st != canonical.StatusCompleted || !strings.HasPrefix(text, "0 1 2 ") || !strings.HasSuffix(text, " 499 ") {
			t.Fatalf("run %d (after the thread's %d earlier runs): end %v %v %q, text %.20q...", run, run, st, code, msg, text)
		}
	}
}
