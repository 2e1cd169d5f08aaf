package agent_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/canonical"
)

// countingTransport counts the event streams opened through it.
type countingTransport struct {
	http.RoundTripper
	streams atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/stream/events") {
		c.streams.Add(1)
	}
	return c.RoundTripper.RoundTrip(r)
}

// streamRequest is a run of the scripted stream target: deltas "tok ".
func streamRequest(thread, run string, deltas int) *canonical.Request {
	req := request(thread, "stream")
	req.RunId += "-" + run
	req.Parameters = map[string]*structpb.Value{"deltas": structpb.NewNumberValue(float64(deltas))}
	return req
}

// wantStreamRun checks a stream run's events: every delta, then completed.
func wantStreamRun(t *testing.T, name string, events []*canonical.Event, deltas int) {
	t.Helper()
	text, st, code, msg := outcome(t, events)
	if st != canonical.StatusCompleted || text != strings.Repeat("tok ", deltas) {
		t.Fatalf("%s: ended %v %v %q with %d deltas' text (want %d, completed)", name, st, code, msg, strings.Count(text, "tok "), deltas)
	}
}

// TestBackendKeptStreamIsDrained (agent:agent): the backend's event
// stream, kept between its runs of a thread, does not hold back a run
// another client starts on the thread meanwhile, upstream our frontend,
// which waits for its live readers: the kept stream is read, and what
// comes discarded. That run of 20,000 deltas, more than the upstream's
// buffer and the sockets' (small here, as over a network) hold, ends
// promptly: undrained, it waited for the upstream's 30 s write deadline
// to cut the kept stream off. The thread's next run through the backend
// reads on from the same stream and gets exactly its own events.
func TestBackendKeptStreamIsDrained(t *testing.T) {
	// A UUID: the backend's upstream thread is the client's own id.
	const thread, theirs = "0196f3a0-7c1e-7000-8000-00000000d8a1", 20_000
	s, client := newTightServer(t, agent.Config{})
	counted := &countingTransport{RoundTripper: client.Transport}
	b := keepBackend(t, agent.BackendConfig{URL: s.URL, HTTPClient: &http.Client{Transport: counted}})
	wantStreamRun(t, "run 1", collect(t, b, streamRequest(thread, "1", 30)), 30)
	if n := agent.KeptStreams(b); n != 1 {
		t.Fatalf("after run 1, %d streams kept, want 1", n)
	}

	start := time.Now()
	_, applied := s.runStart(t, thread, "stream", user("go"), map[string]any{"deltas": theirs})
	end := s.awaitEnd(t, thread, applied)
	if d := time.Since(start); d > wait {
		t.Fatalf("another client's run on the thread took %v (the kept stream held it back)", d)
	}
	if end < applied+theirs {
		t.Fatalf("another client's run ended at seq %d, after %d: fewer events than its deltas", end, applied)
	}

	wantStreamRun(t, "run 2", collect(t, b, streamRequest(thread, "2", 50)), 50)
	if n := counted.streams.Load(); n != 1 {
		t.Fatalf("%d event streams opened for the backend's two runs, want 1 (the kept one)", n)
	}
}

