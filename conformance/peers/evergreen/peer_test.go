package evergreenpeer_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	evergreenpeer "github.com/interlingua-dev/interlingua/conformance/peers/evergreen"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
)

func start(t *testing.T, p *evergreenpeer.Peer) evergreenv2connect.EvergreenServiceClient {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(p.Handler())
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &pr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return evergreenv2connect.NewEvergreenServiceClient(&http.Client{Transport: tr}, srv.URL, connect.WithGRPC())
}

// session sends a GENERATE for target with the given outputs and a prompt
// leaf, half-closes, and returns the fragments received and the status.
func session(ctx context.Context, c evergreenv2connect.EvergreenServiceClient, target string, outputs ...string) ([]*ev.NodeFragment, error) {
	s := c.StartSession(ctx)
	a := &ev.Action{Name: "GENERATE", TargetSpec: &ev.TargetSpec{Id: target}, Inputs: []*ev.NamedParameter{{Name: "prompt", Id: "p"}}}
	for _, o := range outputs {
		a.Outputs = append(a.Outputs, &ev.NamedParameter{Name: o, Id: o + "-1"})
	}
	_ = s.Send(&ev.SessionMessage{Actions: []*ev.Action{a}, NodeFragments: []*ev.NodeFragment{{Id: "p",
		ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain"}, Payload: &ev.Chunk_Data{Data: []byte("hi")}}}}})
	_ = s.CloseRequest()
	var out []*ev.NodeFragment
	for {
		m, err := s.Receive()
		if errors.Is(err, io.EOF) {
			return out, s.CloseResponse()
		}
		if err != nil {
			_ = s.CloseResponse()
			return out, err
		}
		out = append(out, m.GetNodeFragments()...)
	}
}

func TestShapes(t *testing.T) {
	c := start(t, evergreenpeer.New(map[string]evergreenpeer.Script{
		"leaf": {Parts: []evergreenpeer.Part{
			{Output: evergreenpeer.Response, Fragments: [][]byte{[]byte("a"), []byte("b")}},
			{Output: evergreenpeer.Reasoning, Fragments: [][]byte{[]byte("r")}},
		}},
		"tree": {Parts: []evergreenpeer.Part{
			{Output: evergreenpeer.Response, Mime: "image/png", Fragments: [][]byte{{1, 2}}},
			{Output: evergreenpeer.Response, Fragments: [][]byte{[]byte("t")}},
		}},
		"fail": {Parts: []evergreenpeer.Part{{Output: evergreenpeer.Response, Fragments: [][]byte{[]byte("x")}}},
			Abort: connect.NewError(connect.CodeDataLoss, errors.New("broke"))},
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	frags, err := session(ctx, c, "leaf", "response", "reasoning", "tool_calls")
	if err != nil {
		t.Fatal(err)
	}
	// response-1 leaf: seq 0 (metadata), seq 1, empty final seq 2; reasoning
	// root with one child; tool_calls closed empty.
	want := []string{"response-1/0/c", "response-1/1/c", "response-1/2/f", "reasoning-1/0/c[reasoning-1-1]",
		"reasoning-1-1/0/c", "reasoning-1-1/1/f", "reasoning-1/1/f", "tool_calls-1/0/f"}
	if got := describe(frags); !equal(got, want) {
		t.Fatalf("leaf: %v, want %v", got, want)
	}
	if frags[0].GetChunkFragment().GetMetadata().GetMimetype() != "text/plain" || frags[1].GetChunkFragment().GetMetadata() != nil {
		t.Fatal("metadata must be on seq 0 only")
	}

	frags, err = session(ctx, c, "tree", "response")
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"response-1/0/c[response-1-1]", "response-1-1/0/c", "response-1-1/1/f", "response-1/1/c[response-1-2]",
		"response-1-2/0/c", "response-1-2/1/f", "response-1/2/f"}
	if got := describe(frags); !equal(got, want) {
		t.Fatalf("tree: %v, want %v", got, want)
	}

	frags, err = session(ctx, c, "fail", "response")
	if connect.CodeOf(err) != connect.CodeDataLoss || len(frags) != 2 {
		t.Fatalf("fail: %v after %d fragments, want data_loss after 2 (no final one)", err, len(frags))
	}

	if _, err := session(ctx, c, "nope", "response"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("unknown target: %v, want not_found", err)
	}
}

func TestHangReportsCancel(t *testing.T) {
	p := evergreenpeer.New(map[string]evergreenpeer.Script{"hang": {Hang: true,
		Parts: []evergreenpeer.Part{{Output: evergreenpeer.Response, Fragments: [][]byte{[]byte("w")}}}}})
	c := start(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	s := c.StartSession(ctx)
	_ = s.Send(&ev.SessionMessage{Actions: []*ev.Action{{Name: "GENERATE", TargetSpec: &ev.TargetSpec{Id: "hang"},
		Outputs: []*ev.NamedParameter{{Name: "response", Id: "r"}}}}})
	_ = s.CloseRequest()
	if _, err := s.Receive(); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = s.CloseResponse()
	select {
	case got := <-p.Cancelled():
		if got != "hang" {
			t.Fatalf("cancelled %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the peer did not report the cancel")
	}
}

func describe(fs []*ev.NodeFragment) []string {
	var out []string
	for _, f := range fs {
		s := f.GetId() + "/" + string(rune('0'+f.GetSeq())) + "/"
		if f.GetContinued() {
			s += "c"
		} else {
			s += "f"
		}
		if len(f.GetChildIds()) > 0 {
			s += "[" + f.GetChildIds()[0] + "]"
		}
		out = append(out, s)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
