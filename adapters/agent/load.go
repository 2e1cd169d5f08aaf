package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/protocol"
)

// loadProfile is the agent protocol's part in the load harness: a client
// reading a thread's SSE stream and starting each run with run.start; the
// frontend in front of the harness's paced producer as the upstream; idle
// thread streams. A thread buffers 10,000 events ahead of its readers, so
// unpaced runs stay at 5,000 deltas.
var loadProfile = &load.Load{
	Title:            "agent-protocol SSE",
	NewClient:        newLoadClient,
	NewUpstream:      protocol.LoadUpstream(mountFrontend, nil, false, func(base string) map[string]any { return map[string]any{"url": base} }),
	RatioDeltas:      5000,
	MaxUnpacedDeltas: 5000,
	Idle: &load.Idle{Transport: load.SSE, Text: fmt.Sprintf("agent-protocol thread streams (SSE, POST /threads/{id}/stream) on %d threads", loadIdleThreads),
		Open: func(_ context.Context, addr string, i int) (io.Closer, error) {
			return load.OpenSSE(addr, fmt.Sprintf("/threads/idle-%d/stream", i%loadIdleThreads), `{"channels":["lifecycle"]}`)
		}},
}

// loadIdleThreads is the number of threads the idle streams subscribe to,
// round robin (the frontend holds at most MaxThreads, 1,000, in memory).
const loadIdleThreads = 500

// loadClient opens an SSE stream on thread bench-<mode>-<slot> (lifecycle
// and messages channels) after the last seq it saw there, so earlier runs'
// buffered events are not replayed, starts a run with the run.start
// command (the parameters as config.configurable) and reads the stream
// until the root lifecycle event ends the run.
type loadClient struct {
	cs  load.ClientSpec
	hc  *http.Client
	seq []uint64 // by slot: the last event seq seen on its thread
}

func newLoadClient(cs load.ClientSpec) (load.Client, error) {
	return &loadClient{cs: cs, hc: load.HTTPClient(2 * cs.Streams), seq: make([]uint64, cs.Streams)}, nil
}

// loadCommand is the run.start command the client sends.
type loadCommand struct {
	ID     int             `json:"id"`
	Method string          `json:"method"`
	Params loadStartParams `json:"params"`
}

type loadStartParams struct {
	AssistantID string `json:"assistant_id"`
	Input       struct {
		Messages []loadMessage `json:"messages"`
	} `json:"input"`
	Config struct {
		Configurable map[string]any `json:"configurable,omitempty"`
	} `json:"config"`
}

type loadMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

var (
	loadTextDelta = []byte(`"text-delta"`)
	loadLifecycle = []byte(`"method":"lifecycle"`)
	loadRoot      = []byte(`"namespace":[]`)
	loadCompleted = []byte(`"event":"completed"`)
	loadEnded     = [][]byte{[]byte(`"event":"failed"`), []byte(`"event":"interrupted"`)}
	loadSuccess   = []byte(`"type":"success"`)
	loadSeqKey    = []byte(`"seq":`)
	loadErrorType = []byte(`{"type":"error"`)
	errLoadDone   = errors.New("done")
)

// leadingUint parses the decimal digits at the start of b.
func leadingUint(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

func (c *loadClient) Stream(ctx context.Context, i int, prompt string, rec *load.Recorder) error {
	thread := c.cs.Base + "/threads/bench-" + c.cs.Mode + "-" + strconv.Itoa(i)
	rec.Begin()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := fmt.Sprintf(`{"channels":["messages","lifecycle"],"since":%d}`, c.seq[i])
	resp, err := load.Post(ctx, c.hc, thread+"/stream", []byte(sub), "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := c.start(ctx, thread, prompt); err != nil {
		return err
	}
	err = load.Lines(resp.Body, func(line []byte) error { return c.line(i, line, rec) })
	if err == errLoadDone {
		return nil
	}
	if err == nil {
		return errors.New("stream ended before the run's terminal lifecycle event")
	}
	return err
}

// start sends run.start on thread.
func (c *loadClient) start(ctx context.Context, thread, prompt string) error {
	cmd := loadCommand{ID: 1, Method: "run.start", Params: loadStartParams{AssistantID: c.cs.Target}}
	cmd.Params.Input.Messages = []loadMessage{{Role: "user", Content: prompt}}
	cmd.Params.Config.Configurable = c.cs.Params
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	cr, err := load.Post(ctx, c.hc, thread+"/commands", b, "")
	if err != nil {
		return fmt.Errorf("run.start: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(cr.Body, 64<<10))
	cr.Body.Close()
	if !bytes.Contains(body, loadSuccess) {
		return fmt.Errorf("run.start: %s", body)
	}
	return nil
}

// line reads one line of slot i's thread stream: errLoadDone when the run
// completed.
func (c *loadClient) line(i int, line []byte, rec *load.Recorder) error {
	if !bytes.HasPrefix(line, load.DataPrefix) {
		return nil
	}
	if j := bytes.Index(line, loadSeqKey); j >= 0 {
		if n := leadingUint(line[j+len(loadSeqKey):]); n > c.seq[i] {
			c.seq[i] = n
		}
	}
	switch {
	case bytes.Contains(line, loadTextDelta):
		rec.Delta()
	case bytes.Contains(line, loadErrorType):
		return fmt.Errorf("error frame: %s", line)
	case bytes.Contains(line, loadLifecycle) && bytes.Contains(line, loadRoot):
		if bytes.Contains(line, loadCompleted) {
			return errLoadDone
		}
		for _, k := range loadEnded {
			if bytes.Contains(line, k) {
				return fmt.Errorf("run ended: %s", line)
			}
		}
	}
	return nil
}

func (c *loadClient) Close() { c.hc.CloseIdleConnections() }
