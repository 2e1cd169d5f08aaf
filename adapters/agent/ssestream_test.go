package agent_test

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/adapters/agent"
)

// streamGoroutines counts the goroutines that hold an SSE stream open
// past its handler (internal/sse's Conn, waiting for the peer).
func streamGoroutines() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "internal/sse.(*Conn).watch")
}

// eventually waits for cond, failing with what after the wait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func statuses(envs []envelope) []string {
	var out []string
	for _, e := range envs {
		if len(e.Params.Namespace) == 0 {
			out = append(out, e.status())
		}
	}
	return out
}

// TestSSEStreamOutlivesItsHandler: an SSE stream on HTTP/1.1 holds no
// net/http handler once it waits (its writer starts when there is
// something to write): the handler's stack and net/http's buffers, 8
// KiB of the 27.5 KB an idle stream cost. It still gets heartbeats and a
// run's events, in order, and the server lets go of it when the client
// hangs up.
func TestSSEStreamOutlivesItsHandler(t *testing.T) {
	s := newServer(t, agent.Config{Heartbeat: 50 * time.Millisecond})
	handlers, watching := httpHandlers(), streamGoroutines()
	st := s.openSSE(t, "outlive-sse", `{"channels":["lifecycle"]}`, nil)
	if !st.resp.Close || !slices.Equal(st.resp.TransferEncoding, []string{"chunked"}) {
		t.Fatalf("response close %v, transfer encoding %v; want a chunked body ending the connection", st.resp.Close, st.resp.TransferEncoding)
	}
	eventually(t, "the stream's handler did not return", func() bool { return httpHandlers() <= handlers })
	if n := streamGoroutines(); n != watching+1 {
		t.Fatalf("%d goroutines watch a stream, want %d", n, watching+1)
	}
	if e := st.next(true); !e.IsComment || e.Comment != "heartbeat" {
		t.Fatalf("want a heartbeat comment, got %+v", e)
	}
	for range 2 {
		s.runStart(t, "outlive-sse", "echo", user("hi"), nil)
		if got := statuses(st.untilTerminal()); !slices.Equal(got, []string{"running", "completed"}) {
			t.Fatalf("root lifecycle %v", got)
		}
	}
	st.Close()
	eventually(t, "the stream outlived its client", func() bool { return streamGoroutines() == watching })
}

// TestSSEStreamOverHTTP2: where the connection cannot be taken over
// (HTTP/2), the handler carries the stream as before: heartbeats, a run's
// events, and its end when the client goes.
func TestSSEStreamOverHTTP2(t *testing.T) {
	fe, ts, _ := unstartedServer(t, agent.Config{Heartbeat: 50 * time.Millisecond})
	ts.EnableHTTP2 = true
	ts.StartTLS()
	s := &server{URL: ts.URL, fe: fe, hc: ts.Client()}
	handlers := httpHandlers()
	st := s.openSSE(t, "h2", `{"channels":["lifecycle"]}`, nil)
	if st.resp.ProtoMajor != 2 {
		t.Fatalf("HTTP/%d", st.resp.ProtoMajor)
	}
	if e := st.next(true); !e.IsComment || e.Comment != "heartbeat" {
		t.Fatalf("want a heartbeat comment, got %+v", e)
	}
	s.runStart(t, "h2", "echo", user("hi"), nil)
	if got := statuses(st.untilTerminal()); !slices.Equal(got, []string{"running", "completed"}) {
		t.Fatalf("root lifecycle %v", got)
	}
	if httpHandlers() <= handlers {
		t.Fatal("no handler carries the HTTP/2 stream")
	}
	st.Close()
	eventually(t, "the stream's handler did not return after its client left", func() bool { return httpHandlers() <= handlers })
}

// TestSSEShutdownEndsTheBody: a stream the server ends (shutdown) ends
// its body properly, with the last chunk: the client reads to EOF, not
// to a connection cut mid-body.
func TestSSEShutdownEndsTheBody(t *testing.T) {
	s := newServer(t, agent.Config{})
	handlers := httpHandlers()
	st := s.openSSE(t, "shutdown-sse", `{"channels":["lifecycle"]}`, nil)
	eventually(t, "the stream's handler did not return", func() bool { return httpHandlers() <= handlers })
	s.fe.Shutdown()
	select {
	case <-st.done:
	case <-time.After(wait):
		t.Fatal("the stream did not end at shutdown")
	}
	if st.err != io.EOF {
		t.Fatalf("the body ended with %v, want io.EOF", st.err)
	}
}

// TestSSEStreamsEachGetEveryEvent: streams opened while a run goes on,
// each read at its own pace, every one of them over a writer that starts
// and stops as the events come (the stream's writer state machine): each
// gets every event of the thread from seq 1 in order, none twice, to the
// run's end, in time: no heartbeat (a minute apart) comes to wake a
// writer that missed its kick.
func TestSSEStreamsEachGetEveryEvent(t *testing.T) {
	s := newServer(t, agent.Config{Heartbeat: time.Minute})
	const streams, deltas = 12, 3000
	raws := make([]*rawStream, streams)
	for i := range streams / 2 {
		raws[i] = openRaw(t, http.DefaultClient, s, "many", "{"+everyChannel+"}")
	}
	s.runStart(t, "many", "stream", user("go"), map[string]any{"deltas": deltas})
	for i := streams / 2; i < streams; i++ { // mid-run: replay, then live
		raws[i] = openRaw(t, http.DefaultClient, s, "many", "{"+everyChannel+"}")
	}
	sums := make([]runSummary, streams)
	done := make(chan int, streams)
	for i, rs := range raws {
		go func() {
			defer func() { done <- i }()
			sums[i] = followQuietly(rs, i%3*100, time.Millisecond)
		}()
	}
	timeout := time.After(wait)
	for range streams {
		select {
		case <-done:
		case <-timeout:
			t.Fatal("a stream stalled")
		}
	}
	for i, sum := range sums {
		if sum.err != "" || sum.deltas != deltas || sum.terminal != "completed" {
			t.Errorf("stream %d: %d deltas, then %q at seq %d: %s", i, sum.deltas, sum.terminal, sum.last, sum.err)
		}
	}
}

