package native_test

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/adapters/native"
	"github.com/interlingua-dev/interlingua/adapters/scripted"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runner runs the scripted backend with fixed ids, as the bridge would.
type runner struct{ be *scripted.Backend }

func (r runner) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	req.RunId, req.ThreadId = "run-1", "thread-1"
	s, err := r.be.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return &stamp{Stream: s}, nil
}
func (runner) Target(string) (canonical.TargetInfo, bool) { return canonical.TargetInfo{}, true }
func (runner) Targets() []canonical.TargetInfo            { return nil }

type stamp struct {
	canonical.Stream
	seq uint64
}

func (s *stamp) Recv() (*canonical.Event, error) {
	ev, err := s.Stream.Recv()
	if ev != nil {
		s.seq++
		ev.ThreadId, ev.RunId, ev.Seq, ev.TimeUnixNano = "thread-1", "run-1", s.seq, int64(s.seq)
	}
	return ev, err
}

func server(t *testing.T, cfg native.Config) *httptest.Server {
	cfg.Runner = runner{be: scripted.New(scripted.Config{})}
	mux := http.NewServeMux()
	native.NewFrontend(cfg).Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// compactLines compacts each JSON line: protojson randomizes its spacing
// per build, so the golden files hold the compact form.
func compactLines(body []byte) string {
	var out bytes.Buffer
	for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
		v := json.Value(line)
		_ = v.Compact() // a line that is not JSON stays as it is
		out.Write(v)
		out.WriteByte('\n')
	}
	return out.String()
}

func TestWire(t *testing.T) {
	srv := server(t, native.Config{MaxRequestBytes: 256})
	tests := []struct{ name, body string }{
		{"echo", `{"target":"echo","inputs":[{"name":"prompt","node":{"data":"aGVsbG8gd29ybGQ="}}]}`},
		{"unknown-field", `{"target":"echo","tenperature":1}`},
		{"no-target", `{"inputs":[]}`},
		{"not-json", `{target`},
		{"too-big", `{"target":"echo","metadata":{"x":"` + strings.Repeat("y", 300) + `"}}`},
		{"bad-parameter", `{"target":"echo","parameters":{"delay_ms":-1}}`},
		{"failure", `{"target":"echo","parameters":{"fail_after":1,"fail_code":"unavailable"},"inputs":[{"name":"prompt","node":{"data":"YSBi"}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/v1/runs", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got := []byte(resp.Status + "\n" + resp.Header.Get("Content-Type") + "\n\n" + compactLines(body))
			golden := "testdata/" + tt.name + ".golden"
			if *update {
				_ = os.WriteFile(golden, got, 0o644)
			}
			want, _ := os.ReadFile(golden)
			if !bytes.Equal(got, want) {
				t.Fatalf("wire differs from %s:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// Every canonical code has an HTTP status, and the error body names it.
func TestErrorTable(t *testing.T) {
	for _, c := range canonical.AllCodes {
		if c == canonical.CodeOK {
			continue
		}
		rec := httptest.NewRecorder()
		native.WriteErrorForTest(rec, canonical.Errorf(c, "because"))
		var body map[string]string
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code < 400 || body["code"] != c.String() || body["message"] != "because" {
			t.Errorf("%v: status %d body %v", c, rec.Code, body)
		}
	}
}
