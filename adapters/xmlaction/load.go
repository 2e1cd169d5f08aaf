package xmlaction

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// loadProfile is the XML action stream's part in the load harness: a
// client POSTing /v1/xml/stream and reading the SSE, one event per
// rendered piece.
var loadProfile = &load.Load{
	Title:     "XML action stream SSE",
	NewClient: newLoadClient,
}

type loadClient struct {
	*load.HTTPTarget
	cs load.ClientSpec
}

func newLoadClient(cs load.ClientSpec) (load.Client, error) {
	return &loadClient{HTTPTarget: load.NewHTTPTarget(cs, "/v1/xml/stream", http.Header{"Accept": {"text/event-stream"}}), cs: cs}, nil
}

// loadRequest is the request the client sends.
type loadRequest struct {
	Target     string         `json:"target"`
	Input      string         `json:"input"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

var loadErrorTag = []byte("<error")

func (c *loadClient) Stream(ctx context.Context, _ int, prompt string, rec *load.Recorder) error {
	b, err := json.Marshal(loadRequest{Target: c.cs.Target, Input: prompt, Parameters: c.cs.Params})
	if err != nil {
		return err
	}
	return c.Post(ctx, b, rec, func(line []byte) error {
		if !bytes.HasPrefix(line, load.DataPrefix) {
			return nil
		}
		data := bytes.TrimPrefix(line[len(load.DataPrefix):], []byte(" "))
		if bytes.Contains(data, loadErrorTag) {
			return fmt.Errorf("error element: %s", data)
		}
		// A text delta's piece carries text; the closing "</response>"
		// alone does not.
		if len(data) > 0 && !(data[0] == '<' && bytes.IndexByte(data, '>') == len(data)-1) {
			rec.Delta()
		}
		return nil
	})
}
