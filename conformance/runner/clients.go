package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// client speaks one frontend protocol to a server and yields the canonical
// events it decodes from the wire. Where an adapter's backend is a client
// of the protocol (Triton, Evergreen, Glide), it is the client: pointed at
// our own frontend, it turns what the frontend wrote back into canonical
// events, so transcripts compare canonically.
type client interface {
	canonical.Backend
	close()
	// observer returns the client's replay, nil when it has none.
	observer() observer
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
	// headers are sent with every request (--header).
	headers http.Header
}

// newHTTPClient returns a client with its own transport (HTTP/1.1, or h2c
// with prior knowledge).
func newHTTPClient(h2c bool) (*http.Client, *http.Transport) {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
		// net/http hands a new HTTP/2 connection to the request that
		// dialled it before it pools it (Transport.dialConnFor), so a
		// request started in between dials a second one; one connection
		// per host makes it wait for the pooled connection instead.
		tr.MaxConnsPerHost = 1
	}
	return &http.Client{Transport: tr}, tr
}

// protocolClient is a protocol's client (protocol.Protocol.Client) and
// the transport it speaks through.
type protocolClient struct {
	canonical.Backend
	tr *http.Transport
}

func (c protocolClient) close() {
	if cl, ok := c.Backend.(io.Closer); ok {
		_ = cl.Close()
	}
	c.tr.CloseIdleConnections()
}

// observer returns the client's replay, nil without one.
func (c protocolClient) observer() observer {
	o, _ := c.Backend.(observer)
	return o
}

// newClient returns the client of frontend protocol name.
func newClient(name string, o clientOptions) (client, error) {
	p := protocols.Get(name)
	if p == nil || p.Client == nil {
		return nil, fmt.Errorf("no client for frontend protocol %q (known: %s)", name, strings.Join(frontendProtocols, ", "))
	}
	// A protocol multiplexing by design (gRPC's HTTP/2 streams) needs
	// HTTP/2 whatever the case asks.
	hc, tr := newHTTPClient(o.multiplex || profiles[name].Multiplex)
	if len(o.tritonBody) > 0 {
		hc.Transport = addKeys{tr, o.tritonBody}
	}
	if len(o.headers) > 0 {
		hc.Transport = addHeaders{hc.Transport, o.headers}
	}
	be, err := p.Client(protocol.ClientConfig{Base: o.base, Target: o.target, HTTPClient: hc, Headers: o.headers})
	if err != nil {
		return nil, err
	}
	return protocolClient{be, tr}, nil
}

// addHeaders sets headers on every request.
type addHeaders struct {
	next    http.RoundTripper
	headers http.Header
}

func (a addHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range a.headers {
		r.Header[k] = v
	}
	return a.next.RoundTrip(r)
}

// addKeys adds top-level keys to the JSON body of generate requests.
type addKeys struct {
	next http.RoundTripper
	keys map[string]any
}

// keyOptions write the added keys as encoding/json wrote them: <, >, &,
// U+2028 and U+2029 escaped, map keys sorted, nil as null.
var keyOptions = json.JoinOptions(json.EscapeForHTML(true), json.EscapeForJS(true), json.AllowInvalidUTF8(true),
	json.Deterministic(true), json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true))

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
		kj, _ := json.Marshal(k, keyOptions)
		vj, _ := json.Marshal(v, keyOptions)
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
