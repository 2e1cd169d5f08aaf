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

// An instance mirrors its agent threads on NATS only when another instance
// can be there to read them: on the embedded server without a listener
// (the default) it publishes nothing on p.agent.events.<T>; with the
// server listening, or on an external one, every frame of a run goes out.
// The subscriber is on the instance's own fabric connection, which
// receives what the mirror connection publishes.
func TestAgentMirrorsOnlyWithPeers(t *testing.T) {
	listening := bridge.DefaultConfig()
	listening.NATS.EmbeddedListen = "127.0.0.1:0"
	for _, tc := range []struct {
		name  string
		cfg   *bridge.Config
		alone bool
	}{
		{"embedded", nil, true},
		{"embedded_listen", &listening, false},
		{"external", clusterConfig(natsServer(t).ClientURL()), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := bridgetest.Start(t, tc.cfg)
			if got := inst.Fabric().Alone(); got != tc.alone {
				t.Fatalf("Alone() = %v, want %v", got, tc.alone)
			}
			nc := inst.Fabric().Conn()
			msgs := subscribed(t, nc, "interlingua.agent.events.>", 4096)
			sc := agentStream(t, inst.URL, "mirror-"+tc.name)
			res := agentCommand(t, inst.URL, "mirror-"+tc.name, `{"id":1,"method":"run.start","params":{"assistant_id":"demo-agent","input":{"messages":[{"role":"user","content":"6 * 7?"}]}}}`)
			if res["type"] != "success" {
				t.Fatalf("run.start: %v", res)
			}
			frames := agentFrames(t, sc, 1)
			if tc.alone {
				// Mirroring is asynchronous (a queue and its goroutine): a
				// run's messages would be on the wire long before this.
				select {
				case m := <-msgs:
					t.Fatalf("an instance alone published %s: %s", m.Subject, m.Data)
				case <-time.After(300 * time.Millisecond):
				}
				return
			}
			events := 0
			timeout := time.After(10 * time.Second)
			for events < len(frames) {
				select {
				case <-msgs:
					events++
				case <-timeout:
					t.Fatalf("mirrored %d of the run's %d frames", events, len(frames))
				}
			}
		})
	}
}
