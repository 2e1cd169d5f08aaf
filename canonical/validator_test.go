package canonical

import (
	"errors"
	"strings"
	"testing"
)

// ev builders for compact tables.
func lc(s RunStatus) *Event { return &Event{Kind: &KindLifecycle{Lifecycle: &Lifecycle{Status: s}}} }
func failed(c Code) *Event {
	return &Event{Kind: &KindLifecycle{Lifecycle: &Lifecycle{Status: StatusFailed, Error: &ErrorProto{Code: uint32(c), Message: "x"}}}}
}
func ms() *Event {
	return &Event{Kind: &KindMessageStart{MessageStart: &MessageStart{MessageId: "m", Role: "assistant"}}}
}
func mf() *Event { return &Event{Kind: &KindMessageFinish{MessageFinish: &MessageFinish{}}} }
func bs(i uint32, t BlockType) *Event {
	return &Event{Kind: &KindBlockStart{BlockStart: &BlockStart{Index: i, Type: t}}}
}
func bd(i uint32, s string) *Event {
	return &Event{Kind: &KindBlockDelta{BlockDelta: &BlockDelta{Index: i, Text: s}}}
}
func bdd(i uint32, b []byte) *Event {
	return &Event{Kind: &KindBlockDelta{BlockDelta: &BlockDelta{Index: i, Data: b}}}
}
func bf(i uint32) *Event { return &Event{Kind: &KindBlockFinish{BlockFinish: &BlockFinish{Index: i}}} }
func errEv(c Code) *Event {
	return &Event{Kind: &KindError{Error: &ErrorProto{Code: uint32(c), Message: "e"}}}
}
func in(ns []string, e *Event) *Event { e.Namespace = ns; return e }
func seq(n uint64, e *Event) *Event   { e.Seq = n; return e }
func run(id string, e *Event) *Event  { e.RunId = id; return e }

