package canonical_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/canonical/canonicaltest"
)

// run is a script of events: each namespace's Builder builds its events.
type run struct {
	b   map[string]*canonical.Builder
	out []*canonical.Event
}

func (r *run) ns(path string) *canonical.Builder {
	if r.b == nil {
		r.b = map[string]*canonical.Builder{}
	}
	if r.b[path] == nil {
		var ns []string
		if path != "" {
			ns = strings.Split(path, "/")
		}
		r.b[path] = canonical.NewBuilder(ns...)
	}
	return r.b[path]
}

func (r *run) started(path string, cause *canonical.Cause) {
	r.out = r.ns(path).Emit(r.out, &canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusStarted, Cause: cause}}})
}

func (r *run) ended(path string, st canonical.RunStatus) {
	lc := &canonical.Lifecycle{Status: st}
	if st == canonical.StatusFailed {
		lc.Error = canonical.Errorf(canonical.CodeUnknown, "scripted failure").Proto()
	}
	r.out = r.ns(path).Emit(r.out, &canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: lc}})
}

func (r *run) say(path, id string, tokens ...string) {
	b := r.ns(path)
	r.out = b.StartMessage(r.out, id, "assistant")
	for _, t := range tokens {
		r.out = b.Text(r.out, t)
	}
	r.out = b.FinishBlock(r.out)
	r.out = b.FinishMessage(r.out, canonical.FinishStop, nil)
}

func (r *run) emit(path string, ev *canonical.Event) { r.out = r.ns(path).Emit(r.out, ev) }

// describe is an event as the tests compare it: namespace, kind, text.
func describe(ev *canonical.Event) string {
	s := strings.Join(ev.GetNamespace(), "/") + "|"
	switch k := ev.GetKind().(type) {
	case *canonical.KindLifecycle:
		return s + "lifecycle " + strings.ToLower(strings.TrimPrefix(k.Lifecycle.GetStatus().String(), "RUN_STATUS_"))
	case *canonical.KindMessageStart:
		return s + "start " + k.MessageStart.GetMessageId()
	case *canonical.KindBlockDelta:
		return s + k.BlockDelta.GetText()
	case *canonical.KindMessageFinish:
		return s + "finish"
	case *canonical.KindToolStarted:
		return s + "tool " + k.ToolStarted.GetToolCallId()
	case *canonical.KindToolFinished:
		return s + "result " + k.ToolFinished.GetToolCallId()
	case *canonical.KindInputRequested:
		return s + "interrupt " + k.InputRequested.GetInterruptId()
	case *canonical.KindBlockStart, *canonical.KindBlockFinish:
		return ""
	}
	return s + fmt.Sprintf("%T", ev.GetKind())
}

// answer reads the answer of events.
func answer(t *testing.T, events []*canonical.Event, maxHeld int, buffered bool) ([]string, error) {
	t.Helper()
	in := &canonicaltest.Script{Events: events} // every event at hand
	var s canonical.Stream = in
	if buffered {
		s = canonicaltest.Buffered(in)
	}
	a := canonical.AnswerStream(s, maxHeld)
	v := canonical.NewValidator()
	var got []string
	for {
		if left := len(in.Events) - in.Taken(); buffered && a.(canonical.Buffered).Buffered() == 0 && left > 0 {
			t.Fatalf("Buffered says 0 with %d events at hand", left)
		}
		ev, err := a.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return got, err
		}
		if err := v.Check(ev); err != nil {
			t.Fatalf("the answer breaks an invariant at %q: %v", describe(ev), err)
		}
		if d := describe(ev); d != "" {
			got = append(got, d)
		}
	}
	if err := v.End(); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	if !in.Closed {
		t.Error("Close did not close the run's stream")
	}
	return got, nil
}

