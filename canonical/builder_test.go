package canonical

import (
	"strconv"
	"strings"
	"testing"
)

func kinds(evs []*Event) []string {
	var out []string
	for _, e := range evs {
		switch k := e.GetKind().(type) {
		case *KindLifecycle:
			out = append(out, "lifecycle:"+k.Lifecycle.GetStatus().String())
		case *KindMessageStart:
			out = append(out, "message-start")
		case *KindMessageFinish:
			out = append(out, "message-finish:"+k.MessageFinish.GetFinishReason().String())
		case *KindBlockStart:
			out = append(out, "block-start:"+k.BlockStart.GetType().String())
		case *KindBlockDelta:
			out = append(out, "delta:"+k.BlockDelta.GetText())
		case *KindBlockFinish:
			out = append(out, "block-finish")
		default:
			out = append(out, "other")
		}
	}
	return out
}

func eq(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("at %d: got %q\nwant %q", i, got, want)
		}
	}
}

func TestBuilderOpensAndClosesImplicitly(t *testing.T) {
	b := NewBuilder()
	var out []*Event
	out = b.Lifecycle(out, StatusRunning)
	out = b.Reasoning(out, "think")
	out = b.Text(out, "a")
	out = b.Text(out, "b")
	out = b.Text(out, "") // nothing
	out = b.End(out, StatusCompleted, nil)
	out = b.End(out, StatusCompleted, nil) // second End appends nothing
	eq(t, kinds(out), []string{
		"lifecycle:RUN_STATUS_RUNNING", "message-start", "block-start:BLOCK_TYPE_REASONING", "delta:think",
		"block-finish", "block-start:BLOCK_TYPE_TEXT", "delta:a", "delta:b", "block-finish",
		"message-finish:FINISH_REASON_STOP", "lifecycle:RUN_STATUS_COMPLETED",
	})
	if err := Validate(out); err != nil {
		t.Fatal(err)
	}
}

func TestBuilderEndFailedClosesNested(t *testing.T) {
	b := NewBuilder()
	nested := NewBuilder("tool:1")
	var out []*Event
	out = b.ToolCall(out, "c1", "calc")
	out = b.ToolArgs(out, `{"a":`)
	out = nested.Text(out, "x")
	// The root builder does not know the nested builder's state: ending
	// the nested one first is the producer's job; Guard covers the rest.
	out = nested.End(out, StatusCompleted, nil)
	out = b.End(out, StatusFailed, Errorf(CodeUnavailable, "upstream down"))
	if err := Validate(out); err != nil {
		t.Fatal(err)
	}
	last := out[len(out)-1].GetLifecycle()
	if last.GetStatus() != StatusFailed || Code(last.GetError().GetCode()) != CodeUnavailable {
		t.Fatalf("terminal = %v", last)
	}
}

func TestGuardSuppliesOwedEvents(t *testing.T) {
	var g Guard
	evs := []*Event{lc(StatusRunning), ms(), bs(0, BlockText), bd(0, "partial")}
	for _, e := range evs {
		if err := g.Observe(e); err != nil {
			t.Fatal(err)
		}
	}
	evs = g.End(evs, StatusCancelled, nil)
	if err := Validate(evs); err != nil {
		t.Fatal(err)
	}
	eq(t, kinds(evs[4:]), []string{"block-finish", "message-finish:FINISH_REASON_ERROR", "lifecycle:RUN_STATUS_CANCELLED"})
	if c := Code(evs[len(evs)-1].GetLifecycle().GetError().GetCode()); c != CodeCanceled {
		t.Fatalf("cancelled code = %v", c)
	}
	if more := g.End(nil, StatusFailed, nil); len(more) != 0 {
		t.Fatalf("End after the terminal appended %d events", len(more))
	}
}

func TestGuardRefusesBrokenEvent(t *testing.T) {
	var g Guard
	if err := g.Observe(bd(0, "x")); err == nil || err.Code != CodeInternal {
		t.Fatalf("got %v, want an internal error", err)
	}
}