func TestValidator(t *testing.T) {
	ok := []*Event{lc(StatusRunning), ms(), bs(0, BlockText), bd(0, "hi"), bf(0), mf(), lc(StatusCompleted)}
	tests := []struct {
		name   string
		events []*Event
		rule   string // "" = valid
	}{
		{"well formed", ok, ""},
		{"seq increases", []*Event{seq(1, lc(StatusRunning)), seq(2, lc(StatusCompleted))}, ""},
		{"seq repeats", []*Event{seq(2, lc(StatusRunning)), seq(2, lc(StatusCompleted))}, "must strictly increase"},
		{"seq decreases", []*Event{seq(3, lc(StatusRunning)), seq(1, lc(StatusCompleted))}, "must strictly increase"},
		{"seq per thread", []*Event{
			seq(5, lc(StatusRunning)), func() *Event { e := seq(1, run("b", lc(StatusRunning))); e.ThreadId = "t2"; return e }(),
			func() *Event { e := seq(2, run("b", lc(StatusCompleted))); e.ThreadId = "t2"; return e }(), seq(6, lc(StatusCompleted)),
		}, ""},
		{"blocks in sequence", []*Event{ms(), bs(0, BlockReasoning), bd(0, "r"), bf(0), bs(1, BlockText), bd(1, "t"), bf(1), mf(), lc(StatusCompleted)}, ""},
		{"blocks interleave", []*Event{ms(), bs(0, BlockReasoning), bs(1, BlockText), bf(1), bf(0), mf(), lc(StatusCompleted)}, "must not interleave"},
		{"block index skips", []*Event{ms(), bs(1, BlockText), bf(1), mf(), lc(StatusCompleted)}, "index 1, want 0"},
		{"block outside message", []*Event{bs(0, BlockText), bf(0), lc(StatusCompleted)}, "outside a message"},
		{"block without type", []*Event{ms(), bs(0, 0), bf(0), mf(), lc(StatusCompleted)}, "without a type"},
		{"delta outside block", []*Event{ms(), bd(0, "x"), mf(), lc(StatusCompleted)}, "outside a block"},
		{"delta wrong index", []*Event{ms(), bs(0, BlockText), bd(1, "x"), bf(0), mf(), lc(StatusCompleted)}, "while block 0 is open"},
		{"finish without start", []*Event{ms(), bf(0), mf(), lc(StatusCompleted)}, "without an open block"},
		{"finish wrong index", []*Event{ms(), bs(0, BlockText), bf(3), mf(), lc(StatusCompleted)}, "index 3 while block 0"},
		{"message finish with open block", []*Event{ms(), bs(0, BlockText), mf(), lc(StatusCompleted)}, "while block 0 is open"},
		{"message finish without start", []*Event{mf(), lc(StatusCompleted)}, "without an open message"},
		{"message start twice", []*Event{ms(), ms(), mf(), lc(StatusCompleted)}, "while a message is open"},
		{"split rune in delta", []*Event{ms(), bs(0, BlockText), bd(0, "\xf0\x9f"), bf(0), mf(), lc(StatusCompleted)}, "not whole UTF-8"},
		{"whole rune in delta", []*Event{ms(), bs(0, BlockText), bd(0, "\U0001F600"), bf(0), mf(), lc(StatusCompleted)}, ""},
		{"text on data block", []*Event{ms(), bs(0, BlockData), bd(0, "x"), bf(0), mf(), lc(StatusCompleted)}, "text delta on a data block"},
		{"data on text block", []*Event{ms(), bs(0, BlockText), bdd(0, []byte{1}), bf(0), mf(), lc(StatusCompleted)}, "data delta on a non-data block"},
		{"data on data block", []*Event{ms(), bs(0, BlockData), bdd(0, []byte{1}), bf(0), mf(), lc(StatusCompleted)}, ""},
		{"delta on ref block", []*Event{ms(), bs(0, BlockRef), bd(0, "x"), bf(0), mf(), lc(StatusCompleted)}, "on a ref block"},
		{"no terminal", []*Event{lc(StatusRunning), ms(), mf()}, "without the run's terminal"},
		{"two terminals", []*Event{lc(StatusCompleted), lc(StatusCompleted)}, "after the run's terminal"},
		{"event after terminal", []*Event{lc(StatusCancelled), ms()}, "after the run's terminal"},
		{"terminal with open block", []*Event{ms(), bs(0, BlockText), lc(StatusCompleted)}, "open message or block"},
		{"terminal with open message", []*Event{ms(), lc(StatusFailed)}, "failed lifecycle without an error code"},
		{"failed with open message", []*Event{ms(), failed(CodeInternal)}, "open message or block"},
		{"failed without code", []*Event{failed(CodeOK)}, "without an error code"},
		{"failed with code", []*Event{failed(CodeUnavailable)}, ""},
		{"error event without code", []*Event{errEv(CodeOK), lc(StatusCompleted)}, "error event without a code"},
		{"non-terminal error event", []*Event{errEv(CodeUnavailable), lc(StatusCompleted)}, ""},
		{"namespaces are separate", []*Event{ms(), in([]string{"a"}, ms()), bs(0, BlockText), in([]string{"a"}, bs(0, BlockText)), bf(0), in([]string{"a"}, bf(0)), in([]string{"a"}, mf()), mf(), lc(StatusCompleted)}, ""},
		{"nested terminal is not the run's", []*Event{in([]string{"a"}, lc(StatusCompleted)), lc(StatusRunning), lc(StatusCompleted)}, ""},
		{"open nested message at run end", []*Event{in([]string{"a"}, ms()), lc(StatusCompleted)}, `namespace "a"`},
		{"event without kind", []*Event{{}, lc(StatusCompleted)}, "no kind"},
		{"two runs", []*Event{run("a", lc(StatusRunning)), run("b", lc(StatusRunning)), run("a", lc(StatusCompleted)), run("b", lc(StatusFailed))}, "without an error code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.events)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("want a violation containing %q, got %v", tt.rule, err)
			}
			if !strings.Contains(v.Rule, tt.rule) {
				t.Fatalf("violation %q does not contain %q", v.Error(), tt.rule)
			}
		})
	}
}

func TestViolationNamesSeq(t *testing.T) {
	err := Validate([]*Event{seq(7, lc(StatusRunning)), seq(8, bd(0, "x"))})
	var v *Violation
	if !errors.As(err, &v) || v.Seq != 8 || v.Index != 1 {
		t.Fatalf("got %v, want a violation at seq 8, index 1", err)
	}
	if !strings.Contains(err.Error(), "seq 8") {
		t.Fatalf("message %q does not name seq 8", err)
	}
}

func TestFollows(t *testing.T) {
	skipping := func(n, after uint64) *Event { e := seq(n, lc(StatusFailed)); e.SkippedAfter = &after; return e }
	for _, c := range []struct {
		name string
		ev   *Event
		prev uint64
		want bool
	}{
		{"next", seq(5, lc(StatusRunning)), 4, true},
		{"first", seq(1, lc(StatusRunning)), 0, true},
		{"jump", seq(7, lc(StatusRunning)), 4, false},
		{"repeat", seq(4, lc(StatusRunning)), 4, false},
		{"skip from prev", skipping(1004, 4), 4, true},
		{"skip from before prev (prev inside the skip)", skipping(1004, 4), 900, true},
		{"skip from after prev (events before it missing)", skipping(1004, 4), 3, false},
		{"skip of none", skipping(5, 4), 4, true},
		{"skip from 0", skipping(1000, 0), 0, true},
		{"skip at prev", skipping(1004, 4), 1004, false},
	} {
		if got := Follows(c.ev, c.prev); got != c.want {
			t.Errorf("%s: Follows(seq %d, skipped after %d; %d) = %v, want %v", c.name, c.ev.GetSeq(), c.ev.GetSkippedAfter(), c.prev, got, c.want)
		}
	}
}
