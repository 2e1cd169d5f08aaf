package bridgetest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// noKeepAlive is the helpers' HTTP client: no connection outlives its
// request, so a goroutine count taken after it is the server's.
var noKeepAlive = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// StallRequest posts body to path over a raw TCP connection with a small
// receive buffer, reads the response's status line (the stream is live)
// and returns the connection, and a reader of what follows: a client that
// then stops reading, for slow-consumer tests.
func StallRequest(t testing.TB, base, path, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetReadBuffer(4096) // the kernel holds little for us
	}
	if _, err := io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	rd := bufio.NewReaderSize(conn, 64)
	line, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("stalled client's status line %q: %v", line, err)
	}
	return conn, rd
}

// Post posts body to base+path and returns the whole answer, failing the
// test on any status but 200.
func Post(t testing.TB, base, path, body string) string {
	t.Helper()
	resp, err := noKeepAlive.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v: %s", resp.StatusCode, err, out)
	}
	return string(out)
}

// MetricLines returns the lines of base's /metrics that start with prefix
// and contain every one of with.
func MetricLines(t testing.TB, base, prefix string, with ...string) []string {
	t.Helper()
	resp, err := noKeepAlive.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out []string
next:
	for _, l := range strings.Split(string(m), "\n") {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		for _, w := range with {
			if !strings.Contains(l, w) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// WaitCutoffs waits up to 60 s for /metrics to count n slow-consumer
// cut-offs of HTTP streams.
func WaitCutoffs(t testing.TB, base string, n int) {
	t.Helper()
	want := `interlingua_slow_consumer_cutoffs_total{protocol="http"} ` + strconv.Itoa(n)
	deadline := time.Now().Add(60 * time.Second)
	for len(MetricLines(t, base, want)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 60 s", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitNoRuns waits up to 20 s for the instance to have no run.
func (inst *Instance) WaitNoRuns(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for inst.Bridge().Running() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a run still running 20 s after its client was cut off")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SettledGoroutines is the count of the project's goroutines (ourGoroutines)
// once it stops falling.
func SettledGoroutines() int {
	n := ourGoroutines()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		m := ourGoroutines()
		if m >= n {
			return n
		}
		n = m
	}
	return n
}

// WaitGoroutines waits up to 10 s for the project's goroutines to be back
// at base, and fails with every goroutine's stack if they are not.
func WaitGoroutines(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ourGoroutines() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d of the project's goroutines 10 s after the cut-off, %d before the stalled client:\n%s",
				ourGoroutines(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ourGoroutines counts the goroutines running the project's code: a
// stream's handler, run or writer left behind has its frames. The NATS
// client and server start goroutines of their own when they please (the
// JetStream client's pending-ack watcher at its first asynchronous
// publish, a stream's flusher), which a count of every goroutine took for
// the stalled client's leftovers.
func ourGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/interlingua-dev/interlingua/") {
			count++
		}
	}
	return count
}

// Stall is a slow-consumer test of one streaming endpoint (CheckStall).
type Stall struct {
	// Path is the endpoint; Small a request for a short stream, Long one
	// for a stream far longer than the socket buffers hold.
	Path, Small, Long string
	// Served reports whether the answer to Small is whole.
	Served func(answer string) bool
	// Target, when set, is Long's target: its one run must not end
	// completed.
	Target string
	// Stalled, when set, reads what the test needs of the stalled stream
	// (its first event) before the client stops reading.
	Stalled func(rd *bufio.Reader)
}

// CheckStall asserts that a client that asks for s.Long, reads the
// headers and stops reading blocks neither the daemon nor another client:
// the other's stream (s.Small) is served whole while the stalled one is
// held, the stalled one is cut off by the write deadline (counted as a
// slow consumer), its run ends, and the goroutines return to what they
// were before it. The instance's write timeout should be short.
func (inst *Instance) CheckStall(t testing.TB, s Stall) {
	t.Helper()
	Post(t, inst.URL, s.Path, s.Small) // warm up: connections, consumers, caches
	base := SettledGoroutines()
	conn, rd := StallRequest(t, inst.URL, s.Path, s.Long)
	defer conn.Close()
	if s.Stalled != nil {
		s.Stalled(rd)
	}
	if got := Post(t, inst.URL, s.Path, s.Small); !s.Served(got) {
		t.Fatalf("the other client's stream, while one is stalled:\n%s", got)
	}
	WaitCutoffs(t, inst.URL, 1)
	inst.WaitNoRuns(t)
	if s.Target != "" {
		got := MetricLines(t, inst.URL, "interlingua_runs_total{", `target="`+s.Target+`"`)
		if len(got) != 1 || strings.Contains(got[0], `outcome="completed"`) {
			t.Fatalf("the stalled client's run: %q, want one that did not complete", got)
		}
	}
	WaitGoroutines(t, base)
}
