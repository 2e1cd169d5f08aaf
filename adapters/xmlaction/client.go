// The client of the XML action stream frontend (Protocol.Client): POST
// /v1/xml/stream {"target","input","parameters"} answers with the run
// rendered as XML action-stream text. The text is decoded with Decoder
// (the format's own parser); the Interlingua elements the renderer adds between blocks are read
// here: <observation id status="ok">JSON</observation> (a tool result),
// <observation id status="error" code>message</observation> (a tool
// failure), <interrupt id>JSON</interrupt> (an input request),
// <error code>message</error> (an error event) and
// <error code status>message</error> (a run that did not complete).
//
// Limitation: an element tag inside a tool call's JSON string arguments
// ("<error" in a string value) is taken for an element.
//
// Limits: one element (maxClientElementBytes, 1 MiB), an error body (64 KiB).

package xmlaction

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// maxClientElementBytes bounds, in the client, one <error>, <observation> or <interrupt> element.
const maxClientElementBytes = 1 << 20

// clientRequest is the body Start sends, its members in the order of the
// sorted map encoding/json wrote before (the bytes stay the same).
type clientRequest struct {
	Input      string         `json:"input"`
	Parameters map[string]any `json:"parameters"`
	Target     string         `json:"target"`
}

// marshalClientRequest is the body Start sends, escaped as encoding/json's
// Marshal escaped it (<, > and & too).
func marshalClientRequest(target, input string, params map[string]any) ([]byte, error) {
	return json.Marshal(clientRequest{Input: input, Parameters: params, Target: target}, htmlSafeOptions)
}

// Client calls one server. It implements canonical.Backend.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient returns a client of the server at base; hc nil uses
// http.DefaultClient.
func NewClient(base string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(base, "/"), hc: hc}
}

// Start implements canonical.Backend. The request's prompt text is the
// input; its parameters are sent as they are.
func (c *Client) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	params := map[string]any{}
	for k, v := range req.GetParameters() {
		params[k] = v.AsInterface()
	}
	body, err := marshalClientRequest(req.GetTarget(), canonical.PromptText(req), params)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: %v", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/xml/stream", bytes.NewReader(body))
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request: %v", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(hr)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, canonical.AsError(ctxErr)
		}
		return nil, canonical.Errorf(canonical.CodeUnavailable, "xml: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if el, ok := parseElement(data); ok && el.name == "error" {
			return nil, canonical.WireError(el.code(), el.text)
		}
		return nil, canonical.WireError(canonical.CodeUnknown, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, data))
	}
	return &stream{body: resp.Body, dec: NewDecoder(Config{})}, nil
}

type stream struct {
	body     io.ReadCloser
	dec      *Decoder
	buf      []byte // bytes not yet split
	inElem   string // "error", "observation" or "interrupt" while inside one
	out      []*canonical.Event
	terminal *canonical.Event
	done     bool
	rbuf     []byte
}

var starts = []string{"<error", "<observation", "<interrupt"}

// Recv implements canonical.Stream.
func (s *stream) Recv() (*canonical.Event, error) {
	for len(s.out) == 0 {
		if s.done {
			return nil, io.EOF
		}
		if s.rbuf == nil {
			s.rbuf = make([]byte, 32<<10)
		}
		n, err := s.body.Read(s.rbuf)
		if n > 0 {
			if ferr := s.feed(s.rbuf[:n]); ferr != nil {
				return nil, ferr
			}
		}
		if err != nil {
			if err != io.EOF {
				return nil, canonical.Errorf(canonical.CodeUnavailable, "xml: reading the stream: %v", err)
			}
			s.end()
		}
	}
	ev := s.out[0]
	s.out = s.out[1:]
	return ev, nil
}

// feed splits elements out of the text and decodes the rest.
func (s *stream) feed(chunk []byte) error {
	s.buf = append(s.buf, chunk...)
	for {
		if s.inElem != "" {
			closing := "</" + s.inElem + ">"
			i := bytes.Index(s.buf, []byte(closing))
			if i < 0 {
				if len(s.buf) > maxClientElementBytes {
					return canonical.Errorf(canonical.CodeResourceExhausted, "xml: an <%s> element exceeds %d bytes", s.inElem, maxClientElementBytes)
				}
				return nil
			}
			end := i + len(closing)
			s.element(s.buf[:end])
			s.buf = s.buf[end:]
			s.inElem = ""
			continue
		}
		at, which := -1, ""
		for _, st := range starts {
			if i := bytes.Index(s.buf, []byte(st)); i >= 0 && (at < 0 || i < at) {
				at, which = i, st[1:]
			}
		}
		if at >= 0 {
			s.decode(s.buf[:at])
			s.buf = s.buf[at:]
			s.inElem = which
			continue
		}
		keep := partialStart(s.buf)
		s.decode(s.buf[:len(s.buf)-keep])
		s.buf = append(s.buf[:0], s.buf[len(s.buf)-keep:]...)
		return nil
	}
}

