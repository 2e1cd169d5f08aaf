package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

type daemon struct {
	cmd  *exec.Cmd
	base string
	log  *syncBuffer
}

// syncBuffer is a log sink safe to read while the process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startDaemon(t *testing.T, bin, natsURL string, args ...string) *daemon {
	t.Helper()
	addr := freeAddr(t)
	all := append([]string{"serve", "--listen", addr, "--data-dir", t.TempDir(), "--nats-url", natsURL,
		"--set", "nats.heartbeat=100ms", "--shutdown-timeout", "2s"}, args...)
	d := &daemon{cmd: exec.Command(bin, all...), base: "http://" + addr, log: &syncBuffer{}}
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
			_ = d.cmd.Wait()
		}
	})
	waitReady(t, d.base)
	return d
}

func (d *daemon) kill9() {
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
}

// eventReader reads NDJSON canonical events from a response.
type eventReader struct {
	t    *testing.T
	body io.ReadCloser
	sc   *bufio.Scanner
}

func openStream(t *testing.T, method, url, body string) *eventReader {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &eventReader{t: t, body: resp.Body, sc: bufio.NewScanner(resp.Body)}
}

func (r *eventReader) next() (*canonical.Event, bool) {
	if !r.sc.Scan() {
		return nil, false
	}
	ev := &canonical.Event{}
	if err := protojson.Unmarshal(r.sc.Bytes(), ev); err != nil {
		r.t.Fatalf("%q: %v", r.sc.Text(), err)
	}
	return ev, true
}

// untilTerminal reads to the run's terminal event.
func (r *eventReader) untilTerminal() []*canonical.Event {
	var out []*canonical.Event
	for {
		ev, ok := r.next()
		if !ok {
			r.t.Fatalf("stream ended after %d events without a terminal event", len(out))
		}
		out = append(out, ev)
		if _, ok := canonical.TerminalOf(ev); ok {
			return out
		}
	}
}

func TestClusterClientOnAReplicaOnB(t *testing.T) {
	_, _, a, _ := clientAndOwner(t)
	r := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","parameters":{"deltas":500},"inputs":[]}`)
	evs := r.untilTerminal()
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 506 {
		t.Fatalf("%d events, want 506", len(evs))
	}
	for i, ev := range evs {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d: out of order", i, ev.GetSeq())
		}
	}
}

// The instance a client is attached to dies mid-run; the client reconnects
// to the other with its last seq and gets every remaining event once. The
// run's owner cancels it once the dead instance's client heartbeats stop
// (TestClusterClientInstanceKilledCancelsRun), so the resumed stream ends
// cancelled, or completed if the run finished first.
func TestClusterClientInstanceKilled(t *testing.T) {
	_, _, a, b := clientAndOwner(t)
	r := openStream(t, "POST", a.base+"/v1/runs", `{"target":"stream","threadId":"t-resume","parameters":{"deltas":100,"delay_ms":10},"inputs":[]}`)
	var last uint64
	for i := 0; i < 20; i++ {
		ev, ok := r.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		last = ev.GetSeq()
	}
	a.kill9()
	r2 := openStream(t, "GET", fmt.Sprintf("%s/v1/threads/t-resume/events?since=%d", b.base, last), "")
	rest := r2.untilTerminal()
	for i, ev := range rest {
		if ev.GetSeq() != last+1+uint64(i) {
			t.Fatalf("resumed event %d has seq %d, want %d", i, ev.GetSeq(), last+1+uint64(i))
		}
	}
	switch st, _ := canonical.TerminalOf(rest[len(rest)-1]); st {
	case canonical.StatusCancelled:
	case canonical.StatusCompleted:
		if got := last + uint64(len(rest)); got != 106 {
			t.Fatalf("saw %d events in all, want 106", got)
		}
	default:
		t.Fatalf("run ended %v", rest[len(rest)-1])
	}
}

// The run's owner dies: its client and observers get failed/unavailable
// once the heartbeat timeout passes, instead of hanging.
func TestClusterOwnerKilled(t *testing.T) {
	_, _, a, b := clientAndOwner(t)
	r := openStream(t, "POST", a.base+"/v1/runs", `{"target":"echo","threadId":"t-owner","parameters":{"hang":true},"inputs":[]}`)
	if _, ok := r.next(); !ok {
		t.Fatal("no first event")
	}
	obs := openStream(t, "GET", a.base+"/v1/threads/t-owner/events", "")
	if _, ok := obs.next(); !ok {
		t.Fatal("observer saw nothing")
	}
	b.kill9()
	for name, s := range map[string]*eventReader{"client": r, "observer": obs} {
		evs := s.untilTerminal()
		lc := evs[len(evs)-1].GetLifecycle()
		if lc.GetStatus() != canonical.StatusFailed || canonical.Code(lc.GetError().GetCode()) != canonical.CodeUnavailable {
			t.Fatalf("%s: run ended %v, want failed/unavailable", name, lc)
		}
	}
}

// nats-server restarts mid-run: readiness goes false then true, the local
// run completes, the daemon does not crash.
func TestClusterNATSRestart(t *testing.T) {
	bin := buildBinary(t)
	n := bridgetest.StartNATSProcess(t)
	d := startDaemon(t, bin, n.URL())
	r := openStream(t, "POST", d.base+"/v1/runs", `{"target":"stream","parameters":{"deltas":100,"delay_ms":10},"inputs":[]}`)
	r.next()
	n.Kill()
	waitStatus(t, d.base+"/readyz", 503)
	n.Start(t)
	waitStatus(t, d.base+"/readyz", 200)
	evs := r.untilTerminal()
	if st, _ := canonical.TerminalOf(evs[len(evs)-1]); st != canonical.StatusCompleted {
		t.Fatalf("run ended %v", evs[len(evs)-1])
	}
	if err := d.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("daemon is gone (%v):\n%s", err, d.log)
	}
	if strings.Contains(d.log.String(), "panic") {
		t.Fatalf("daemon log has a panic:\n%s", d.log)
	}
}

func waitStatus(t *testing.T, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never answered %d", url, want)
}
