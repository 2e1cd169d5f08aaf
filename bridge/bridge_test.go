package bridge

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/adapters/scripted"
	"github.com/interlingua-dev/interlingua/canonical"
)

func testBridge(t *testing.T, routes []Route, backends map[string]canonical.Backend) *Bridge {
	t.Helper()
	return NewBridge(NewRouter(routes, backends, nil), nil, slog.New(slog.DiscardHandler))
}

func scriptedBridge(t *testing.T) *Bridge {
	reg := NewToolRegistry(ToolsConfig{Allow: []string{"calculator"}, Timeout: time.Second}, nil, "interlingua", slog.New(slog.DiscardHandler))
	return testBridge(t, DefaultConfig().Routes, map[string]canonical.Backend{"scripted": scripted.New(scripted.Config{Tools: reg})})
}

func req(target, prompt string, params map[string]any) *canonical.Request {
	r := &canonical.Request{Target: target, Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", prompt)}}}
	if params != nil {
		r.Parameters = map[string]*structpb.Value{}
		for k, v := range params {
			r.Parameters[k] = canonical.Value(v)
		}
	}
	return r
}

func TestRunStampsAndValidates(t *testing.T) {
	b := scriptedBridge(t)
	r := req("demo-agent", "hi", nil)
	r.ThreadId = "thread-1"
	s, err := b.Run(context.Background(), r)
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
	for i, ev := range evs {
		if ev.GetThreadId() != "thread-1" || ev.GetRunId() == "" || ev.GetSeq() != uint64(i+1) || ev.GetTimeUnixNano() == 0 {
			t.Fatalf("event %d not stamped: %v", i, ev)
		}
	}
	// A second run on the thread continues the thread's seq.
	r2 := req("echo", "again", nil)
	r2.ThreadId = "thread-1"
	s2, err := b.Run(context.Background(), r2)
	if err != nil {
		t.Fatal(err)
	}
	evs2, _ := canonical.Collect(s2)
	if evs2[0].GetSeq() != uint64(len(evs)+1) {
		t.Fatalf("second run starts at seq %d, want %d", evs2[0].GetSeq(), len(evs)+1)
	}
	if b.Running() != 0 {
		t.Fatalf("%d runs still registered", b.Running())
	}
}

func TestUnknownTarget(t *testing.T) {
	b := scriptedBridge(t)
	_, err := b.Run(context.Background(), req("nope", "x", nil))
	if canonical.CodeOf(err) != canonical.CodeNotFound {
		t.Fatalf("got %v", err)
	}
	if _, ok := b.Target("nope"); ok {
		t.Fatal("Target(nope) resolved")
	}
	if _, ok := b.Target("echo"); !ok {
		t.Fatal("Target(echo) did not resolve")
	}
}

func TestRouterGlobAndKnower(t *testing.T) {
	sc := scripted.New(scripted.Config{})
	r := NewRouter([]Route{{Target: "*", Backend: "s"}}, map[string]canonical.Backend{"s": sc}, nil)
	if _, _, ok := r.Resolve("echo"); !ok {
		t.Fatal("glob did not route a known target")
	}
	if _, _, ok := r.Resolve("unknown-model"); ok {
		t.Fatal("glob routed a target the backend does not know")
	}
	r = NewRouter([]Route{{Target: "my-echo", Backend: "s", Model: "echo"}}, map[string]canonical.Backend{"s": sc}, nil)
	if _, _, ok := r.Resolve("my-echo"); !ok {
		t.Fatal("renamed target did not route")
	}
	if got := r.Targets(); len(got) != 1 || got[0].Name != "my-echo" {
		t.Fatalf("Targets = %v", got)
	}
}

func TestRouteParameters(t *testing.T) {
	sc := scripted.New(scripted.Config{})
	b := testBridge(t, []Route{{Target: "short", Backend: "s", Model: "echo", Parameters: map[string]any{"fail_after": 1.0, "fail_code": "aborted"}}},
		map[string]canonical.Backend{"s": sc})
	s, err := b.Run(context.Background(), req("short", "a b c", nil))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := canonical.Collect(s)
	if lc := evs[len(evs)-1].GetLifecycle(); canonical.Code(lc.GetError().GetCode()) != canonical.CodeAborted {
		t.Fatalf("route parameters not applied: %v", lc)
	}
	// A request's own value wins.
	s, err = b.Run(context.Background(), req("short", "a b c", map[string]any{"fail_after": 9.0}))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ = canonical.Collect(s)
	if st, _ := canonical.TerminalOf(evs[len(evs)-1]); st != canonical.StatusCompleted {
		t.Fatalf("request parameter did not win: %v", evs[len(evs)-1])
	}
}

func TestFailureInjection(t *testing.T) {
	b := scriptedBridge(t)
	s, err := b.Run(context.Background(), req("echo", "a b c d", map[string]any{"fail_after": 2.0, "fail_code": "unavailable"}))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := canonical.Collect(s)
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1].GetLifecycle()
	if last.GetStatus() != canonical.StatusFailed || canonical.Code(last.GetError().GetCode()) != canonical.CodeUnavailable {
		t.Fatalf("terminal = %v", last)
	}
	var text string
	for _, ev := range evs {
		text += ev.GetBlockDelta().GetText()
	}
	if text != "a b" {
		t.Fatalf("text before failure = %q, want %q", text, "a b")
	}
}

