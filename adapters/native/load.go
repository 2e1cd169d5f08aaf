package native

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/canonical"
)

// loadProfile is the native protocol's part in the load harness: a client
// POSTing /v1/runs and reading the NDJSON canonical events; and, where no
// other frontend holds idle SSE streams, runs of the scripted stream
// target that hang after their first event.
var loadProfile = &load.Load{
	Title:     "native NDJSON",
	NewClient: newLoadClient,
	Idle: &load.Idle{Transport: load.SSE, Fallback: true, Text: "native NDJSON runs that hang after their first event (POST /v1/runs)",
		Open: func(_ context.Context, addr string, _ int) (io.Closer, error) {
			return load.OpenSSE(addr, "/v1/runs", `{"target":"stream","parameters":{"hang":true}}`)
		}},
}

type loadClient struct {
	*load.HTTPTarget
	cs load.ClientSpec
}

func newLoadClient(cs load.ClientSpec) (load.Client, error) {
	return &loadClient{HTTPTarget: load.NewHTTPTarget(cs, "/v1/runs", nil), cs: cs}, nil
}

var (
	loadBlockDelta = []byte(`"blockDelta"`)
	loadLifecycle  = []byte(`"lifecycle"`)
	loadError      = []byte(`"error"`)
)

func (c *loadClient) Stream(ctx context.Context, _ int, prompt string, rec *load.Recorder) error {
	params, err := load.StructParams(c.cs.Params)
	if err != nil {
		return err
	}
	req := &canonical.Request{Target: c.cs.Target, Parameters: params,
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", prompt)}}}
	b, err := protojson.Marshal(req)
	if err != nil {
		return err
	}
	return c.Post(ctx, b, rec, func(line []byte) error {
		switch {
		case bytes.Contains(line, loadBlockDelta):
			rec.Delta()
		case bytes.Contains(line, loadLifecycle) && bytes.Contains(line, loadError):
			return fmt.Errorf("run failed: %s", line)
		}
		return nil
	})
}
