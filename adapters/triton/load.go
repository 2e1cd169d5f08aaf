package triton

import (
	"bytes"
	"context"
	"fmt"

	"github.com/interlingua-dev/interlingua/bench/load"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// loadProfile is Triton's part in the load harness: a client POSTing
// generate_stream and scanning the SSE for text_output, and the reference
// peer (conformance/peers/triton) with its SSE frames stamped. Triton is
// the harness's reference frontend.
var loadProfile = &load.Load{
	Title:       "Triton SSE",
	NewClient:   newLoadClient,
	NewUpstream: newLoadUpstream,
	RatioDeltas: 20_000,
	Reference:   true,
}

type loadClient struct {
	*load.HTTPTarget
	cs load.ClientSpec
}

func newLoadClient(cs load.ClientSpec) (load.Client, error) {
	return &loadClient{HTTPTarget: load.NewHTTPTarget(cs, "/v2/models/"+cs.Target+"/generate_stream", nil), cs: cs}, nil
}

var (
	loadTextOutput = []byte(`"text_output":"`)
	loadInBandErr  = []byte(`{"error"`)
)

func (c *loadClient) Stream(ctx context.Context, _ int, prompt string, rec *load.Recorder) error {
	body := map[string]any{"text_input": prompt, "stream": true}
	for k, v := range c.cs.Params {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.Post(ctx, b, rec, func(line []byte) error {
		data, ok := load.SSEData(line)
		if !ok {
			return nil
		}
		if bytes.HasPrefix(data, loadInBandErr) {
			return fmt.Errorf("in-band error: %s", data)
		}
		if i := bytes.Index(data, loadTextOutput); i >= 0 && i+len(loadTextOutput) < len(data) && data[i+len(loadTextOutput)] != '"' {
			rec.Delta()
		}
		return nil
	})
}

// newLoadUpstream serves the reference peer with sc as its model's chunks,
// each SSE frame it writes stamped (error frames aside).
func newLoadUpstream(sc load.Script) (*load.Upstream, error) {
	chunks := make([]string, sc.Deltas)
	for i := range chunks {
		chunks[i] = sc.Text
	}
	peer := tritonpeer.New(tritonpeer.Model{Name: sc.Target, Chunks: chunks, Delay: sc.Interval})
	book := load.NewStampBook(sc.Deltas)
	h := load.StampedPeer(peer, book, "/generate_stream", loadTextInput, func(p []byte) bool {
		return bytes.HasPrefix(p, load.DataPrefix) && !bytes.Contains(p, loadInBandErr)
	})
	srv, err := load.Serve(h, false)
	if err != nil {
		return nil, err
	}
	base := "http://" + srv.Addr()
	return &load.Upstream{Base: base, Backend: map[string]any{"url": base}, Book: book, Close: srv.Close}, nil
}

// loadTextInput is a generate body's text_input ("x", ["x"] or [["x"]]).
func loadTextInput(body []byte) string {
	var b struct {
		TextInput json.Value `json:"text_input"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	raw := b.TextInput
	for len(raw) > 0 && raw[0] == '[' {
		var l []json.Value
		if json.Unmarshal(raw, &l) != nil || len(l) == 0 {
			return ""
		}
		raw = l[0]
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
