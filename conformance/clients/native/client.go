// Package nativeclient is a client of Interlingua's native protocol
// (adapters/native): POST /v1/runs answers a canonical Request with the
// run's events as NDJSON, and GET /v1/threads/{thread}/events?since=N
// replays a thread's events after seq N, then follows it live. It is what
// the conformance runner drives the native frontend with; it shares no
// code with the frontend.
//
// Limits: one NDJSON line (MaxLineBytes, 16 MiB), an error body (64 KiB).
package nativeclient

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// MaxLineBytes bounds one event line.
const MaxLineBytes = 16 << 20

// Client calls one server. It implements canonical.Backend.
type Client struct {
	base string
	hc   *http.Client
}

// New returns a client of the server at base (http://host:port); hc nil
// uses http.DefaultClient.
func New(base string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(base, "/"), hc: hc}
}

// Start implements canonical.Backend: POST /v1/runs. A refusal (an HTTP
// error status) is an error carrying the code the body names.
func (c *Client) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	body, err := protojson.Marshal(req)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: %v", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/runs", bytes.NewReader(body))
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: %v", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	return c.do(hr)
}

// Observe reads a thread's events after seq since, then live ones; the
// stream does not end by itself.
func (c *Client) Observe(ctx context.Context, thread string, since uint64) (canonical.Stream, error) {
	u := fmt.Sprintf("%s/v1/threads/%s/events?since=%d", c.base, url.PathEscape(thread), since)
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: %v", err)
	}
	return c.do(hr)
}

func (c *Client) do(hr *http.Request) (canonical.Stream, error) {
	resp, err := c.hc.Do(hr)
	if err != nil {
		if ctxErr := hr.Context().Err(); ctxErr != nil {
			return nil, canonical.AsError(ctxErr)
		}
		return nil, canonical.Errorf(canonical.CodeUnavailable, "native: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &e, errorBodyOptions) != nil || e.Code == "" {
			return nil, canonical.WireError(canonical.CodeUnknown, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, data))
		}
		code, ok := canonical.ParseCode(e.Code)
		if !ok {
			code = canonical.CodeUnknown
		}
		return nil, canonical.WireError(code, e.Message)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	return &stream{body: resp.Body, sc: sc}, nil
}

// errorBodyOptions read an error body as encoding/json did: names match
// ignoring case, of duplicates the last wins, invalid UTF-8 becomes U+FFFD.
var errorBodyOptions = json.JoinOptions(json.MatchCaseInsensitiveNames(true), json.MatchCaseSensitiveDelimiter(true),
	json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

type stream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// Recv implements canonical.Stream: io.EOF when the body ends.
func (s *stream) Recv() (*canonical.Event, error) {
	for s.sc.Scan() {
		line := bytes.TrimSpace(s.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		ev := &canonical.Event{}
		if err := protojson.Unmarshal(line, ev); err != nil {
			return nil, canonical.Errorf(canonical.CodeInternal, "native: event line does not decode: %v", err)
		}
		return ev, nil
	}
	if err := s.sc.Err(); err != nil {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "native: reading events: %v", err)
	}
	return nil, io.EOF
}

// Close implements canonical.Stream.
func (s *stream) Close() error { return s.body.Close() }
