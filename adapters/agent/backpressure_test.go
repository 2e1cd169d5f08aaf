package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/internal/sse"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// tightBuffer is the socket buffer size of tight connections: a client
// that reads slowly slows the server's writes after a few KB, as over a
// real network, not after the megabytes loopback buffers take.
const tightBuffer = 64 << 10

// everyChannel subscribes to every event of the thread: seqs are contiguous.
const everyChannel = `"channels":["values","updates","messages","tools","lifecycle","input","checkpoints","tasks","custom"]`

// tightListener gives each accepted connection a small send buffer.
type tightListener struct{ net.Listener }

func (l tightListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(tightBuffer)
	}
	return c, err
}

// newTightServer is newServer on a tight listener, with a client whose
// connections have small receive buffers.
func newTightServer(t *testing.T, cfg agent.Config) (*server, *http.Client) {
	t.Helper()
	fe, ts, b := unstartedServer(t, cfg)
	ts.Listener = tightListener{ts.Listener}
	ts.Start()
	tr := &http.Transport{DialContext: tightDial}
	t.Cleanup(tr.CloseIdleConnections)
	return &server{URL: ts.URL, fe: fe, hc: http.DefaultClient, b: b}, &http.Client{Transport: tr}
}

// tightDial dials a connection with a small receive buffer.
func tightDial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(tightBuffer)
	}
	return c, err
}

// rawStream reads an SSE stream only when asked, a little at a time, so
// that a test that does not ask leaves the data in the socket.
type rawStream struct {
	body io.ReadCloser
	p    sse.Parser
	buf  []byte
	got  []sse.Event // parsed, not yet returned
}

// openRaw opens the thread's event stream with client; it is closed when
// the test ends, before the server (whose Close waits for the handler).
func openRaw(t *testing.T, client *http.Client, s *server, thread, body string) *rawStream {
	t.Helper()
	req, _ := http.NewRequest("POST", s.URL+"/threads/"+thread+"/stream/events", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("stream: HTTP %d", resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &rawStream{body: resp.Body, buf: make([]byte, 512)}
}

// next returns the next event or comment; an error when the stream ends.
func (rs *rawStream) next() (sse.Event, error) {
	for len(rs.got) == 0 {
		n, err := rs.body.Read(rs.buf)
		rs.got, _ = rs.p.Feed(rs.buf[:n], rs.got)
		if len(rs.got) == 0 && err != nil {
			return sse.Event{}, err
		}
	}
	e := rs.got[0]
	rs.got = rs.got[1:]
	return e, nil
}

// runSummary is what a reader saw of a run: every frame checked to be the
// next seq of the thread's events; err says what broke that, if anything.
type runSummary struct {
	deltas   int
	last     uint64
	terminal string // the root terminal lifecycle event, if seen
	err      string
}

// follow reads rs to the run's root terminal event, sleeping pause after
// each of the first slow events; it fails the test on anything but the
// thread's events in seq order from seq 1 (a gap report included).
func follow(t *testing.T, rs *rawStream, slow int, pause time.Duration) runSummary {
	t.Helper()
	sum := followQuietly(rs, slow, pause)
	if sum.err != "" {
		t.Fatal(sum.err)
	}
	return sum
}

// followQuietly is follow for any goroutine: what broke is in err.
func followQuietly(rs *rawStream, slow int, pause time.Duration) runSummary {
	var sum runSummary
	for i := 0; ; i++ {
		e, err := rs.next()
		if err != nil {
			sum.err = fmt.Sprintf("after seq %d (%d deltas): %v", sum.last, sum.deltas, err)
			return sum
		}
		if e.IsComment {
			continue
		}
		var env envelope
		if err := json.Unmarshal(e.Data, &env); err != nil || env.Type != "event" || env.Seq != sum.last+1 || e.ID != strconv.FormatUint(env.Seq, 10) {
			sum.err = fmt.Sprintf("after seq %d (%d deltas), frame %q", sum.last, sum.deltas, e.Data)
			return sum
		}
		sum.last = env.Seq
		if env.Method == "messages" && strings.Contains(string(env.Params.Data), `"content-block-delta"`) {
			sum.deltas++
		}
		if env.rootTerminal() {
			sum.terminal = env.status()
			return sum
		}
		if i < slow {
			time.Sleep(pause)
		}
	}
}

// TestSlowReaderGetsWholeRun: an unpaced run of 12,000 deltas, 12,000
// frames and more, reaches a subscriber that reads slowly at first whole
// and in order: the run waits for it rather than evict what it has not
// read. Before, the run filled the 10,000-event buffer while the reader
// slept, and the reader got "events after seq N are no longer buffered".
func TestSlowReaderGetsWholeRun(t *testing.T) {
	s, client := newTightServer(t, agent.Config{})
	rs := openRaw(t, client, s, "slow", "{"+everyChannel+"}")
	s.runStart(t, "slow", "stream", user("go"), map[string]any{"deltas": 12000})
	sum := follow(t, rs, 400, 5*time.Millisecond)
	if sum.deltas != 12000 || sum.terminal != "completed" {
		t.Fatalf("%d deltas, then %q at seq %d", sum.deltas, sum.terminal, sum.last)
	}
}

// TestStalledReaderIsCutOff: a subscriber that stops reading does not hold
// the run back (it reads the replay log, at its own pace) and is cut off
// by its write deadline; the run completes, whole for a reader that
// reads.
func TestStalledReaderIsCutOff(t *testing.T) {
	s, client := newTightServer(t, agent.Config{WriteTimeout: 300 * time.Millisecond})
	stalled := openRaw(t, client, s, "stall", "{"+everyChannel+"}")
	// The reader that reads has the usual buffers: a tight one, slowed by
	// delayed acknowledgements, could miss the short deadline itself.
	reading := openRaw(t, http.DefaultClient, s, "stall", "{"+everyChannel+"}")
	s.runStart(t, "stall", "stream", user("go"), map[string]any{"deltas": 12000})
	sum := follow(t, reading, 0, 0)
	if sum.deltas != 12000 || sum.terminal != "completed" {
		t.Fatalf("%d deltas, then %q at seq %d", sum.deltas, sum.terminal, sum.last)
	}
	// What the stalled reader's socket held, once its write deadline has
	// passed: the stream's start, up to where the server gave up on it,
	// and no end of the run.
	time.Sleep(3 * 300 * time.Millisecond)
	var got runSummary
	for {
		e, err := stalled.next()
		if err != nil {
			break
		}
		var env envelope
		if e.IsComment || json.Unmarshal(e.Data, &env) != nil {
			continue
		}
		if env.Type != "event" || env.Seq != got.last+1 {
			t.Fatalf("stalled reader: after seq %d, frame %q", got.last, e.Data)
		}
		got.last = env.Seq
		if env.rootTerminal() {
			t.Fatalf("the stalled reader got the run's end (seq %d): it was not stalled", env.Seq)
		}
	}
	if got.last == 0 || got.last >= sum.last {
		t.Fatalf("stalled reader read up to seq %d of %d", got.last, sum.last)
	}
}

// TestStalledWebSocketIsCutOff: a WebSocket subscription that stops
// reading does not hold the run back, and internal/wsconn cuts the
// connection off (1008); the run completes, whole for a reader that
// reads.
func TestStalledWebSocketIsCutOff(t *testing.T) {
	s, _ := newTightServer(t, agent.Config{WebSocket: wsconn.Config{WriteTimeout: 400 * time.Millisecond}})
	d := websocket.Dialer{NetDialContext: tightDial}
	c, _, err := d.Dial("ws"+strings.TrimPrefix(s.URL, "http")+"/threads/wsstall/stream/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := &ws{t: t, c: c}
	w.send(map[string]any{"id": 1, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"messages", "lifecycle"}}})
	if r := w.response(1); r["type"] != "success" {
		t.Fatalf("subscribe: %v", r)
	}
	reading := openRaw(t, http.DefaultClient, s, "wsstall", "{"+everyChannel+"}")
	s.runStart(t, "wsstall", "stream", user("go"), map[string]any{"deltas": 12000})
	sum := follow(t, reading, 0, 0)
	if sum.deltas != 12000 || sum.terminal != "completed" {
		t.Fatalf("%d deltas, then %q at seq %d", sum.deltas, sum.terminal, sum.last)
	}
	// Once its write deadline has passed, the stalled connection holds the
	// run's start, in order, then its end: the 1008 close frame, or (its
	// write blocked past the deadline too) the connection's close.
	time.Sleep(3 * 400 * time.Millisecond)
	var last uint64
	for {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		_, b, err := c.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.ClosePolicyViolation, websocket.CloseAbnormalClosure) {
				t.Fatalf("after seq %d: %v, want close 1008 or 1006", last, err)
			}
			break
		}
		var env envelope
		if json.Unmarshal(b, &env) != nil || env.Type != "event" || env.Seq <= last || env.rootTerminal() {
			t.Fatalf("stalled subscription: after seq %d, frame %s", last, b)
		}
		last = env.Seq
	}
	if last == 0 {
		t.Fatal("the stalled subscription got no event")
	}
}

