package responses

import (
	"cmp"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// slowRunner's runs think (send nothing) for pause, then answer text
// ("done" when empty).
type slowRunner struct {
	pause time.Duration
	text  string
}

func (r slowRunner) Run(ctx context.Context, _ *canonical.Request) (canonical.Stream, error) {
	b := canonical.NewBuilder()
	evs := b.Text(nil, cmp.Or(r.text, "done"))
	return &slowStream{ctx: ctx, pause: r.pause, evs: b.End(evs, canonical.StatusCompleted, nil)}, nil
}

func (slowRunner) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name}, true
}

func (slowRunner) Targets() []canonical.TargetInfo { return nil }

type slowStream struct {
	ctx    context.Context
	pause  time.Duration
	waited bool
	evs    []*canonical.Event
}

func (s *slowStream) Recv() (*canonical.Event, error) {
	if !s.waited {
		s.waited = true
		select {
		case <-time.After(s.pause):
		case <-s.ctx.Done():
			return nil, s.ctx.Err()
		}
	}
	if len(s.evs) == 0 {
		return nil, io.EOF
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, nil
}

func (s *slowStream) Close() error { return nil }

// TestKeepAlive: a stream silent for longer than keepalive gets ": keepalive"
// comments (not events) between response.in_progress and the output.
func TestKeepAlive(t *testing.T) {
	mux := http.NewServeMux()
	NewFrontend(FrontendConfig{Runner: slowRunner{pause: 300 * time.Millisecond}, KeepAlive: 40 * time.Millisecond}).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := string(body)
	ka := strings.Index(s, ": keepalive\n\n")
	if ka < 0 || ka < strings.Index(s, "response.in_progress") || ka > strings.Index(s, "response.output_item.added") {
		t.Fatalf("no keepalive while the run was silent:\n%s", s)
	}
	if !strings.Contains(s, "event: response.completed\n") || !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Fatalf("stream did not end with completed and [DONE]:\n%s", s)
	}
}
