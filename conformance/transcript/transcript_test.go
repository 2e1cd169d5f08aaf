package transcript

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/canonical"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

func TestFromEvents(t *testing.T) {
	b := canonical.NewBuilder()
	var evs []*canonical.Event
	evs = b.Lifecycle(evs, canonical.StatusRunning)
	evs = b.Reasoning(evs, "think")
	evs = b.Text(evs, "hel")
	evs = b.Text(evs, "lo")
	evs = b.ToolCall(evs, "c1", "calc")
	evs = b.ToolArgs(evs, `{"a":`)
	evs = b.ToolArgs(evs, `1}`)
	evs = b.Data(evs, "image/png", []byte{1, 2})
	evs = b.Ref(evs, "image/jpeg", "https://x/y")
	evs = b.FinishMessage(evs, canonical.FinishStop, nil)
	evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{ToolCallId: "c1", Name: "calc", Input: canonical.Value(map[string]any{"b": 2, "a": 1})}}})
	evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{ToolCallId: "c1", Error: &canonical.ErrorProto{Code: uint32(canonical.CodeUnavailable)}}}})
	evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindError{Error: &canonical.ErrorProto{Code: uint32(canonical.CodeAborted)}}})
	evs = append(evs, &canonical.Event{Namespace: []string{"sub"}, Kind: &canonical.KindError{Error: &canonical.ErrorProto{Code: uint32(canonical.CodeAborted)}}})
	evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{InterruptId: "i1"}}})
	evs = b.End(evs, canonical.StatusFailed, canonical.Errorf(canonical.CodeDataLoss, "x"))
	got := FromEvents(evs)
	want := &cv1.Transcript{
		Blocks: []*cv1.Block{
			{Type: Reasoning, Text: "think"},
			{Type: Text, Text: "hello"},
			{Type: ToolCall, Text: `{"a":1}`, Id: "c1", Name: "calc", Mime: "application/json"},
			{Type: Data, Data: []byte{1, 2}, Mime: "image/png"},
			{Type: Ref, Mime: "image/jpeg", Ref: "https://x/y"},
			{Type: Error, Text: "aborted"},
		},
		Tools:      []*cv1.Tool{{Event: "started", Id: "c1", Name: "calc", Value: `{"a":1,"b":2}`}, {Event: "failed", Id: "c1", Value: "unavailable"}},
		Interrupts: []string{"i1"},
		Status:     Failed, Code: "data_loss", Messages: 1,
	}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Fatal(d)
	}
	if Diff(want, got) != "" {
		t.Fatalf("Diff of equal transcripts: %s", Diff(want, got))
	}
}

func TestUnendedAndRefused(t *testing.T) {
	b := NewBuilder()
	b.Add(&canonical.Event{Kind: &canonical.KindLifecycle{Lifecycle: &canonical.Lifecycle{Status: canonical.StatusRunning}}})
	if s := b.Transcript().GetStatus(); s != Unended {
		t.Fatalf("status %q, want unended", s)
	}
	b.Refuse(canonical.Errorf(canonical.CodeNotFound, "no"))
	if tr := b.Transcript(); tr.GetStatus() != Refused || tr.GetCode() != "not_found" {
		t.Fatalf("got %v", tr)
	}
}

func TestNormalizeAndDiff(t *testing.T) {
	got := Normalize(&cv1.Transcript{Messages: 3, Status: Completed, Blocks: []*cv1.Block{{Type: Text}, {Type: Text, Text: strings.Repeat("a", 500) + "X"}, {Type: Reasoning}}})
	if len(got.Blocks) != 1 || got.Messages != 0 {
		t.Fatalf("Normalize kept %v", got)
	}
	want := &cv1.Transcript{Status: Failed, Code: "internal", Blocks: []*cv1.Block{{Type: Text, Text: strings.Repeat("a", 500) + "Y"}, {Type: Ref, Ref: "u"}},
		Tools: []*cv1.Tool{{Event: "finished", Id: "1", Value: "2"}}}
	d := Diff(want, got)
	for _, s := range []string{"ended completed, want failed/internal", "block 0: text differs at byte 500", "block 1 missing: want ref ref=u", "tool event 0 missing: want finished 1 2"} {
		if !strings.Contains(d, s) {
			t.Errorf("diff %q does not say %q", d, s)
		}
	}
}

func BenchmarkBuilderDelta(b *testing.B) {
	ev := &canonical.Event{Kind: &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Text: "token "}}}
	start := &canonical.Event{Kind: &canonical.KindBlockStart{BlockStart: &canonical.BlockStart{Type: canonical.BlockText}}}
	b.ReportAllocs()
	for b.Loop() {
		tb := NewBuilder()
		tb.Add(start)
		for range 100 {
			tb.Add(ev)
		}
	}
}