// TestBackendDropsBrokenKeptStream: a kept stream whose drain reads an
// error frame or a jump in seqs (a run another client started upstream),
// or that the upstream ends, is closed and no longer kept; the thread's
// next run opens a new one and completes.
func TestBackendDropsBrokenKeptStream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other func(f *runFrames)
	}{
		{"error frame", func(f *runFrames) {
			f.begin().raw(`{"type":"error","id":null,"error":"resume_gap","message":"missed events"}`)
		}},
		{"seq jump", func(f *runFrames) {
			f.begin()
			f.seq += 3
			f.text("a").finish()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int64
			url := startBufferless(t, func(after uint64) ([][]byte, uint64) {
				f := &runFrames{seq: after}
				if runs.Add(1) == 2 { // the other client's
					tc.other(f)
				} else {
					f.begin().text("a").finish()
				}
				return f.out, f.seq
			})
			b := newBackend(t, url, "sse")
			collect(t, b, streamRequest("dropped", "1", 1))
			resp, err := http.Post(url+"/threads/dropped/commands", "application/json", strings.NewReader(`{"id":1,"method":"run.start","params":{}}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			awaitNoneKept(t, b, tc.name)
			if text, st, code, msg := outcome(t, collect(t, b, streamRequest("dropped", "3", 1))); text != "a" || st != canonical.StatusCompleted {
				t.Fatalf("the next run: text %q, ended %v %v %q", text, st, code, msg)
			}
		})
	}
	t.Run("stream ended", func(t *testing.T) {
		ts, streams := streamCountingPeer(t)
		b := keepBackend(t, agent.BackendConfig{URL: ts.URL})
		collect(t, b, request("ended", "failing-agent"))
		ts.CloseClientConnections()
		awaitNoneKept(t, b, "stream ended")
		next := request("ended", "failing-agent")
		next.RunId += "-2"
		collect(t, b, next)
		if n := streams.Load(); n != 2 {
			t.Fatalf("%d event streams opened, want 2", n)
		}
	})
}

// awaitNoneKept waits until b keeps no stream and no drain runs.
// (Tests do not run in parallel: every drain is of the test's backends.)
func awaitNoneKept(t *testing.T, b *agent.Backend, name string) {
	t.Helper()
	for deadline := time.Now().Add(wait); agent.KeptStreams(b) != 0 || drains() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d streams still kept, %d drains running", name, agent.KeptStreams(b), drains())
		}
	}
}

// drains counts the goroutines draining a kept stream.
func drains() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "created by github.com/interlingua-dev/interlingua/adapters/agent.(*Backend).startDrain")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestBackendEvictionStopsDrain: a kept stream evicted, by KeepStreamIdle
// or by the backend's Close, has its drain stopped.
func TestBackendEvictionStopsDrain(t *testing.T) {
	ts, _ := streamCountingPeer(t)
	idle := keepBackend(t, agent.BackendConfig{URL: ts.URL, KeepStreamIdle: 50 * time.Millisecond})
	collect(t, idle, request("evicted-idle", "failing-agent"))
	awaitNoneKept(t, idle, "idle")

	b := keepBackend(t, agent.BackendConfig{URL: ts.URL})
	for i := range 3 {
		collect(t, b, request(fmt.Sprintf("evicted-%d", i), "failing-agent"))
	}
	if n, d := agent.KeptStreams(b), drains(); n != 3 || d != 3 {
		t.Fatalf("%d streams kept, %d drains running; want 3 and 3", n, d)
	}
	b.Close()
	awaitNoneKept(t, b, "closed") // a drain Close waited for may still be returning
}

// splitServer is an agent-protocol thread server with one event stream
// at a time, written raw: a test can leave an event half written on it.
type splitServer struct {
	raw  chan []byte // bytes for the open stream
	mu   sync.Mutex
	seq  uint64
	tail []byte // written before the next run's frames
}

func startSplitServer(t *testing.T) (*splitServer, string) {
	t.Helper()
	u := &splitServer{raw: make(chan []byte, subscriberQueue)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /threads/{thread}/commands", u.command)
	mux.HandleFunc("POST /threads/{thread}/stream/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for {
			if rc.Flush() != nil {
				return
			}
			select {
			case b := <-u.raw:
				if _, err := w.Write(b); err != nil {
					return
				}
			case <-r.Context().Done():
				return
			}
		}
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return u, ts.URL
}

// command runs a run: the tail left, then begin, "a", finish.
func (u *splitServer) command(w http.ResponseWriter, _ *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tail != nil {
		u.raw <- u.tail
		u.tail = nil
	}
	after := u.seq
	f := (&runFrames{seq: after}).begin().text("a").finish()
	for _, fr := range f.out {
		u.raw <- fmt.Appendf(nil, "data: %s\n\n", fr)
	}
	u.seq = f.seq
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"type":"success","id":2,"result":{"run_id":"run-%d"},"meta":{"applied_through_seq":%d}}`, after, after)
}

// half writes the first of the two data lines of another client's event
// on the stream, the second to come before the next run's frames: read
// alone, by a parser that did not see the first, it is an event whose
// data is not JSON.
func (u *splitServer) half() {
	u.mu.Lock()
	defer u.mu.Unlock()
	f := (&runFrames{seq: u.seq}).text("theirs")
	u.seq = f.seq
	first, second, _ := strings.Cut(string(f.out[0]), `,"method"`)
	u.raw <- []byte("data: " + first + "\n")
	u.tail = []byte(`data: ,"method"` + second + "\n\n")
}

// TestBackendKeptStreamHalfEvent: the drain read half of an event (another
// client's) when the thread's next run takes the stream; the run reads on
// from that point, with the drain's parser: the event's rest completes it
// (skipped, before the command's seq) and the run's own events follow,
// decoded whole.
func TestBackendKeptStreamHalfEvent(t *testing.T) {
	u, url := startSplitServer(t)
	b := newBackend(t, url, "sse")
	for run := range 2 {
		if run == 1 {
			u.half()
			time.Sleep(50 * time.Millisecond) // the drain reads it (if not yet, the run does: the same bytes)
		}
		events := collect(t, b, streamRequest("half", strconv.Itoa(run), 1))
		if text, st, code, msg := outcome(t, events); text != "a" || st != canonical.StatusCompleted {
			t.Fatalf("run %d: text %q, ended %v %v %q", run, text, st, code, msg)
		}
		if n := agent.KeptStreams(b); n != 1 {
			t.Fatalf("run %d: %d streams kept, want 1", run, n)
		}
	}
}
