package evergreen_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/adapters/evergreen"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
)

// fakeUpstream is an Evergreen server whose behaviour the target id picks;
// it misbehaves in the ways a backend must survive.
type fakeUpstream struct {
	evergreenv2connect.UnimplementedEvergreenServiceHandler
}

func (fakeUpstream) StartSession(ctx context.Context, s *connect.BidiStream[ev.SessionMessage, ev.SessionMessage]) error {
	var act *ev.Action
	for act == nil {
		m, err := s.Receive()
		if err != nil {
			return err
		}
		if len(m.GetActions()) > 0 {
			act = m.GetActions()[0]
		}
	}
	out := act.GetOutputs()[0].GetId()
	in := act.GetInputs()[0].GetId()
	send := func(f ...*ev.NodeFragment) error { return s.Send(&ev.SessionMessage{NodeFragments: f}) }
	switch target := act.GetTargetSpec().GetId(); {
	case target == "children":
		// A non-leaf answer, children before the parent, fragments out
		// of order.
		return send(&ev.NodeFragment{Id: "c2", ChunkFragment: &ev.Chunk{Payload: &ev.Chunk_Data{Data: []byte("world")}}, Seq: 1},
			&ev.NodeFragment{Id: "c2", Seq: 0, Continued: true, ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain", Role: "model"}, Payload: &ev.Chunk_Data{Data: []byte("wonderful ")}}},
			&ev.NodeFragment{Id: out, ChildIds: []string{"c1", "c2"}},
			&ev.NodeFragment{Id: "c1", ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain", Role: "model"}, Payload: &ev.Chunk_Data{Data: []byte("hello ")}}})
	case target == "quote-input":
		// The answer reuses the client's input node as a child.
		return send(&ev.NodeFragment{Id: out, ChildIds: []string{in}})
	case strings.HasPrefix(target, "fail-"):
		code, _ := canonical.ParseCode(strings.TrimPrefix(target, "fail-"))
		_ = send(&ev.NodeFragment{Id: out, Continued: true, ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain"}, Payload: &ev.Chunk_Data{Data: []byte("partial")}}})
		return connect.NewError(connect.Code(code), errors.New("upstream says no"))
	case target == "action":
		return s.Send(&ev.SessionMessage{Actions: []*ev.Action{{Name: "GENERATE"}}})
	case target == "early":
		return send(&ev.NodeFragment{Id: out, Continued: true, ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain"}, Payload: &ev.Chunk_Data{Data: []byte("half")}}})
	case target == "bad":
		return send(&ev.NodeFragment{Id: out, Seq: -3})
	case target == "writes-input":
		return send(&ev.NodeFragment{Id: in, ChunkFragment: &ev.Chunk{}})
	case target == "hold":
		// Complete answer, then the stream stays open until the client
		// goes: the run must end at the answer, not at the close.
		if err := send(&ev.NodeFragment{Id: out, ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain"}, Payload: &ev.Chunk_Data{Data: []byte("done")}}}); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown target %q", act.GetTargetSpec().GetId()))
}

func upstreamServer(t *testing.T) string {
	mux := http.NewServeMux()
	mux.Handle(evergreenv2connect.NewEvergreenServiceHandler(fakeUpstream{}))
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func textRequest(target, text string) *canonical.Request {
	return &canonical.Request{Target: target, Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", text)}}}
}

// runBackend runs req and returns the events (validated) and the Start
// error.
func runBackend(t *testing.T, be *evergreen.Backend, req *canonical.Request) ([]*canonical.Event, error) {
	t.Helper()
	s, err := be.Start(testCtx(t), req)
	if err != nil {
		return nil, err
	}
	events, err := canonical.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := canonical.Validate(events); err != nil {
		t.Fatal(err)
	}
	return events, nil
}

func textOf(events []*canonical.Event) string {
	var sb strings.Builder
	for _, e := range events {
		sb.WriteString(e.GetBlockDelta().GetText())
	}
	return sb.String()
}

func terminal(events []*canonical.Event) (canonical.RunStatus, *canonical.Error) {
	last := events[len(events)-1]
	return last.GetLifecycle().GetStatus(), canonical.FromProto(last.GetLifecycle().GetError())
}

// TestBackendUpstreams runs the backend against upstreams that answer in
// unusual shapes or fail.
func TestBackendUpstreams(t *testing.T) {
	url := upstreamServer(t)
	be, err := evergreen.NewBackend(evergreen.BackendConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		target string
		text   string
		status canonical.RunStatus
		code   canonical.Code
		msg    string
	}{
		{target: "children", text: "hello wonderful world", status: canonical.StatusCompleted},
		{target: "quote-input", text: "quote me", status: canonical.StatusCompleted},
		{target: "hold", text: "done", status: canonical.StatusCompleted},
		{target: "fail-unavailable", text: "partial", status: canonical.StatusFailed, code: canonical.CodeUnavailable, msg: "upstream says no"},
		{target: "fail-resource_exhausted", text: "partial", status: canonical.StatusFailed, code: canonical.CodeResourceExhausted, msg: "upstream says no"},
		{target: "action", status: canonical.StatusFailed, code: canonical.CodeUnimplemented, msg: "upstream sent an action"},
		{target: "early", text: "half", status: canonical.StatusFailed, code: canonical.CodeInternal, msg: `before output "response" was complete`},
		{target: "bad", status: canonical.StatusFailed, code: canonical.CodeInternal, msg: "upstream broke the protocol"},
		{target: "writes-input", status: canonical.StatusFailed, code: canonical.CodeInternal, msg: "written by the server"},
	}
	for _, tc := range cases {
		t.Run(tc.target, func(t *testing.T) {
			events, err := runBackend(t, be, textRequest(tc.target, "quote me"))
			if err != nil {
				t.Fatal(err)
			}
			st, ce := terminal(events)
			if st != tc.status || canonical.CodeOf(errOrNil(ce)) != tc.code || (tc.msg != "" && !strings.Contains(ce.Message, tc.msg)) {
				t.Fatalf("ended %s %v, want %s %s %q", st, ce, tc.status, tc.code, tc.msg)
			}
			if got := textOf(events); got != tc.text {
				t.Errorf("text %q, want %q", got, tc.text)
			}
		})
	}
}

func errOrNil(e *canonical.Error) error {
	if e == nil {
		return nil
	}
	return e
}

// TestBackendUnreachable: an upstream that cannot be reached fails Start
// with UNAVAILABLE, before any event.
func TestBackendUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	be, err := evergreen.NewBackend(evergreen.BackendConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	s, err := be.Start(testCtx(t), textRequest("echo", "x"))
	if err == nil {
		_ = s.Close()
		t.Fatal("Start succeeded against a closed port")
	}
	if canonical.CodeOf(err) != canonical.CodeUnavailable {
		t.Fatalf("Start: %v, want UNAVAILABLE", err)
	}
}

// TestBackendConnectProtocol talks the Connect protocol to a bridge and
// sends the configured target.
func TestBackendConnectProtocol(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	be, err := evergreen.NewBackend(evergreen.BackendConfig{URL: inst.URL, Protocol: "connect", Target: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	events, err := runBackend(t, be, textRequest("anything", "over connect"))
	if err != nil {
		t.Fatal(err)
	}
	if st, ce := terminal(events); st != canonical.StatusCompleted || textOf(events) != "over connect" {
		t.Fatalf("ended %s %v with %q", st, ce, textOf(events))
	}
	// A target the upstream does not know fails with its NOT_FOUND.
	be2, _ := evergreen.NewBackend(evergreen.BackendConfig{URL: inst.URL})
	events, err = runBackend(t, be2, textRequest("gpt-9", "x"))
	if err != nil {
		if canonical.CodeOf(err) != canonical.CodeNotFound {
			t.Fatal(err)
		}
		return
	}
	if st, ce := terminal(events); st != canonical.StatusFailed || ce.Code != canonical.CodeNotFound {
		t.Fatalf("ended %s %v", st, ce)
	}
}

// TestBackendCancel: closing the stream mid-run cancels the upstream and
// ends the run once.
func TestBackendCancel(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	be, _ := evergreen.NewBackend(evergreen.BackendConfig{URL: inst.URL})
	req := textRequest("stream", "x")
	req.Parameters = map[string]*structpb.Value{"hang": canonical.Value(true)}
	s, err := be.Start(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil { // running
		t.Fatal(err)
	}
	_ = s.Close()
	var events []*canonical.Event
	for {
		e, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	if len(events) == 0 {
		t.Fatal("no terminal event")
	}
	if st, _ := terminal(events); st != canonical.StatusCancelled && st != canonical.StatusFailed {
		t.Fatalf("ended %s", st)
	}
}

// TestBackendConfig names bad options.
func TestBackendConfig(t *testing.T) {
	_, err := evergreen.NewBackend(evergreen.BackendConfig{URL: "ftp://x", Protocol: "soap", Outputs: []string{"images"}, Limits: evergreen.Limits{MaxDepth: -1}})
	for _, want := range []string{`url: "ftp://x" is not an http(s) URL with a host`, `protocol: "soap"`, `outputs: "images"`, "max_depth: must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
	if _, err := evergreen.NewBackend(evergreen.BackendConfig{}); err == nil || !strings.Contains(err.Error(), "url: required") {
		t.Errorf("missing url: %v", err)
	}
}