// partialStart is the length of a suffix of b that may begin an element.
func partialStart(b []byte) int {
	for n := min(len(b), len("<observation")-1); n > 0; n-- {
		for _, st := range starts {
			if n < len(st) && bytes.HasSuffix(b, []byte(st[:n])) {
				return n
			}
		}
	}
	return 0
}

func (s *stream) decode(b []byte) {
	if len(b) == 0 {
		return
	}
	s.out, _ = s.dec.Feed(b, s.out)
}

func (s *stream) end() {
	s.done = true
	s.decode(s.buf)
	s.buf = nil
	evs, _ := s.dec.End(nil)
	if s.terminal != nil && len(evs) > 0 {
		evs = append(evs[:len(evs)-1], s.terminal)
	}
	s.out = append(s.out, evs...)
}

// element turns one <error>, <observation> or <interrupt> element into its event.
func (s *stream) element(b []byte) {
	el, ok := parseElement(b)
	if !ok {
		return
	}
	var ev *canonical.Event
	switch {
	case el.name == "observation" && el.attrs["status"] == "ok":
		v, _ := decodeJSON([]byte(el.text))
		out := toProto(v)
		ev = &canonical.Event{Kind: &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{ToolCallId: el.attrs["id"], Output: out}}}
	case el.name == "interrupt":
		v, _ := decodeJSON([]byte(el.text))
		payload := toProto(v)
		ev = &canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{InterruptId: el.attrs["id"], Payload: payload}}}
	case el.name == "observation":
		ev = &canonical.Event{Kind: &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{ToolCallId: el.attrs["id"],
			Error: &canonical.ErrorProto{Code: uint32(el.code()), Message: el.text}}}}
	case el.attrs["status"] != "":
		status := map[string]canonical.RunStatus{"failed": canonical.StatusFailed, "cancelled": canonical.StatusCancelled,
			"interrupted": canonical.StatusInterrupted}[el.attrs["status"]]
		if status == 0 {
			status = canonical.StatusFailed
		}
		var err *canonical.Error
		if el.attrs["code"] != "" {
			err = canonical.WireError(el.code(), el.text)
		}
		s.terminal = canonical.Terminal(status, err)
		return
	default:
		ev = &canonical.Event{Kind: &canonical.KindError{Error: &canonical.ErrorProto{Code: uint32(el.code()), Message: el.text}}}
	}
	s.out = append(s.out, ev)
}

type element struct {
	name  string
	attrs map[string]string
	text  string
}

func (e element) code() canonical.Code {
	c, ok := canonical.ParseCode(e.attrs["code"])
	if !ok || c == canonical.CodeOK {
		return canonical.CodeUnknown
	}
	return c
}

var (
	elementRE = regexp.MustCompile(`(?s)^\s*<(error|observation|interrupt)((?:\s+[A-Za-z_:][-A-Za-z0-9_:.]*=(?:"[^"]*"|'[^']*'|[^\s>]+))*)\s*>(.*)</(?:error|observation|interrupt)>\s*$`)
	attrRE    = regexp.MustCompile(`([A-Za-z_:][-A-Za-z0-9_:.]*)=(?:"([^"]*)"|'([^']*)'|([^\s>]+))`)
)

func parseElement(b []byte) (element, bool) {
	m := elementRE.FindSubmatch(b)
	if m == nil {
		return element{}, false
	}
	el := element{name: string(m[1]), attrs: map[string]string{}, text: html.UnescapeString(string(m[3]))}
	for _, a := range attrRE.FindAllSubmatch(m[2], -1) {
		el.attrs[string(a[1])] = string(a[2]) + string(a[3]) + string(a[4])
	}
	return el, true
}

// Close implements canonical.Stream.
func (s *stream) Close() error { return s.body.Close() }
