// Package transcript reduces a run's canonical events to the
// protocol-neutral Transcript the conformance suite compares
// (interlingua.conformance.v1.Transcript): the root namespace's content
// blocks with their deltas joined, tool activity, interrupts, non-terminal
// errors and how the run ended. Delta boundaries, seq, ids stamped by the
// bridge and timestamps are not part of it: a translation may re-chunk.
package transcript

import (
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// The run outcomes a Transcript's Status names.
const (
	Completed   = "completed"
	Failed      = "failed"
	Cancelled   = "cancelled"
	Interrupted = "interrupted"
	// Refused is a run refused before its first event (the client's start
	// failed).
	Refused = "refused"
	// Unended is a stream that ended without a terminal event.
	Unended = "unended"
)

// Block types as a Transcript names them.
const (
	Text      = "text"
	Reasoning = "reasoning"
	ToolCall  = "tool_call"
	Data      = "data"
	Ref       = "ref"
	// Error is a non-terminal error event among the blocks.
	Error = "error"
)

// BlockTypeName is the Transcript name of a canonical block type.
func BlockTypeName(t canonical.BlockType) string {
	switch t {
	case canonical.BlockText:
		return Text
	case canonical.BlockReasoning:
		return Reasoning
	case canonical.BlockToolCall:
		return ToolCall
	case canonical.BlockData:
		return Data
	case canonical.BlockRef:
		return Ref
	}
	return "unspecified"
}

// Builder folds events into a Transcript as they arrive.
type Builder struct {
	t     cv1.Transcript
	open  map[uint32]*openBlock // root blocks by index, while open
	ended bool
}

// openBlock accumulates a block's deltas (joined when it finishes).
type openBlock struct {
	blk  *cv1.Block
	text strings.Builder
}

func (o *openBlock) flush() { o.blk.Text = o.text.String() }

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{open: map[uint32]*openBlock{}} }

// Add folds one event in.
func (b *Builder) Add(ev *canonical.Event) {
	if len(ev.GetNamespace()) != 0 {
		return
	}
	t := &b.t
	switch k := ev.GetKind().(type) {
	case *canonical.KindMessageStart:
		t.Messages++
	case *canonical.KindBlockStart:
		bs := k.BlockStart
		blk := &cv1.Block{Type: BlockTypeName(bs.GetType()), Mime: bs.GetMime(), Ref: bs.GetRef(), Id: bs.GetId(), Name: bs.GetName()}
		t.Blocks = append(t.Blocks, blk)
		if o := b.open[bs.GetIndex()]; o != nil {
			o.flush()
		}
		b.open[bs.GetIndex()] = &openBlock{blk: blk}
	case *canonical.KindBlockDelta:
		if o := b.open[k.BlockDelta.GetIndex()]; o != nil {
			o.text.WriteString(k.BlockDelta.GetText())
			o.blk.Data = append(o.blk.Data, k.BlockDelta.GetData()...)
		}
	case *canonical.KindBlockFinish:
		if o := b.open[k.BlockFinish.GetIndex()]; o != nil {
			o.flush()
			delete(b.open, k.BlockFinish.GetIndex())
		}
	case *canonical.KindToolStarted:
		ts := k.ToolStarted
		t.Tools = append(t.Tools, &cv1.Tool{Event: "started", Id: ts.GetToolCallId(), Name: ts.GetName(), Value: JSON(ts.GetInput())})
	case *canonical.KindToolOutput:
		t.Tools = append(t.Tools, &cv1.Tool{Event: "output", Id: k.ToolOutput.GetToolCallId(), Value: k.ToolOutput.GetDelta()})
	case *canonical.KindToolFinished:
		t.Tools = append(t.Tools, &cv1.Tool{Event: "finished", Id: k.ToolFinished.GetToolCallId(), Value: JSON(k.ToolFinished.GetOutput())})
	case *canonical.KindToolFailed:
		t.Tools = append(t.Tools, &cv1.Tool{Event: "failed", Id: k.ToolFailed.GetToolCallId(), Value: canonical.Code(k.ToolFailed.GetError().GetCode()).String()})
	case *canonical.KindInputRequested:
		t.Interrupts = append(t.Interrupts, k.InputRequested.GetInterruptId())
	case *canonical.KindError:
		t.Blocks = append(t.Blocks, &cv1.Block{Type: Error, Text: canonical.Code(k.Error.GetCode()).String()})
	case *canonical.KindLifecycle:
		st, ok := canonical.TerminalOf(ev)
		if !ok {
			return
		}
		b.ended = true
		switch st {
		case canonical.StatusCompleted:
			t.Status = Completed
		case canonical.StatusFailed:
			t.Status = Failed
		case canonical.StatusCancelled:
			t.Status = Cancelled
		case canonical.StatusInterrupted:
			t.Status = Interrupted
		}
		if c := k.Lifecycle.GetError().GetCode(); c != 0 && st != canonical.StatusCompleted {
			t.Code = canonical.Code(c).String()
		}
	}
}