func TestSplitRuneNeverBroken(t *testing.T) {
	b := scriptedBridge(t)
	s, err := b.Run(context.Background(), req("echo", "x", map[string]any{"split_rune": true}))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := canonical.Collect(s)
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	var text string
	for _, ev := range evs {
		text += ev.GetBlockDelta().GetText()
	}
	if text != "x \U0001F600!" {
		t.Fatalf("text = %q", text)
	}
}

func TestCancelEndsWithCancelled(t *testing.T) {
	b := scriptedBridge(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := b.Run(ctx, req("echo", "a b", map[string]any{"hang": true}))
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Recv()
	if err != nil || first.GetLifecycle().GetStatus() != canonical.StatusRunning {
		t.Fatalf("first = %v, %v", first, err)
	}
	cancel()
	evs, _ := canonical.Collect(s)
	if err := canonical.Validate(append([]*canonical.Event{first}, evs...)); err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1].GetLifecycle()
	if last.GetStatus() != canonical.StatusCancelled || canonical.Code(last.GetError().GetCode()) != canonical.CodeCanceled {
		t.Fatalf("terminal = %v", last)
	}
}

// brokenBackend sends a delta outside any block, then ends without a
// terminal event.
type brokenBackend struct{ evs []*canonical.Event }

func (b *brokenBackend) Start(context.Context, *canonical.Request) (canonical.Stream, error) {
	return &sliceStream{evs: b.evs}, nil
}

type sliceStream struct{ evs []*canonical.Event }

func (s *sliceStream) Recv() (*canonical.Event, error) {
	if len(s.evs) == 0 {
		return nil, io.EOF
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, nil
}
func (s *sliceStream) Close() error { return nil }

func TestGuardedBackends(t *testing.T) {
	tests := []struct {
		name string
		evs  []*canonical.Event
		code canonical.Code
	}{
		{"ends without terminal", []*canonical.Event{
			{Kind: &canonical.KindMessageStart{MessageStart: &canonical.MessageStart{}}},
		}, canonical.CodeUnavailable},
		{"breaks the model", []*canonical.Event{
			{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "x"}}},
		}, canonical.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := testBridge(t, []Route{{Target: "x", Backend: "b"}}, map[string]canonical.Backend{"b": &brokenBackend{evs: tt.evs}})
			s, err := b.Run(context.Background(), &canonical.Request{Target: "x"})
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := canonical.Collect(s)
			if err := canonical.Validate(evs); err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1].GetLifecycle()
			if last.GetStatus() != canonical.StatusFailed || canonical.Code(last.GetError().GetCode()) != tt.code {
				t.Fatalf("terminal = %v", last)
			}
		})
	}
}

func TestDrainCancelsAfterTimeout(t *testing.T) {
	b := scriptedBridge(t)
	s, err := b.Run(context.Background(), req("echo", "a", map[string]any{"hang": true}))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []*canonical.Event)
	go func() { evs, _ := canonical.Collect(s); got <- evs }()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	b.Drain(ctx, 5*time.Second)
	evs := <-got
	// The client did not cancel: the run failed, unavailable, and says why.
	last := evs[len(evs)-1].GetLifecycle()
	if last.GetStatus() != canonical.StatusFailed || canonical.Code(last.GetError().GetCode()) != canonical.CodeUnavailable ||
		last.GetError().GetMessage() != "the server is shutting down" {
		t.Fatalf("terminal = %v", evs[len(evs)-1])
	}
	if _, err := b.Run(context.Background(), req("echo", "a", nil)); canonical.CodeOf(err) != canonical.CodeUnavailable {
		t.Fatalf("run during drain: %v", err)
	}
	if ctx.Err() == nil {
		t.Fatal("drain returned before its timeout with a run still going")
	}
}
