package bridge_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// replayServer is an instance with API keys a and b, key a allowed
// maxObservers observers (0: the default), and a finished echo run on each
// key's thread (ta, tb).
type replayServer struct {
	t      *testing.T
	inst   *bridgetest.Instance
	client *http.Client
}

func startReplayServer(t *testing.T, maxObservers int) *replayServer {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{
		{Name: "a", Hash: bridge.KeyDigest("key-a"), MaxObservers: maxObservers},
		{Name: "b", Hash: bridge.KeyDigest("key-b")},
	}
	s := &replayServer{t: t, inst: bridgetest.Start(t, &cfg), client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	for key, thread := range map[string]string{"key-a": "ta", "key-b": "tb"} {
		req, _ := http.NewRequest("POST", s.inst.URL+"/v1/runs", strings.NewReader(`{"target":"echo","threadId":"`+thread+`","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "RUN_STATUS_COMPLETED") {
			t.Fatalf("run on %s: %d %s", thread, resp.StatusCode, body)
		}
	}
	return s
}

// open starts key's replay of thread from seq 0 and returns once the
// response headers are in, or fails the test after 5s. The caller closes
// the body.
func (s *replayServer) open(key, thread string) *http.Response {
	s.t.Helper()
	ctx, cancel := context.WithCancel(s.t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", s.inst.URL+"/v1/threads/"+thread+"/events?since=0", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	timer := time.AfterFunc(5*time.Second, cancel)
	defer timer.Stop()
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
		s.t.Fatalf("%s's replay of %s: no response headers within 5s: %v", key, thread, err)
	}
	return resp
}

// consumers is the replay stream's consumer count.
func (s *replayServer) consumers() int {
	s.t.Helper()
	st, err := s.inst.Fabric().JetStream().Stream(s.t.Context(), bridge.EventsStream)
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	return info.State.Consumers
}

// readEvents reads n NDJSON lines from resp within 5s.
func readEvents(t *testing.T, resp *http.Response, n int) []string {
	t.Helper()
	timer := time.AfterFunc(5*time.Second, func() { resp.Body.Close() })
	defer timer.Stop()
	r := bufio.NewReader(resp.Body)
	var lines []string
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d of %d events: %v", len(lines), n, err)
		}
		lines = append(lines, line)
	}
	return lines
}

// waitSettled waits up to 10s for what() to be at most limit.
func waitSettled(t *testing.T, name string, limit int, what func() int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for what() > limit {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d after 10s, want at most %d", name, what(), limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A client that connects, takes the headers and leaves, 1,050 times (more
// than the 1,000 consumers the embedded server allows a stream), leaves no
// consumer, observer slot or goroutine behind, and another key's replay
// then works at once.
func TestShortReplaysLeaveNothingBehind(t *testing.T) {
	s := startReplayServer(t, 0)
	for _, key := range []string{"key-a", "key-b"} {
		resp := s.open(key, "t"+key[len(key)-1:])
		readEvents(t, resp, 1)
		resp.Body.Close()
	}
	waitSettled(t, "consumers after the warm-up", 0, s.consumers)
	baseGoroutines := runtime.NumGoroutine()
	for i := range 1050 {
		resp := s.open("key-a", "ta")
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("replay %d: status %d", i, resp.StatusCode)
		}
	}
	start := time.Now()
	resp := s.open("key-b", "tb")
	lines := readEvents(t, resp, 7)
	resp.Body.Close()
	if !strings.Contains(lines[0], `"threadId":"tb"`) || !strings.Contains(lines[0], `"seq":"1"`) || !strings.Contains(lines[6], "RUN_STATUS_COMPLETED") {
		t.Fatalf("key b's replay: %q", lines)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("key b's replay took %v", d)
	}
	waitSettled(t, "replay stream consumers", 0, s.consumers)
	waitSettled(t, "goroutines", baseGoroutines+5, runtime.NumGoroutine)
	t.Logf("goroutines: %d before the 1,050 replays, %d after; key b's replay of 7 events took %v", baseGoroutines, runtime.NumGoroutine(), time.Since(start))
}

// Key a at its max_observers is refused in the native error form while
// key b's replay still works; a closed replay gives its slot back.
func TestObserverLimitIsPerKey(t *testing.T) {
	s := startReplayServer(t, 2)
	held := []*http.Response{s.open("key-a", "ta"), s.open("key-a", "ta")}
	for _, resp := range held {
		defer resp.Body.Close()
		readEvents(t, resp, 1)
	}
	refused := s.open("key-a", "ta")
	closer := time.AfterFunc(5*time.Second, func() { refused.Body.Close() })
	body, _ := io.ReadAll(refused.Body) // a stream, were it admitted: cut at 5s
	closer.Stop()
	refused.Body.Close()
	want := `{"code":"resource_exhausted","message":"API key \"a\" has 2 observers open (max_observers)"}` + "\n"
	if refused.StatusCode != 429 || string(body) != want {
		t.Fatalf("key a's third replay: %d %s, want 429 %s", refused.StatusCode, body, want)
	}
	other := s.open("key-b", "tb")
	defer other.Body.Close()
	if lines := readEvents(t, other, 7); !strings.Contains(lines[6], "RUN_STATUS_COMPLETED") {
		t.Fatalf("key b's replay: %q", lines)
	}
	held[0].Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := s.open("key-a", "ta")
		if resp.StatusCode == 200 {
			readEvents(t, resp, 1)
			resp.Body.Close()
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("key a still refused 10s after closing a replay: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An observer whose context ends is shut without Close: its consumer is
// deleted and its key's slot given back.
func TestObserverEndsWithItsContext(t *testing.T) {
	s := startReplayServer(t, 0)
	a := &canonical.Principal{Name: "a", MaxObservers: 1}
	ctx, cancel := context.WithCancel(canonical.WithPrincipal(t.Context(), a))
	o, err := s.inst.Bridge().Observe(ctx, "ta-direct", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.consumers(); n != 1 {
		t.Fatalf("%d consumers with one observer open", n)
	}
	if _, err := s.inst.Bridge().Observe(canonical.WithPrincipal(t.Context(), a), "ta-direct", 0); err == nil || canonical.AsError(err).Code != canonical.CodeResourceExhausted {
		t.Fatalf("second observer at max_observers 1: %v", err)
	}
	cancel()
	if _, err := o.Recv(); err == nil {
		t.Fatal("Recv after the context ended: no error")
	}
	waitSettled(t, "consumers", 0, s.consumers)
	// The slot is given back just after the consumer's deletion returns.
	var o2 canonical.Stream
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if o2, err = s.inst.Bridge().Observe(canonical.WithPrincipal(t.Context(), a), "ta-direct", 0); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("observer after the first one's context ended: %v", err)
		}
	}
	if err := o2.Close(); err != nil {
		t.Fatal(err)
	}
	_ = o.Close() // after the context's end: a no-op
	waitSettled(t, "consumers", 0, s.consumers)
}

// A replay of a thread with no events yet sends its headers at once.
func TestReplayOfEmptyThreadSendsHeaders(t *testing.T) {
	s := startReplayServer(t, 0)
	resp := s.open("key-a", "fresh-thread")
	defer resp.Body.Close()
	if got := fmt.Sprint(resp.StatusCode, " ", resp.Header.Get("Content-Type")); got != "200 application/x-ndjson" {
		t.Fatalf("got %s", got)
	}
}

// The replay stream's own consumer limit, which every key shares, is
// ResourceExhausted too, not a fault of the fabric.
func TestReplayStreamConsumerLimit(t *testing.T) {
	s := startReplayServer(t, 0)
	js := s.inst.Fabric().JetStream()
	for i := 0; ; i++ {
		_, err := js.CreateConsumer(t.Context(), bridge.EventsStream, jetstream.ConsumerConfig{
			Name: fmt.Sprintf("filler-%d", i), FilterSubject: s.inst.Fabric().Prefix() + ".events.none.*", MemoryStorage: true})
		if errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
			break
		}
		if err != nil || i > 100_000 {
			t.Fatalf("filler consumer %d: %v", i, err)
		}
	}
	resp := s.open("key-a", "ta")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The NATS error (err_code=10026 ...) goes to the log, not the client.
	want := `{"code":"resource_exhausted","message":"the replay log has as many readers as it takes (observers of every key on every instance)"}` + "\n"
	if resp.StatusCode != 429 || string(body) != want {
		t.Fatalf("replay at the stream's consumer limit: %d %s, want 429 %s", resp.StatusCode, body, want)
	}
}
