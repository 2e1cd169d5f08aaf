package responses_test

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

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestStalledReader: a client that asks for a long stream on
// /v1/responses, reads the headers and stops reading blocks neither the
// daemon nor another client: the other's stream is served whole while
// the stalled one is held, the stalled one is cut off by the write
// deadline (counted as a slow consumer), its run ends, and the goroutines
// return to what they were before it. (A Responses request carries no
// scripted parameters, so the long stream is the echo of a 6 MiB prompt,
// a 4 KiB word per delta.)
func TestStalledReader(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.WriteTimeout = time.Second
	inst := bridgetest.Start(t, &cfg)
	small := `{"model":"echo","stream":true,"input":"still served"}`
	stream(t, inst.URL, small) // warm up: connections, consumers, caches
	base := settledGoroutines()

	big := strings.Repeat(" "+strings.Repeat("x", 4095), 1536)
	conn, rd := stallRequest(t, inst.URL, "/v1/responses", `{"model":"echo","stream":true,"input":"`+big+`"}`)
	defer conn.Close()
	id := ""
	for id == "" { // the first event names the response
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the stalled client's first event: %v", err)
		}
		if m := firstID.FindStringSubmatch(line); m != nil {
			id = m[1]
		}
	}

	if got := stream(t, inst.URL, small); !strings.Contains(got, `"delta":" served"`) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("the other client's stream, while one is stalled:\n%s", got)
	}
	waitCutoffs(t, inst.URL, 1)
	waitNoRuns(t, inst)
	// The stored response says what became of it.
	resp, err := noKeepAlive.Get(inst.URL + "/v1/responses/" + id)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(got), `"status":"cancelled"`) {
		t.Fatalf("the stalled client's response is stored as %.300s, want status cancelled", got)
	}
	waitGoroutines(t, base)
}

// noKeepAlive is the tests' client: it keeps no connection (and no
// goroutine) open between requests.
var noKeepAlive = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// stream posts body to /v1/responses and returns the whole answer.
func stream(t *testing.T, base, body string) string {
	t.Helper()
	resp, err := noKeepAlive.Post(base+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v: %s", resp.StatusCode, err, out)
	}
	return string(out)
}

// stallRequest posts body to path over a raw TCP connection with a small
// receive buffer, reads the response's status line (the stream is live)
// and returns the connection, and a reader of what follows, neither to be
// read again (but for the first event).
func stallRequest(t *testing.T, base, path, body string) (net.Conn, *bufio.Reader) {
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

// waitCutoffs waits up to 60 s for /metrics to count n HTTP cut-offs.
func waitCutoffs(t *testing.T, base string, n int) {
	t.Helper()
	want := `interlingua_slow_consumer_cutoffs_total{protocol="http"} ` + strconv.Itoa(n) + "\n"
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := noKeepAlive.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(m), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 60 s", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitNoRuns waits up to 20 s for the instance to have no run.
func waitNoRuns(t *testing.T, inst *bridgetest.Instance) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for inst.Bridge().Running() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a run still running 20 s after its client was cut off")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settledGoroutines is the goroutine count once it stops falling.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return n
		}
		n = m
	}
	return n
}

// waitGoroutines waits up to 10 s for the goroutine count to be back at
// base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines 10 s after the cut-off, %d before the stalled client:\n%s",
				runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