// TestAnswerStream: what a flat protocol's frontend renders of a run.
func TestAnswerStream(t *testing.T) {
	toolCall := &canonical.Cause{Type: "toolCall", ToolCallId: "call_9"}
	cases := []struct {
		name   string
		script func(r *run)
		want   []string
	}{{
		name: "langgraph react: node tasks are the answer, other lifecycles and state are not",
		script: func(r *run) {
			r.ended("", canonical.StatusRunning)
			r.emit("", &canonical.Event{Kind: &canonical.KindStateSnapshot{StateSnapshot: &canonical.StateSnapshot{}}})
			r.started("model:a", nil)
			r.say("model:a", "msg-1", "Let", " me")
			r.emit("", &canonical.Event{Kind: &canonical.KindStateUpdate{StateUpdate: &canonical.StateUpdate{Node: "model"}}})
			r.ended("model:a", canonical.StatusCompleted)
			r.started("tools:b", nil)
			r.emit("tools:b", &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{ToolCallId: "call_1"}}})
			r.emit("tools:b", &canonical.Event{Kind: &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{ToolCallId: "call_1"}}})
			r.ended("tools:b", canonical.StatusCompleted)
			r.started("model:c", nil)
			r.say("model:c", "msg-2", "42")
			r.ended("model:c", canonical.StatusCompleted)
			r.ended("", canonical.StatusCompleted)
		},
		want: []string{"|lifecycle running", "|start msg-1", "|Let", "| me", "|finish", "|tool call_1", "|result call_1",
			"|start msg-2", "|42", "|finish", "|lifecycle completed"},
	}, {
		name: "a subgraph's own nodes are not; its failed lifecycle is not the run's",
		script: func(r *run) {
			r.started("sub:x", nil)
			r.started("sub:x/inner:y", nil)
			r.say("sub:x/inner:y", "msg-n", "From the subgraph.")
			r.ended("sub:x/inner:y", canonical.StatusFailed)
			r.ended("sub:x", canonical.StatusFailed)
			r.say("", "msg-r", "root")
			r.ended("", canonical.StatusCompleted)
		},
		want: []string{"|start msg-r", "|root", "|finish", "|lifecycle completed"},
	}, {
		name: "a run a tool call started is not; an interrupt from any depth is",
		script: func(r *run) {
			r.started("act-1", toolCall)
			r.say("act-1", "msg-x", "nested")
			r.ended("act-1", canonical.StatusCompleted)
			r.emit("sub:x/ask:z", &canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{InterruptId: "i-1"}}})
			r.ended("", canonical.StatusInterrupted)
		},
		want: []string{"|interrupt i-1", "|lifecycle interrupted"},
	}, {
		name: "parallel nodes' messages: one after the other, in order",
		script: func(r *run) {
			a, b := r.ns("a:1"), r.ns("b:2")
			r.out = a.StartMessage(r.out, "A", "assistant")
			r.out = a.Text(r.out, "a1")
			r.out = b.StartMessage(r.out, "B", "assistant")
			r.out = b.Text(r.out, "b1")
			r.out = a.Text(r.out, "a2")
			r.emit("b:2", &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{ToolCallId: "t"}}})
			r.out = b.FinishBlock(r.out)
			r.out = b.FinishMessage(r.out, canonical.FinishStop, nil)
			r.say("c:3", "C", "c1")
			r.out = a.FinishBlock(r.out)
			r.out = a.FinishMessage(r.out, canonical.FinishStop, nil)
			r.ended("", canonical.StatusCompleted)
		},
		want: []string{"|start A", "|a1", "|a2", "|finish", "|start B", "|b1", "|tool t", "|finish", "|start C", "|c1", "|finish", "|lifecycle completed"},
	}, {
		name: "the root's terminal event releases what waits",
		script: func(r *run) {
			a, b := r.ns("a:1"), r.ns("b:2")
			r.out = a.StartMessage(r.out, "A", "assistant")
			r.out = b.StartMessage(r.out, "B", "assistant")
			r.out = b.Text(r.out, "b1")
			r.out = b.FinishBlock(r.out)
			r.out = b.FinishMessage(r.out, canonical.FinishStop, nil)
			r.out = a.FinishMessage(r.out, canonical.FinishError, nil)
			r.ended("", canonical.StatusFailed)
		},
		want: []string{"|start A", "|finish", "|start B", "|b1", "|finish", "|lifecycle failed"},
	}}
	for _, tc := range cases {
		for _, buffered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/buffered=%v", tc.name, buffered), func(t *testing.T) {
				var r run
				tc.script(&r)
				if err := canonical.Validate(r.out); err != nil {
					t.Fatalf("the script is not a valid run: %v", err)
				}
				got, err := answer(t, r.out, 0, buffered)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("answer\n got %q\nwant %q", got, tc.want)
				}
			})
		}
	}
}

