package anthropic

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/interlingua-dev/interlingua/bench/load"
	anthropicpeer "github.com/interlingua-dev/interlingua/conformance/peers/anthropic"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// loadProfile is the Messages API's part in the load harness: a client
// POSTing /v1/messages and counting text_delta events (the bench
// parameters as top-level members, which the frontend passes on), and the
// reference peer (conformance/peers/anthropic) with its text_delta events
// stamped.
var loadProfile = &load.Load{
	Title:       "Messages SSE",
	NewClient:   newLoadClient,
	NewUpstream: newLoadUpstream,
}

type loadClient struct {
	*load.HTTPTarget
	cs load.ClientSpec
}

func newLoadClient(cs load.ClientSpec) (load.Client, error) {
	return &loadClient{HTTPTarget: load.NewHTTPTarget(cs, "/v1/messages", http.Header{"Anthropic-Version": {"2023-06-01"}}), cs: cs}, nil
}

var (
	loadTextDelta  = []byte(`"type":"text_delta"`)
	loadErrorEvent = []byte(`{"type":"error"`)
	loadStop       = []byte(`{"type":"message_stop"`)
)

func (c *loadClient) Stream(ctx context.Context, _ int, prompt string, rec *load.Recorder) error {
	body := map[string]any{"model": c.cs.Target, "max_tokens": 4096, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": prompt}}}
	for k, v := range c.cs.Params {
		body[k] = v // the frontend passes other scalar members on as parameters
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	stopped := false
	err = c.Post(ctx, b, rec, func(line []byte) error {
		data, ok := load.SSEData(line)
		if !ok {
			return nil
		}
		switch {
		case bytes.HasPrefix(data, loadErrorEvent):
			return fmt.Errorf("error event: %s", data)
		case bytes.Contains(data, loadTextDelta):
			rec.Delta()
		case bytes.HasPrefix(data, loadStop):
			stopped = true
		}
		return nil
	})
	if err == nil && !stopped {
		err = fmt.Errorf("stream ended without message_stop")
	}
	return err
}

// newLoadUpstream scripts model sc.Target on the reference peer: one text
// block of sc.Deltas deltas, each event after sc.Interval.
func newLoadUpstream(sc load.Script) (*load.Upstream, error) {
	deltas := make([]string, sc.Deltas)
	for i := range deltas {
		deltas[i] = sc.Text
	}
	peer := anthropicpeer.New("", anthropicpeer.Model{Name: sc.Target, Delay: sc.Interval,
		Blocks: []anthropicpeer.Block{{Type: "text", Deltas: deltas}}})
	book := load.NewStampBook(sc.Deltas)
	h := load.StampedPeer(peer, book, "", load.LastUserText, func(p []byte) bool { return bytes.Contains(p, loadTextDelta) })
	srv, err := load.Serve(h, false)
	if err != nil {
		peer.Close()
		return nil, err
	}
	base := "http://" + srv.Addr()
	return &load.Upstream{Base: base, Backend: map[string]any{"base_url": base}, Book: book, Close: func() { peer.Close(); srv.Close() }}, nil
}