// A run's blocks and namespaces are bounded: the one past MaxRunBlocks is
// refused, naming the limit.
func TestGuardBoundsBlocksAndNamespaces(t *testing.T) {
	var g Guard
	if err := g.Observe(ms()); err != nil {
		t.Fatal(err)
	}
	for i := range uint32(MaxRunBlocks) {
		if err := g.Observe(bs(i, BlockToolCall)); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if err := g.Observe(bf(i)); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
	}
	if err := g.Observe(bs(MaxRunBlocks, BlockToolCall)); err == nil || !strings.Contains(err.Message, "more than 65536 content blocks in one run") {
		t.Fatalf("block %d: %v", MaxRunBlocks, err)
	}
	var n Guard
	for i := range MaxRunBlocks - 1 {
		ev := lc(StatusRunning)
		ev.Namespace = []string{strconv.Itoa(i)}
		if err := n.Observe(ev); err != nil {
			t.Fatalf("namespace %d: %v", i, err)
		}
	}
	ev := lc(StatusRunning)
	if err := n.Observe(ev); err != nil { // the run's own: the last one allowed
		t.Fatal(err)
	}
	if err := n.Observe(lc(StatusRunning)); err != nil { // one seen before
		t.Fatal(err)
	}
	ev.Namespace = []string{"one more"}
	if err := n.Observe(ev); err == nil || !strings.Contains(err.Message, "more than 65536 namespaces in one run") {
		t.Fatalf("one namespace more: %v", err)
	}
}

func TestCodes(t *testing.T) {
	for _, c := range AllCodes {
		got, ok := ParseCode(c.String())
		if !ok || got != c {
			t.Fatalf("ParseCode(%q) = %v, %v", c.String(), got, ok)
		}
	}
	if CodeOf(nil) != CodeOK || AsError(nil) != nil {
		t.Fatal("nil error must be OK and convert to a literal nil")
	}
}

// An upstream's HTTP error status reads as the code its meaning names;
// the statuses without one fall back by class.
func TestCodeOfHTTPStatus(t *testing.T) {
	for status, want := range map[int]Code{
		200: CodeOK, 204: CodeOK,
		400: CodeInvalidArgument, 422: CodeInvalidArgument, 418: CodeInvalidArgument,
		401: CodeUnauthenticated, 402: CodeFailedPrecondition, 403: CodePermissionDenied,
		404: CodeNotFound, 405: CodeUnimplemented, 501: CodeUnimplemented,
		408: CodeDeadlineExceeded, 504: CodeDeadlineExceeded, 409: CodeAborted,
		413: CodeInvalidArgument, 429: CodeResourceExhausted, 499: CodeCanceled,
		500: CodeInternal, 502: CodeUnavailable, 503: CodeUnavailable, 529: CodeUnavailable,
		0: CodeUnknown, 302: CodeUnknown, 599: CodeUnknown,
	} {
		if got := CodeOfHTTPStatus(status); got != want {
			t.Errorf("CodeOfHTTPStatus(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestPromptText(t *testing.T) {
	conv := &Node{Children: []*Node{
		TextNode("system", "be brief"), TextNode("user", "hi"), TextNode("assistant", "hello"),
		TextNode("user", "what is "), TextNode("user", "6*7?"),
	}}
	req := &Request{Inputs: []*NamedNode{{Name: "prompt", Node: conv}}}
	if got := PromptText(req); got != "what is 6*7?" {
		t.Fatalf("conversation prompt = %q, want the last user turn", got)
	}
	plain := &Request{Inputs: []*NamedNode{{Name: "x", Node: TextNode("", "a ")}, {Name: "y", Node: TextNode("", "b")}}}
	if got := PromptText(plain); got != "a b" {
		t.Fatalf("plain prompt = %q", got)
	}
}

func TestSetKind(t *testing.T) {
	e := &Event{}
	if !SetKind(e, &KindCustom{Custom: &Custom{Name: "x"}}) || e.GetCustom().GetName() != "x" {
		t.Fatalf("SetKind custom: %v", e)
	}
	if SetKind(e, "not a kind") || e.GetCustom() == nil {
		t.Fatal("SetKind accepted a non-kind or changed the event")
	}
}

var sinkEvent *Event

// A text delta is one heap object (the event, its oneof wrapper and the
// payload together); the Builder adds nothing per delta.
func TestBuilderTextDeltaIsOneAllocation(t *testing.T) {
	b := NewBuilder()
	out := b.Text(nil, "tok ")
	n := testing.AllocsPerRun(1000, func() {
		out = b.Text(out[:0], "tok ")
		sinkEvent = out[0]
	})
	if n != 1 {
		t.Fatalf("Builder.Text: %v allocations per delta, want 1", n)
	}
	ev := NewTextDelta(2, "x")
	if ev.GetBlockDelta().GetText() != "x" || ev.GetBlockDelta().GetIndex() != 2 {
		t.Fatalf("NewTextDelta: got %v", ev)
	}
}

func BenchmarkBuilderTextDelta(b *testing.B) {
	bd := NewBuilder()
	out := bd.Text(nil, "tok ")
	b.ReportAllocs()
	for b.Loop() {
		out = bd.Text(out[:0], "tok ")
		sinkEvent = out[0]
	}
}