// TestAnswerStreamHeldBound: what waits behind an open message is bounded;
// past the bound the answer fails with ResourceExhausted.
func TestAnswerStreamHeldBound(t *testing.T) {
	var r run
	a, b := r.ns("a:1"), r.ns("b:2")
	r.out = a.StartMessage(r.out, "A", "assistant")
	r.out = b.StartMessage(r.out, "B", "assistant")
	for range 100 {
		r.out = b.Text(r.out, strings.Repeat("x", 100))
	}
	_, err := answer(t, r.out, 4096, false)
	if ce := canonical.AsError(err); err == nil || ce.Code != canonical.CodeResourceExhausted || !strings.Contains(ce.Message, `namespace "a:1"`) {
		t.Fatalf("got %v, want resource_exhausted naming the open namespace", err)
	}
}

// TestAnswerStreamProperty: for random runs whose nodes stream messages
// at once (in the root, two graph nodes, a tool-started run and a
// subgraph's node), the answer is a valid run on the root, each message
// of the root and the graph's nodes comes whole and once, and nothing
// else comes.
func TestAnswerStreamProperty(t *testing.T) {
	paths := []string{"", "a:1", "b:2", "act", "sub:3/inner:4"}
	answers := map[string]bool{"": true, "a:1": true, "b:2": true}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var r run
		r.started("act", &canonical.Cause{Type: "toolCall", ToolCallId: "c"})
		want := map[string]string{} // message id -> its text
		open := map[string]string{} // path -> id of its open message
		for step := 0; step < 40; step++ {
			p := paths[rng.IntN(len(paths))]
			b := r.ns(p)
			switch id := open[p]; {
			case id == "":
				id = fmt.Sprintf("%s#%d", p, step)
				open[p] = id
				r.out = b.StartMessage(r.out, id, "assistant")
			case rng.IntN(4) == 0:
				r.out = b.FinishBlock(r.out)
				r.out = b.FinishMessage(r.out, canonical.FinishStop, nil)
				delete(open, p)
			default:
				tok := fmt.Sprintf("<%d>", step)
				r.out = b.Text(r.out, tok)
				if answers[p] {
					want[id] += tok
				}
			}
		}
		for _, p := range paths {
			if open[p] != "" {
				r.out = r.ns(p).FinishBlock(r.out)
				r.out = r.ns(p).FinishMessage(r.out, canonical.FinishStop, nil)
			}
		}
		r.ended("act", canonical.StatusCompleted)
		r.ended("", canonical.StatusCompleted)
		got, err := answer(t, r.out, 0, seed%2 == 0)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		texts := map[string]string{}
		var cur string
		for _, d := range got {
			switch {
			case strings.HasPrefix(d, "|start "):
				cur = strings.TrimPrefix(d, "|start ")
				if _, dup := texts[cur]; dup {
					t.Fatalf("seed %d: message %s twice", seed, cur)
				}
				texts[cur] = ""
			case strings.HasPrefix(d, "|<"):
				texts[cur] += d[1:]
			case d == "|finish" || d == "|lifecycle completed":
			default:
				t.Fatalf("seed %d: unexpected %q", seed, d)
			}
		}
		for id, text := range want {
			if texts[id] != text {
				t.Fatalf("seed %d: message %s is %q, want %q", seed, id, texts[id], text)
			}
		}
		for id := range texts {
			p, _, _ := strings.Cut(id, "#")
			if !answers[p] {
				t.Fatalf("seed %d: message %s of %q is not the answer", seed, id, p)
			}
		}
	}
}
