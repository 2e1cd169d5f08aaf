package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentMemoryRSSBound is the stated memory bound of a daemon serving one
// agent thread whose conversation grows by two megabytes a run for
// agentMemoryRuns runs.
const agentMemoryRSSBound = 600 << 20

const (
	agentMemoryRuns   = 12
	agentMemoryMsgLen = 1 << 20
)

// agentMemoryText is run i's human message: about a megabyte with no
// space, different for each run, so the final state shows each arrived
// whole.
func agentMemoryText(i int) string {
	head := fmt.Sprintf("run-%02d:", i)
	unit := fmt.Sprintf("%c%02d-abcdefghijklmnopqrstuvwxyz_", 'A'+i, i)
	return head + strings.Repeat(unit, (agentMemoryMsgLen-len(head))/len(unit))
}

// Twelve runs on one agent thread, each adding a 1 MB human message and
// its echo (the conversation grows to 24 MB), with an SSE reader following
// the thread: every run completes, the reader gets no gap report, the
// thread's state holds the 24 messages intact, and the daemon's peak RSS
// stays under agentMemoryRSSBound. The frontend's buffer held every
// values event (each the whole conversation) until its byte bound
// (BufferBytes) was added: about 1,050 MiB.
func TestAgentMemoryLongConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("12 runs of 1 MB skipped in -short")
	}
	bin := buildBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", t.TempDir(), "--shutdown-timeout", "1s", "--log-level", "error")
	// As README advises an operator who gives the daemon a memory budget:
	// GOMEMLIMIT a little under it, so the collector runs as often as it
	// must before the heap's transient copies of a 24 MB state pile up.
	cmd.Env = append(os.Environ(), "GOMEMLIMIT=480MiB")
	var log syncBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr
	waitReady(t, base)
	const thread = "t-agent-memory"

	ends := followThread(t, base, thread)
	start := time.Now()
	for i := range agentMemoryRuns {
		startAgentRun(t, base, thread, i, agentMemoryText(i))
		select {
		case status, ok := <-ends:
			if !ok {
				t.Fatalf("run %d: the SSE stream ended before the run did\n%s", i, log.String())
			}
			if status == "gap" {
				t.Fatalf("run %d: the reader following the thread got a gap report", i)
			}
			if status != "completed" {
				t.Fatalf("run %d ended %s\n%s", i, status, log.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d did not end within 30 s", i)
		}
	}
	elapsed := time.Since(start)
	checkAgentMemoryState(t, base, thread)
	rss := peakRSS(t, cmd.Process.Pid)
	t.Logf("daemon peak RSS over %d runs of %d MiB on one agent thread: %d MiB (bound %d MiB), %s",
		agentMemoryRuns, agentMemoryMsgLen>>20, rss>>20, agentMemoryRSSBound>>20, elapsed.Round(time.Millisecond))
	if rss > agentMemoryRSSBound {
		t.Fatalf("daemon peak RSS %d MiB exceeds the %d MiB bound", rss>>20, agentMemoryRSSBound>>20)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("daemon died: %v", err)
	}
}

// startAgentRun sends run.start with one human message; the echo target
// answers with its text in one delta (it has no spaces).
func startAgentRun(t *testing.T, base, thread string, i int, text string) {
	t.Helper()
	content, _ := json.Marshal(text)
	body := fmt.Sprintf(`{"id":%d,"method":"run.start","params":{"assistant_id":"echo","input":{"messages":[{"role":"user","content":%s}]}}}`, i+1, content)
	resp, err := client.Post(base+"/threads/"+thread+"/commands", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"success"`)) {
		t.Fatalf("run %d: run.start answered %d %s", i, resp.StatusCode, b)
	}
}

// followThread opens an SSE stream on every channel of the thread and reads
// it to its end, sending the status of each root terminal lifecycle event
// on the channel it returns, or "gap" for an in-band error frame (the gap
// report); the channel is closed when the stream ends. Frames are read
// without keeping them: the values frames hold the whole conversation.
func followThread(t *testing.T, base, thread string) <-chan string {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/threads/"+thread+"/stream", strings.NewReader(
		`{"channels":["values","updates","messages","tools","lifecycle","input","checkpoints","tasks","custom"]}`))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	ends := make(chan string, agentMemoryRuns+1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ends)
		readTerminals(resp.Body, ends)
	}()
	t.Cleanup(func() { resp.Body.Close(); <-done })
	return ends
}

// readTerminals reads SSE frames from r, sending the status of each root
// terminal lifecycle event, and "gap" for a frame with no event name (the
// in-band error), to ends, until r ends.
func readTerminals(r io.Reader, ends chan<- string) {
	br := bufio.NewReaderSize(r, 64<<10)
	event := ""
	for {
		line, err := br.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		for errors.Is(err, bufio.ErrBufferFull) { // a large data line: skipped
			_, err = br.ReadSlice('\n')
		}
		if err != nil {
			return
		}
		if long { // a values or messages frame's data
			continue
		}
		switch {
		case len(bytes.TrimSpace(line)) == 0: // the frame's end
			event = ""
		case bytes.HasPrefix(line, []byte("data: ")) && event == "":
			ends <- "gap"
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(bytes.TrimSpace(line[len("event: "):]))
		case bytes.HasPrefix(line, []byte("data: ")) && event == "lifecycle":
			var env struct {
				Params struct {
					Namespace []string `json:"namespace"`
					Data      struct {
						Event string `json:"event"`
					} `json:"data"`
				} `json:"params"`
			}
			if json.Unmarshal(line[len("data: "):], &env) == nil && len(env.Params.Namespace) == 0 {
				switch s := env.Params.Data.Event; s {
				case "completed", "failed", "interrupted":
					ends <- s
				}
			}
		}
	}
}

// checkAgentMemoryState reads the thread's state: each run's human message
// and its echo, in order, each whole.
func checkAgentMemoryState(t *testing.T, base, thread string) {
	t.Helper()
	resp, err := client.Get(base + "/threads/" + thread + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Values struct {
			Messages []struct {
				Type    string `json:"type"`
				Content string `json:"content"`
			} `json:"messages"`
		} `json:"values"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("state: %d %v", resp.StatusCode, err)
	}
	msgs := st.Values.Messages
	if len(msgs) != 2*agentMemoryRuns {
		t.Fatalf("state holds %d messages, want %d", len(msgs), 2*agentMemoryRuns)
	}
	for i, m := range msgs {
		want, typ := agentMemoryText(i/2), []string{"human", "ai"}[i%2]
		if m.Type != typ || m.Content != want {
			t.Fatalf("message %d: %s of %d bytes, starts %.20q; want %s of %d bytes, %.20q", i, m.Type, len(m.Content), m.Content, typ, len(want), want)
		}
	}
}