// Refuse records a run refused before its first event, with err's code.
func (b *Builder) Refuse(err error) {
	b.ended = true
	b.t.Status = Refused
	b.t.Code = canonical.CodeOf(err).String()
}

// Transcript returns the transcript so far; a stream that has not ended
// has status Unended.
func (b *Builder) Transcript() *cv1.Transcript {
	for _, o := range b.open {
		o.flush()
	}
	t := proto.Clone(&b.t).(*cv1.Transcript)
	if !b.ended {
		t.Status = Unended
	}
	return t
}

// FromEvents folds a whole stream.
func FromEvents(evs []*canonical.Event) *cv1.Transcript {
	b := NewBuilder()
	for _, ev := range evs {
		b.Add(ev)
	}
	return b.Transcript()
}

// jsonOptions write a value as the transcripts always had it (encoding/json
// without HTML escaping): keys sorted, U+2028 and U+2029 escaped.
var jsonOptions = json.JoinOptions(json.Deterministic(true), json.EscapeForJS(true), json.AllowInvalidUTF8(true))

// JSON is v as compact JSON with sorted keys ("" for nil).
func JSON(v *structpb.Value) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v.AsInterface(), jsonOptions)
	if err != nil {
		return ""
	}
	return string(b)
}

// Normalize drops what no comparison looks at: the message count
// (protocols split and join messages freely) and text and reasoning blocks
// with no text (a block opened and closed empty is no content).
func Normalize(t *cv1.Transcript) *cv1.Transcript {
	t = proto.Clone(t).(*cv1.Transcript)
	t.Messages = 0
	var blocks []*cv1.Block
	for _, b := range t.Blocks {
		if (b.Type == Text || b.Type == Reasoning) && b.Text == "" {
			continue
		}
		blocks = append(blocks, b)
	}
	t.Blocks = blocks
	return t
}

// String renders t as indented proto JSON, long texts shortened.
func String(t *cv1.Transcript) string {
	t = proto.Clone(t).(*cv1.Transcript)
	for _, b := range t.Blocks {
		b.Text = shorten(b.Text)
		if len(b.Data) > 64 {
			b.Data = append(b.Data[:64:64], []byte("...")...)
		}
	}
	// protojson varies its whitespace on purpose; re-indent for output
	// that is stable from run to run.
	raw, err := protojson.Marshal(t)
	if err != nil {
		return err.Error()
	}
	out := json.Value(raw)
	if out.Indent(json.WithIndent("  ")) != nil { // strings kept as spelled
		return string(raw)
	}
	return string(out)
}

func shorten(s string) string {
	if len(s) <= 200 {
		return s
	}
	return s[:100] + "…(" + itoa(len(s)) + " bytes)…" + s[len(s)-60:]
}

func itoa(n int) string { return fmtInt(n) }
