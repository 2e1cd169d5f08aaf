package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/interlingua-dev/interlingua/bench/load"
	openaipeer "github.com/interlingua-dev/interlingua/conformance/peers/openai"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// loadProfile is Chat Completions' part in the load harness: a client
// POSTing /v1/chat/completions and counting chunks with non-empty delta
// content, and the reference peer (conformance/peers/openai) with its
// content chunks stamped.
var loadProfile = &load.Load{
	Title:       "Chat Completions SSE",
	NewClient:   newLoadClient,
	NewUpstream: newLoadUpstream,
}

type loadClient struct {
	*load.HTTPTarget
	cs load.ClientSpec
}

func newLoadClient(cs load.ClientSpec) (load.Client, error) {
	if cs.Params != nil {
		return nil, load.ErrNoParameters("openai")
	}
	return &loadClient{HTTPTarget: load.NewHTTPTarget(cs, "/v1/chat/completions", nil), cs: cs}, nil
}

// loadRequest is the Chat Completions request the client sends.
type loadRequest struct {
	Model    string        `json:"model"`
	Stream   bool          `json:"stream"`
	Messages []loadMessage `json:"messages"`
}

type loadMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

var (
	loadContentKey = []byte(`"content":"`)
	loadFinishKey  = []byte(`"finish_reason":"`)
	loadDone       = []byte("[DONE]")
	loadInBandErr  = []byte(`{"error"`)
)

// Stream counts each chunk whose delta has non-empty content (the first
// chunk's role announcement carries "content":"" and is not a delta); the
// stream must end with a finish_reason and then [DONE].
func (c *loadClient) Stream(ctx context.Context, _ int, prompt string, rec *load.Recorder) error {
	b, err := json.Marshal(loadRequest{Model: c.cs.Target, Stream: true, Messages: []loadMessage{{Role: "user", Content: prompt}}})
	if err != nil {
		return err
	}
	finished, done := false, false
	err = c.Post(ctx, b, rec, func(line []byte) error {
		data, ok := load.SSEData(line)
		if !ok {
			return nil
		}
		switch {
		case bytes.Equal(data, loadDone):
			done = true
		case bytes.HasPrefix(data, loadInBandErr):
			return fmt.Errorf("in-band error: %s", data)
		case bytes.Contains(data, loadFinishKey):
			finished = true
		case load.HasText(data, loadContentKey):
			rec.Delta()
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case !finished:
		return errors.New("stream ended without a finish_reason")
	case !done:
		return errors.New("stream ended without [DONE]")
	}
	return nil
}

// newLoadUpstream scripts model sc.Target on the peer as OpenAI streams
// it: a role chunk, sc.Deltas content chunks, the finish chunk and [DONE],
// each chunk after sc.Interval (the peer's per-chunk delay); each chunk
// with non-empty content is stamped (the peer writes one whole chunk per
// write).
func newLoadUpstream(sc load.Script) (*load.Upstream, error) {
	content := make([]string, sc.Deltas)
	for i := range content {
		content[i] = sc.Text
	}
	peer := openaipeer.New("", openaipeer.Model{Name: sc.Target, Content: content, Delay: sc.Interval})
	book := load.NewStampBook(sc.Deltas)
	h := load.StampedPeer(peer, book, "/v1/chat/completions", load.LastUserText, func(p []byte) bool { return load.HasText(p, loadContentKey) })
	srv, err := load.Serve(h, false)
	if err != nil {
		return nil, err
	}
	base := "http://" + srv.Addr()
	return &load.Upstream{Base: base, Backend: map[string]any{"base_url": base + "/v1"}, Book: book, Close: srv.Close}, nil
}
