package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// floodRSSBound is the stated memory bound of the daemon under the flood.
const floodRSSBound = 512 << 20

// 1,000 connections sending garbage (to the HTTP parser and, upgraded, to
// the Glide WebSocket) and a client that never reads its stream: the daemon
// stays under floodRSSBound and a well-behaved client's run completes.
func TestFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("flood test skipped in -short")
	}
	bin := buildBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", t.TempDir(), "--shutdown-timeout", "1s", "--log-level", "error",
		"--set", "body_timeout=1s", "--set", "write_timeout=1s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr
	waitReady(t, base)

	// A client that asks for a long stream and never reads it.
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	body := `{"target":"stream","parameters":{"deltas":5000000},"inputs":[]}`
	fmt.Fprintf(stalled, "POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	garbage := []byte("\x00\xff GARBAGE \r\n\r\n{{{{ not http at all\x16\x03\x01")
	for i := range 1000 {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if i%2 == 0 {
				_, _ = c.Write(garbage)
				return
			}
			// A WebSocket upgrade to Glide, then garbage frames.
			fmt.Fprintf(c, "GET /v1/language/echo/chatStream HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
			r := bufio.NewReader(c)
			if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, "101") {
				return
			}
			// A masked text frame of garbage, then a frame header that
			// claims 2^62 bytes.
			_, _ = c.Write([]byte{0x81, 0x85, 1, 2, 3, 4, 'g' ^ 1, 'a' ^ 2, 'r' ^ 3, 'b' ^ 4, '!' ^ 1})
			_, _ = c.Write([]byte{0x82, 0xff, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4})
		})
	}
	wg.Wait()
	slowBodies := floodSlowBodies(t, addr, 200)
	stalledTriton := floodStalledReader(t, addr)
	defer stalledTriton.Close()

	// A well-behaved client is unaffected.
	r := openStream(t, "POST", base+"/v1/runs", `{"target":"demo-agent","inputs":[]}`)
	evs := r.untilTerminal()
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	if st, _ := canonical.TerminalOf(evs[len(evs)-1]); st != canonical.StatusCompleted {
		t.Fatalf("good client's run ended %v", evs[len(evs)-1])
	}
	rss := peakRSS(t, cmd.Process.Pid)
	t.Logf("daemon peak RSS under flood: %d MiB (bound %d MiB), %d garbage connections", rss>>20, floodRSSBound>>20, len(conns))
	if rss > floodRSSBound {
		t.Fatalf("daemon peak RSS %d MiB exceeds the %d MiB bound", rss>>20, floodRSSBound>>20)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("daemon died under the flood: %v", err)
	}
	for _, c := range conns {
		c.Close()
	}
	// Every body that stopped arriving was answered after body_timeout.
	for i, c := range slowBodies {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.Contains(line, " 400 ") && !strings.Contains(line, " 408 ") {
			t.Fatalf("slow body %d: %q, %v; want a 4xx after body_timeout", i, line, err)
		}
		c.Close()
	}
	// The Triton client that stopped reading was cut off after write_timeout.
	waitMetric(t, base, `interlingua_slow_consumer_cutoffs_total{protocol="http"}`)
}

// peakRSS reads VmHWM (peak resident set) of a process.
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// floodSlowBodies opens n connections that each send a request's headers
// and the first chunk of its body, then stop.
func floodSlowBodies(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var out []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"tar\r\n")
		out = append(out, c)
	}
	return out
}

// floodStalledReader asks for a long Triton stream and never reads it.
func floodStalledReader(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"text_input":"x","stream":true,"parameters":{"deltas":5000000,"delta_text":"` + strings.Repeat("y", 1024) + `"}}`
	fmt.Fprintf(c, "POST /v2/models/stream/generate_stream HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return c
}

// waitMetric waits up to 20 s for /metrics to show the series.
func waitMetric(t *testing.T, base, series string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), series) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not in /metrics within 20 s", series)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