// TestSSEStreamsSeeEveryRunEnd: many short runs, each ending while the
// streams' writers may be stopping (the window in which a kick can be
// missed): every stream sees every run's end without a heartbeat's help.
func TestSSEStreamsSeeEveryRunEnd(t *testing.T) {
	s := newServer(t, agent.Config{Heartbeat: time.Minute})
	const streams, runs = 8, 40
	var sts []*stream
	for range streams {
		sts = append(sts, s.openSSE(t, "ends", `{"channels":["lifecycle"]}`, nil))
	}
	for r := range runs {
		s.runStart(t, "ends", "stream", user("go"), map[string]any{"deltas": 5})
		for i, st := range sts {
			if got := statuses(st.untilTerminal()); !slices.Equal(got, []string{"running", "completed"}) {
				t.Fatalf("run %d, stream %d: root lifecycle %v", r, i, got)
			}
		}
	}
}

// TestShutdownDeliversRunEnds: streams open when the server begins to
// shut down go on while the run started here on their thread goes on
// (the bridge drains it), write every one of its events and its end, and
// then end: the SSE body with its last chunk, the WebSocket with close
// 1001. A stream of a thread with no run here ends at once.
func TestShutdownDeliversRunEnds(t *testing.T) {
	const deltas = 30
	s := newServer(t, agent.Config{})
	sse := s.openSSE(t, "drain-busy", `{"channels":["lifecycle","messages"]}`, nil)
	idle := s.openSSE(t, "drain-idle", `{"channels":["lifecycle"]}`, nil)
	w := s.dialWS(t, "drain-busy")
	w.send(map[string]any{"id": 1, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"messages", "lifecycle"}}})
	if r := w.response(1); r["type"] != "success" {
		t.Fatalf("subscribe: %v", r)
	}
	s.runStart(t, "drain-busy", "stream", user("go"), map[string]any{"deltas": deltas, "delay_ms": 10})
	var seen []envelope
	for len(seen) == 0 || !strings.Contains(string(seen[len(seen)-1].Params.Data), "content-block-delta") {
		seen = append(seen, sse.envelope())
	}
	s.fe.Shutdown() // the run has some 300 ms to go

	select {
	case <-idle.done:
	case <-time.After(wait):
		t.Fatal("the stream of a thread with no run here did not end at shutdown")
	}
	for {
		e, ok := <-sse.events
		if !ok {
			break
		}
		var env envelope
		if err := json.Unmarshal(e.Data, &env); err != nil {
			t.Fatalf("frame %q: %v", e.Data, err)
		}
		seen = append(seen, env)
	}
	<-sse.done
	if sse.err != io.EOF {
		t.Fatalf("the SSE body ended with %v, want io.EOF", sse.err)
	}
	if n, end := countDeltas(seen), seen[len(seen)-1]; n != deltas || !end.rootTerminal() || end.status() != "completed" {
		t.Fatalf("SSE: %d deltas, then %s %s; want %d, then the run's completed lifecycle", n, end.Method, end.status(), deltas)
	}

	var frames []envelope
	for {
		_ = w.c.SetReadDeadline(time.Now().Add(wait))
		_, b, err := w.c.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
				t.Fatalf("the WebSocket ended with %v, want close 1001", err)
			}
			break
		}
		var env envelope
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatalf("frame %s: %v", b, err)
		}
		frames = append(frames, env)
	}
	if n, end := countDeltas(frames), frames[len(frames)-1]; n != deltas || !end.rootTerminal() || end.status() != "completed" {
		t.Fatalf("WebSocket: %d deltas, then %s %s; want %d, then the run's completed lifecycle", n, end.Method, end.status(), deltas)
	}
}

// countDeltas counts the content-block-delta events among envs.
func countDeltas(envs []envelope) int {
	n := 0
	for _, e := range envs {
		if e.Method == "messages" && e.status() == "content-block-delta" {
			n++
		}
	}
	return n
}

// TestCloseEndsDrainingHTTP2Stream: over HTTP/2 (the handler carries the
// stream), a stream the shutdown left open for a hanging run gets the end
// of that run when Close cancels it, and ends; Close returns.
func TestCloseEndsDrainingHTTP2Stream(t *testing.T) {
	fe, ts, _ := unstartedServer(t, agent.Config{})
	ts.EnableHTTP2 = true
	ts.StartTLS()
	s := &server{URL: ts.URL, fe: fe, hc: ts.Client()}
	st := s.openSSE(t, "h2-drain", `{"channels":["lifecycle"]}`, nil)
	s.runStart(t, "h2-drain", "stream", user("go"), map[string]any{"hang": true, "deltas": 1})
	if e := st.envelope(); e.status() != "running" {
		t.Fatalf("first event %s %s", e.Method, e.status())
	}
	fe.Shutdown()
	select {
	case <-st.done:
		t.Fatal("the stream ended at shutdown, its run still going")
	case <-time.After(200 * time.Millisecond):
	}
	closed := make(chan struct{})
	go func() {
		fe.Close()
		close(closed)
	}()
	end := st.envelope()
	if !end.rootTerminal() {
		t.Fatalf("after Close: %s %s, want the run's end", end.Method, end.status())
	}
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("Close did not return")
	}
	<-st.done
}
