package responses

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/protocol"
)

// loadProfile is the Responses API's part in the load harness: a client
// POSTing /v1/responses and counting response.output_text.delta events;
// as the upstream, the frontend in front of the harness's paced producer
// (as the conformance profile plays its peer: there is no independent
// Responses peer), with no thread store.
var loadProfile = &load.Load{
	Title:     "Responses SSE",
	NewClient: newLoadClient,
	NewUpstream: protocol.LoadUpstream(mountFrontend, nil, false, func(base string) map[string]any {
		return map[string]any{"base_url": base + "/v1"}
	}),
}

type loadClient struct {
	*load.HTTPTarget
	cs load.ClientSpec
}

func newLoadClient(cs load.ClientSpec) (load.Client, error) {
	if cs.Params != nil {
		return nil, load.ErrNoParameters("responses")
	}
	return &loadClient{HTTPTarget: load.NewHTTPTarget(cs, "/v1/responses", nil), cs: cs}, nil
}

// loadRequest is the Responses request the client sends: nothing stored,
// so a round leaves no state behind on either side.
type loadRequest struct {
	Model  string `json:"model"`
	Input  string `json:"input"`
	Stream bool   `json:"stream"`
	Store  bool   `json:"store"`
}

var (
	loadTextDelta = []byte(`"type":"response.output_text.delta"`)
	loadCompleted = []byte(`"type":"response.completed"`)
	loadError     = []byte(`"type":"error"`)
	loadFailed    = []byte(`"type":"response.failed"`)
)

// Stream counts response.output_text.delta events; the stream must end
// with response.completed.
func (c *loadClient) Stream(ctx context.Context, _ int, prompt string, rec *load.Recorder) error {
	b, err := json.Marshal(loadRequest{Model: c.cs.Target, Input: prompt, Stream: true})
	if err != nil {
		return err
	}
	completed := false
	err = c.Post(ctx, b, rec, func(line []byte) error {
		if !bytes.HasPrefix(line, load.DataPrefix) {
			return nil
		}
		data := line[len(load.DataPrefix):]
		switch {
		case bytes.Contains(data, loadTextDelta):
			rec.Delta()
		case bytes.Contains(data, loadCompleted):
			completed = true
		case bytes.Contains(data, loadError), bytes.Contains(data, loadFailed):
			return fmt.Errorf("error event: %s", bytes.TrimSpace(data))
		}
		return nil
	})
	if err == nil && !completed {
		err = errors.New("stream ended without response.completed")
	}
	return err
}
