package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/interlingua-dev/interlingua/bridge"
)

// --- OpenAI Responses: POST /v1/responses, SSE scanned for text deltas ---

type responsesClient struct {
	cs  clientSpec
	hc  *http.Client
	url string
}

func newResponsesClient(cs clientSpec) (client, error) {
	if cs.params != nil {
		return nil, errNoParameters("responses")
	}
	return &responsesClient{cs: cs, hc: httpClient(cs.streams), url: cs.base + "/v1/responses"}, nil
}

// responsesRequest is the Responses request the client sends: nothing
// stored, so a round leaves no state behind on either side.
type responsesRequest struct {
	Model  string `json:"model"`
	Input  string `json:"input"`
	Stream bool   `json:"stream"`
	Store  bool   `json:"store"`
}

var (
	responsesTextDelta = []byte(`"type":"response.output_text.delta"`)
	responsesCompleted = []byte(`"type":"response.completed"`)
	responsesError     = []byte(`"type":"error"`)
	responsesFailed    = []byte(`"type":"response.failed"`)
)

// stream counts response.output_text.delta events; the stream must end
// with response.completed.
func (c *responsesClient) stream(ctx context.Context, _ int, prompt string, rec *recorder) error {
	b, _ := json.Marshal(responsesRequest{Model: c.cs.target, Input: prompt, Stream: true})
	rec.start = now()
	resp, err := post(ctx, c.hc, c.url, b, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	completed := false
	err = lines(resp.Body, func(line []byte) error {
		if !bytes.HasPrefix(line, dataPrefix) {
			return nil
		}
		data := line[len(dataPrefix):]
		switch {
		case bytes.Contains(data, responsesTextDelta):
			rec.delta()
		case bytes.Contains(data, responsesCompleted):
			completed = true
		case bytes.Contains(data, responsesError), bytes.Contains(data, responsesFailed):
			return fmt.Errorf("error event: %s", bytes.TrimSpace(data))
		}
		return nil
	})
	if err == nil && !completed {
		err = errors.New("stream ended without response.completed")
	}
	return err
}

func (c *responsesClient) close() { c.hc.CloseIdleConnections() }

// --- Responses: the adapters/responses frontend in front of a producer ---

// responsesUp is the upstream the package's own conformance profile plays
// (adapters/responses/conformance.go, newConformancePeer): there is no
// independent Responses peer, so the adapter's frontend, with no thread
// store, renders a canonical script, here the paced producer's, whose
// deltas are stamped as they are handed to the frontend (as for Evergreen
// and the agent protocol).
type responsesUp struct {
	prod *producer
	fe   *mountedFrontend
	srv  *server
}

func newResponsesUp(sc script) (upstream, error) {
	p := &producer{sc: sc, stamp: newStampBook(sc.deltas)}
	fe, err := mountUpstream("responses", p, nil)
	if err != nil {
		return nil, err
	}
	u := &responsesUp{prod: p, fe: fe}
	if u.srv, err = serve(fe.mux, false); err != nil {
		fe.close()
		return nil, err
	}
	return u, nil
}

func (u *responsesUp) backend() (bridge.BackendConfig, error) {
	o, err := options(map[string]any{"base_url": "http://" + u.srv.addr() + "/v1"})
	return bridge.BackendConfig{Type: "responses", Options: o}, err
}

func (u *responsesUp) base() string     { return "http://" + u.srv.addr() }
func (u *responsesUp) book() *stampBook { return u.prod.stamp }
func (u *responsesUp) close() {
	u.fe.shutdown()
	u.srv.close()
	u.fe.close()
}
