package scripted

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// calc is a Tools with only the calculator's fixed answer.
type calc struct{}

func (calc) Call(_ context.Context, name string, _ []byte) ([]byte, error) {
	if name != "calculator" {
		return nil, canonical.Errorf(canonical.CodeNotFound, "tool %q", name)
	}
	return []byte(`{"result":42}`), nil
}

func request(target, prompt string, params map[string]any) *canonical.Request {
	r := &canonical.Request{RunId: "r1", Target: target, Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", prompt)}}}
	r.Parameters = map[string]*structpb.Value{}
	for k, v := range params {
		r.Parameters[k] = canonical.Value(v)
	}
	return r
}

func runAll(t *testing.T, req *canonical.Request) []*canonical.Event {
	t.Helper()
	s, err := New(Config{Tools: calc{}}).Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := canonical.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// golden compares events, one compact JSON object per line, with
// testdata/<name>.events.json.
func golden(t *testing.T, name string, evs []*canonical.Event) {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range evs {
		b, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		// protojson randomizes spacing; compact it for a stable file.
		v := json.Value(b)
		if err := v.Compact(); err != nil {
			t.Fatal(err)
		}
		buf.Write(v)
		buf.WriteByte('\n')
	}
	path := filepath.Join("testdata", name+".events.json")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("events differ from %s:\n got:\n%s\nwant:\n%s", path, buf.Bytes(), want)
	}
}

func TestTargets(t *testing.T) {
	tests := []struct {
		name   string
		req    *canonical.Request
		golden string
	}{
		{"echo", request("echo", "hello big world", nil), "echo"},
		{"demo-agent", request("demo-agent", "what is 6*7?", nil), "demo-agent"},
		{"demo-approval asks", request("demo-approval", "go", nil), "demo-approval"},
		{"demo-approval approved", func() *canonical.Request {
			r := request("demo-approval", "go", nil)
			r.Resume = map[string]*structpb.Value{"approve-r0": canonical.Value(map[string]any{"approved": true})}
			return r
		}(), "demo-approval-approved"},
		{"demo-approval declined", func() *canonical.Request {
			r := request("demo-approval", "go", nil)
			r.Resume = map[string]*structpb.Value{"approve-r0": canonical.Value(map[string]any{"approved": false})}
			return r
		}(), "demo-approval-declined"},
		{"stream", request("stream", "", map[string]any{"deltas": 3.0, "delta_text": "ab"}), "stream"},
		{"fail after", request("echo", "a b c", map[string]any{"fail_after": 1.0, "fail_code": "resource_exhausted", "fail_message": "quota"}), "fail-after"},
		{"split rune", request("echo", "hi", map[string]any{"split_rune": true}), "split-rune"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden(t, tt.golden, runAll(t, tt.req))
		})
	}
}

func TestBadParameters(t *testing.T) {
	for _, p := range []map[string]any{
		{"delay_ms": -1.0}, {"delay_ms": 1.5}, {"fail_after": "x"}, {"fail_after": 1.0, "fail_code": "nope"},
		{"fail_after": 1.0, "fail_code": 0.0}, {"deltas": map[string]any{}},
	} {
		target := "echo"
		if _, ok := p["deltas"]; ok {
			target = "stream"
		}
		_, err := New(Config{}).Start(context.Background(), request(target, "x", p))
		if canonical.CodeOf(err) != canonical.CodeInvalidArgument {
			t.Errorf("%v: got %v, want invalid_argument", p, err)
		}
	}
	if _, err := New(Config{}).Start(context.Background(), request("nope", "x", nil)); canonical.CodeOf(err) != canonical.CodeNotFound {
		t.Errorf("unknown target: %v", err)
	}
}

// TestHangEndsOnCancel: a run that hangs after its first content delta,
// cancelled there, is a valid run of the model ending cancelled, on every
// target: what it still owes (finishes of its open block and message)
// comes before the terminal event.
func TestHangEndsOnCancel(t *testing.T) {
	for _, target := range []string{"echo", "demo-agent", "demo-approval", "stream", "cortex-example"} {
		t.Run(target, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := New(Config{Tools: calc{}}).Start(ctx, request(target, "a b", map[string]any{"hang": true}))
			if err != nil {
				t.Fatal(err)
			}
			var evs []*canonical.Event
			for {
				ev, err := s.Recv()
				if err != nil {
					t.Fatalf("ended before a content delta: %v", err)
				}
				evs = append(evs, ev)
				if _, ok := ev.GetKind().(*canonical.KindBlockDelta); ok {
					break
				}
			}
			cancel()
			rest, _ := canonical.Collect(s)
			evs = append(evs, rest...)
			if err := canonical.Validate(evs); err != nil {
				t.Fatal(err)
			}
			if st, _ := canonical.TerminalOf(evs[len(evs)-1]); st != canonical.StatusCancelled {
				t.Fatalf("terminal %v", evs[len(evs)-1])
			}
		})
	}
}

func BenchmarkStreamDelta(b *testing.B) {
	be := New(Config{})
	b.ReportAllocs()
	// Streams of at most a million deltas: the target refuses more than
	// ten million, and on a quiet machine b.N goes past that.
	for left := b.N; left > 0; {
		n := min(left, 1_000_000)
		s, err := be.Start(context.Background(), request("stream", "", map[string]any{"deltas": float64(n)}))
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := s.Recv(); err != nil {
				break
			}
		}
		s.Close()
		left -= n
	}
}
