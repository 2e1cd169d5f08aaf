package bridge_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// agentFrames reads an agent-protocol SSE stream's data lines until n root
// terminal lifecycle events have passed.
func agentFrames(t *testing.T, sc *bufio.Scanner, n int) []string {
	t.Helper()
	var out []string
	for n > 0 && sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		out = append(out, line)
		var env struct {
			Method string
			Params struct {
				Namespace []string
				Data      struct{ Event string }
			}
		}
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		switch env.Params.Data.Event {
		case "completed", "failed", "interrupted":
			if env.Method == "lifecycle" && len(env.Params.Namespace) == 0 {
				n--
			}
		}
	}
	if n > 0 {
		t.Fatalf("stream ended early (%v) after %d frames", sc.Err(), len(out))
	}
	return out
}

func agentCommand(t *testing.T, base, thread, body string) map[string]any {
	t.Helper()
	resp, err := httpClient.Post(base+"/threads/"+thread+"/commands", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func agentStream(t *testing.T, base, thread string) *bufio.Scanner {
	t.Helper()
	resp, err := httpClient.Post(base+"/threads/"+thread+"/stream/events", "application/json",
		strings.NewReader(`{"channels":["lifecycle","messages","values","tools"]}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	return sc
}

// An agent-protocol thread across instances on one nats-server: the client
// starts a run on A, which hosts no backend (the run itself is placed on
// B); a subscriber of the thread on B receives the run live, fed from
// NATS, frame for frame as A's subscriber does; a cancel sent to B reaches
// the run's thread on A.
func TestAgentThreadAcrossInstances(t *testing.T) {
	ns := natsServer(t)
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL(), "none"))
	onB := agentStream(t, b.URL, "xi")
	onA := agentStream(t, a.URL, "xi")
	// B's stream is open; its mirror subscription was sent to the server
	// first, and A's is a round trip later: an A command now finds it.
	res := agentCommand(t, a.URL, "xi", `{"id":1,"method":"run.start","params":{"assistant_id":"demo-agent","input":{"messages":[{"role":"user","content":"6 * 7?"}]}}}`)
	if res["type"] != "success" {
		t.Fatalf("run.start on A: %v", res)
	}
	want := agentFrames(t, onA, 1)
	got := agentFrames(t, onB, 1)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("on B:\n%s\non A:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(want[len(want)-1], `"completed"`) || !strings.Contains(strings.Join(want, ""), "6 * 7 = 42.") {
		t.Fatalf("the run: %s", strings.Join(want, "\n"))
	}
	if a.Bridge().Running() != 0 {
		t.Fatal("A ran the backend itself")
	}

	// A hanging run started on A, cancelled through B.
	res = agentCommand(t, a.URL, "xi", `{"id":2,"method":"run.start","params":{"assistant_id":"demo-agent","input":{"messages":[{"role":"user","content":"wait"}]},"config":{"configurable":{"hang":true}}}}`)
	run, _ := res["result"].(map[string]any)["run_id"].(string)
	if run == "" {
		t.Fatalf("run.start: %v", res)
	}
	resp, err := httpClient.Post(b.URL+"/threads/xi/runs/"+run+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("cancel on B: %v %v", resp, err)
	}
	resp.Body.Close()
	want = agentFrames(t, onA, 1)
	got = agentFrames(t, onB, 1)
	if strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.Contains(want[len(want)-1], "cancelled: ") {
		t.Fatalf("cancelled run on B:\n%s\non A:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An agent-protocol run is published once, on the replay log's subject,
// as every protocol's is: the agent frontend keeps no mirror of its own
// (nothing on interlingua.agent.>), and the log carries each event once,
// with its wire frames, so the frames a subscriber reads are the log's
// events'.
func TestAgentRunIsPublishedOnce(t *testing.T) {
	inst := bridgetest.Start(t, clusterConfig(natsServer(t).ClientURL()))
	nc := inst.Fabric().Conn()
	agent := subscribed(t, nc, "interlingua.agent.>", 4096)
	logged := subscribed(t, nc, "interlingua.events.>", 4096)
	sc := agentStream(t, inst.URL, "once")
	res := agentCommand(t, inst.URL, "once", `{"id":1,"method":"run.start","params":{"assistant_id":"demo-agent","input":{"messages":[{"role":"user","content":"6 * 7?"}]}}}`)
	if res["type"] != "success" {
		t.Fatalf("run.start: %v", res)
	}
	frames := agentFrames(t, sc, 1)
	var last uint64
	events := 0
	timeout := time.After(10 * time.Second)
	for last < uint64(len(frames)) {
		select {
		case m := <-logged:
			batch, err := bridge.DecodeEvents(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range batch {
				if ev.GetSeq() != last+1 {
					t.Fatalf("logged seq %d after %d", ev.GetSeq(), last)
				}
				last = ev.GetSeq()
				events++
			}
		case <-timeout:
			t.Fatalf("logged %d events, the subscriber read %d frames", events, len(frames))
		}
	}
	select {
	case m := <-agent:
		t.Fatalf("an agent-protocol message besides the log: %s", m.Subject)
	case <-time.After(300 * time.Millisecond):
	}
}

// agentSSE opens an agent-protocol event stream with body and returns its
// frames ("<id> <data>"), read on a goroutine.
func agentSSE(t *testing.T, base, thread, body string) <-chan string {
	t.Helper()
	resp, err := httpClient.Post(base+"/threads/"+thread+"/stream/events", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	out := make(chan string, 1024)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		id := ""
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				out <- id + " " + v
			}
		}
	}()
	return out
}

// untilEnd reads frames up to a root terminal lifecycle event.
func untilEnd(t *testing.T, frames <-chan string) []string {
	t.Helper()
	var out []string
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("stream ended after %d frames", len(out))
			}
			out = append(out, f)
			if strings.Contains(f, `"method":"lifecycle"`) && strings.Contains(f, `"namespace":[]`) &&
				(strings.Contains(f, `"event":"completed"`) || strings.Contains(f, `"event":"failed"`)) {
				return out
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no run end after %d frames", len(out))
		}
	}
}

// A client that read part of a live agent-protocol run on A resumes on B
// with its last seq (both instances host the backend; the run is A's):
// it gets every later frame exactly once, the same frames as A's reader,
// and a cancel sent to B ends the run.
func TestAgentResumeOnOtherInstance(t *testing.T) {
	ns := natsServer(t)
	a := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	b := bridgetest.Start(t, clusterConfig(ns.ClientURL()))
	const filter = `"channels":["lifecycle","messages","values"]`
	onA := agentSSE(t, a.URL, "resume", "{"+filter+"}")
	res := agentCommand(t, a.URL, "resume", `{"id":1,"method":"run.start","params":{"assistant_id":"stream","input":{"messages":[{"role":"user","content":"go"}]},"config":{"configurable":{"hang":true,"deltas":3}}}}`)
	run, _ := res["result"].(map[string]any)["run_id"].(string)
	if run == "" {
		t.Fatalf("run.start: %v", res)
	}
	var seen []string
	for !strings.Contains(strings.Join(seen, ""), `"content-block-delta"`) {
		select {
		case f := <-onA:
			seen = append(seen, f)
		case <-time.After(10 * time.Second):
			t.Fatalf("before the hang: %v", seen)
		}
	}
	if len(seen) < 4 {
		t.Fatalf("before the hang: %v", seen)
	}
	last := strings.Fields(seen[len(seen)-3])[0] // the client saw up to here
	onB := agentSSE(t, b.URL, "resume", "{"+filter+`,"since":`+last+"}")
	resp, err := httpClient.Post(b.URL+"/threads/resume/runs/"+run+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("cancel on B: %v %v", resp, err)
	}
	resp.Body.Close()
	restA := append(seen[len(seen)-2:], untilEnd(t, onA)...)
	restB := untilEnd(t, onB)
	if strings.Join(restB, "\n") != strings.Join(restA, "\n") {
		t.Fatalf("resumed on B after seq %s:\n%s\nA:\n%s", last, strings.Join(restB, "\n"), strings.Join(restA, "\n"))
	}
	if !strings.Contains(restA[len(restA)-1], "cancelled: ") {
		t.Fatalf("the run's end: %s", restA[len(restA)-1])
	}
}