// holdRun starts a run of 12,000 deltas, one a millisecond, on thread
// with a subscriber that does not read, and returns it going on: another
// subscriber, returned, has read 600 events of it. Readers hold no run
// back (doc.go), so the pace is what keeps the run going: unpaced, it
// ended before the test cancelled it about one time in ten (cancel: 404).
func holdRun(t *testing.T, s *server, client *http.Client, thread string) (run string, reading *rawStream) {
	t.Helper()
	openRaw(t, client, s, thread, "{"+everyChannel+"}")
	reading = openRaw(t, client, s, thread, "{"+everyChannel+"}")
	run, _ = s.runStart(t, thread, "stream", user("go"), map[string]any{"deltas": 12000, "delay_ms": 1})
	for i := 0; i < 600; i++ { // the buffer is 500 events; the stalled reader took a batch
		if _, err := reading.next(); err != nil {
			t.Fatal(err)
		}
	}
	return run, reading
}

// TestHeldRunCancelAndClose: a run going on beside a subscriber that does
// not read (its write deadline the default 30 s) ends at once when it is
// cancelled, and the frontend's Close waits neither for such a run nor
// for the subscriber.
func TestHeldRunCancelAndClose(t *testing.T) {
	s, client := newTightServer(t, agent.Config{})
	run, reading := holdRun(t, s, client, "cancel")
	start := time.Now()
	resp, err := http.Post(s.URL+"/threads/cancel/runs/"+run+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("cancel: %v %v", resp, err)
	}
	resp.Body.Close()
	for {
		e, err := reading.next()
		if err != nil {
			t.Fatalf("no end of the cancelled run: %v", err)
		}
		var env envelope
		if !e.IsComment && json.Unmarshal(e.Data, &env) == nil && env.rootTerminal() {
			if st := env.status(); st != "failed" {
				t.Fatalf("cancelled run ended %q", st)
			}
			break
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the cancelled run ended after %v", d)
	}

	holdRun(t, s, client, "close")
	closed := make(chan struct{})
	go func() { s.fe.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for the held run")
	}
}
