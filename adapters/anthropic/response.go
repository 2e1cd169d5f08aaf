package anthropic

import (
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// accumulator is the sink of a non-streaming answer: it applies the
// stream events to one Message as the SDKs' accumulators do
// (MessageStream.ts #accumulateMessage), so both answers say the same.
// What it holds is bounded by limit (bytes of text, thinking and tool
// input).
type accumulator struct {
	msg    message
	blocks []accBlock
	size   int
	limit  int
}

// accBlock is one content block being accumulated.
type accBlock struct {
	start any // the content_block_start's block
	text  strings.Builder
	sig   string
}

func (a *accumulator) event(_ string, v any) error {
	switch ev := v.(type) {
	case messageStartEvent:
		a.msg = ev.Message
	case blockStartEvent:
		a.blocks = append(a.blocks, accBlock{start: ev.ContentBlock})
	case *blockDeltaEvent: // a pointer, with a pointer to its delta
		if len(a.blocks) == 0 {
			return nil
		}
		b := &a.blocks[len(a.blocks)-1]
		var s string
		switch d := ev.Delta.(type) {
		case *textDelta:
			s = d.Text
		case *thinkingDelta:
			s = d.Thinking
		case *inputJSONDelta:
			s = d.PartialJSON
		case *signatureDelta:
			b.sig = d.Signature
		}
		a.size += len(s)
		if a.size > a.limit {
			return canonical.Errorf(canonical.CodeResourceExhausted, "the message exceeds the frontend's max_output_bytes (%d)", a.limit)
		}
		b.text.WriteString(s)
	case messageDeltaEvent:
		a.msg.StopReason, a.msg.StopSequence = ev.Delta.StopReason, ev.Delta.StopSequence
		a.msg.Usage = ev.Usage
	}
	return nil
}

// message returns the accumulated Message; a tool_use whose arguments are
// not a JSON object fails it (never a silently empty input).
func (a *accumulator) message() (*message, *canonical.Error) {
	m := a.msg
	m.Content = make([]any, 0, len(a.blocks))
	for i := range a.blocks {
		b := &a.blocks[i]
		switch s := b.start.(type) {
		case textBlock:
			s.Text = b.text.String()
			m.Content = append(m.Content, s)
		case thinkingBlock:
			s.Thinking, s.Signature = b.text.String(), b.sig
			m.Content = append(m.Content, s)
		case toolUseBlock:
			in := json.Value(b.text.String())
			if in.Kind() != '{' || !json.Valid(in) {
				return nil, canonical.Errorf(canonical.CodeInternal, "the arguments of tool call %s (%s) are not a JSON object", s.ID, s.Name)
			}
			s.Input = in
			m.Content = append(m.Content, s)
		default:
			m.Content = append(m.Content, s)
		}
	}
	return &m, nil
}
