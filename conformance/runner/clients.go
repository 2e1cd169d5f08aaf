package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/adapters/evergreen"
	"github.com/interlingua-dev/interlingua/adapters/glide"
	"github.com/interlingua-dev/interlingua/adapters/triton"
	"github.com/interlingua-dev/interlingua/canonical"
	nativeclient "github.com/interlingua-dev/interlingua/conformance/clients/native"
	xmlclient "github.com/interlingua-dev/interlingua/conformance/clients/xml"
)

// client speaks one frontend protocol to a server and yields the canonical
// events it decodes from the wire. Where an adapter's backend is a client
// of the protocol (Triton, Evergreen, Glide), it is the client: pointed at
// our own frontend, it turns what the frontend wrote back into canonical
// events, so transcripts compare canonically.
type client interface {
	canonical.Backend
	close()
}

// observer is a client that can read a thread's events again (replay).
type observer interface {
	Observe(ctx context.Context, thread string, since uint64) (canonical.Stream, error)
}

// clientOptions shape one case's client.
type clientOptions struct {
	// base is the server's URL (http://host:port).
	base string
	// target is the target the client names (Glide puts it in the URL).
	target string
	// multiplex makes HTTP clients speak h2c, so concurrent runs share one
	// connection.
	multiplex bool
	// tritonBody are top-level keys added to a Triton generate body: the
	// Triton backend, our Triton client, keeps include_reasoning home (it
	// is our frontend's own parameter), so a case asking for it adds it
	// here.
	tritonBody map[string]any
}

// newHTTPClient returns a client with its own transport (HTTP/1.1, or h2c
// with prior knowledge).
func newHTTPClient(h2c bool) (*http.Client, *http.Transport) {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	return &http.Client{Transport: tr}, tr
}

type backendClient struct {
	canonical.Backend
	closeFn func()
}

func (c backendClient) close() { c.closeFn() }

type nativeClient struct {
	*nativeclient.Client
	tr *http.Transport
}

func (c nativeClient) close() { c.tr.CloseIdleConnections() }

// frontendProtocols are the frontend protocols of the default matrix.
var frontendProtocols = []string{"native", "triton", "evergreen", "glide", "xml", "agent"}

// newClient returns the client of frontend protocol p.
func newClient(p string, o clientOptions) (client, error) {
	switch p {
	case "native":
		hc, tr := newHTTPClient(o.multiplex)
		return nativeClient{nativeclient.New(o.base, hc), tr}, nil
	case "xml":
		hc, tr := newHTTPClient(o.multiplex)
		return backendClient{xmlclient.New(o.base, hc), tr.CloseIdleConnections}, nil
	case "triton":
		hc, tr := newHTTPClient(o.multiplex)
		if len(o.tritonBody) > 0 {
			hc.Transport = addKeys{tr, o.tritonBody}
		}
		be, err := triton.NewBackend(triton.BackendConfig{URL: o.base, HTTPClient: hc})
		if err != nil {
			return nil, err
		}
		return backendClient{be, func() { _ = be.Close(); tr.CloseIdleConnections() }}, nil
	case "evergreen":
		hc, tr := newHTTPClient(true) // gRPC needs HTTP/2
		be, err := evergreen.NewBackend(evergreen.BackendConfig{URL: o.base, HTTPClient: hc,
			Outputs: []string{evergreen.OutputResponse, evergreen.OutputReasoning, evergreen.OutputToolCalls}})
		if err != nil {
			return nil, err
		}
		return backendClient{be, tr.CloseIdleConnections}, nil
	case "agent":
		hc, tr := newHTTPClient(o.multiplex)
		be, err := agent.NewBackend(agent.BackendConfig{URL: o.base, AssistantID: o.target, HTTPClient: hc})
		if err != nil {
			return nil, err
		}
		return backendClient{be, func() { _ = be.Close(); tr.CloseIdleConnections() }}, nil
	case "glide":
		u := "ws://" + strings.TrimPrefix(o.base, "http://")
		if rest, ok := strings.CutPrefix(o.base, "https://"); ok {
			u = "wss://" + rest
		}
		u += "/v1/language/" + o.target + "/chatStream"
		be, err := glide.NewBackend(glide.BackendConfig{URL: u, SendCancel: true})
		if err != nil {
			return nil, err
		}
		return backendClient{be, func() { _ = be.Close() }}, nil
	}
	return nil, fmt.Errorf("no client for frontend protocol %q (known: %s)", p, strings.Join(frontendProtocols, ", "))
}

// addKeys adds top-level keys to the JSON body of generate requests.
type addKeys struct {
	next http.RoundTripper
	keys map[string]any
}

func (a addKeys) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.Body == nil || !strings.Contains(r.URL.Path, "/generate") {
		return a.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	var extra []byte
	for k, v := range a.keys {
		kj, _ := json.Marshal(k)
		vj, _ := json.Marshal(v)
		extra = append(append(append(append(extra, kj...), ':'), vj...), ',')
	}
	if len(body) > 1 && body[0] == '{' {
		body = append(append([]byte{'{'}, extra...), body[1:]...)
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return a.next.RoundTrip(r)
}
