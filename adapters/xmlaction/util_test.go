package xmlaction

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
)

// decodeChunks decodes chunks with a fresh Decoder and checks the result
// against the canonical invariants.
func decodeChunks(t testing.TB, cfg Config, chunks [][]byte) []*canonical.Event {
	t.Helper()
	d := NewDecoder(cfg)
	var out []*canonical.Event
	var err error
	for _, c := range chunks {
		if out, err = d.Feed(c, out); err != nil {
			t.Fatal(err)
		}
	}
	if out, err = d.End(out); err != nil {
		t.Fatal(err)
	}
	if err := canonical.Validate(out); err != nil {
		t.Fatalf("events break the model: %v\n%s", err, strings.Join(summarize(out), "\n"))
	}
	return out
}

// normalize merges adjacent deltas of the same block (the only thing
// chunking may change) into copies.
func normalize(evs []*canonical.Event) []*canonical.Event {
	out := make([]*canonical.Event, 0, len(evs))
	for _, ev := range evs {
		if d := ev.GetBlockDelta(); d != nil && len(out) > 0 {
			if p := out[len(out)-1].GetBlockDelta(); p != nil && p.GetIndex() == d.GetIndex() &&
				strings.Join(out[len(out)-1].GetNamespace(), "/") == strings.Join(ev.GetNamespace(), "/") {
				p.Text += d.GetText()
				p.Data = append(p.Data, d.GetData()...)
				continue
			}
		}
		out = append(out, proto.Clone(ev).(*canonical.Event))
	}
	return out
}

// summarize renders events one line each, for readable expectations.
func summarize(evs []*canonical.Event) []string {
	var out []string
	blocks := map[uint32]canonical.BlockType{}
	for _, ev := range normalize(evs) {
		ns := ""
		if len(ev.GetNamespace()) > 0 {
			ns = "[" + strings.Join(ev.GetNamespace(), "/") + "] "
		}
		switch k := ev.GetKind().(type) {
		case *canonical.KindBlockStart:
			blocks[k.BlockStart.GetIndex()] = k.BlockStart.GetType()
			if k.BlockStart.GetType() == canonical.BlockToolCall {
				attrs := ""
				if a := ev.GetExtensions()[extAttributes].GetStructValue(); a != nil {
					attrs = " " + marshalCompact(a.AsMap())
				}
				out = append(out, fmt.Sprintf("%saction %s %q%s", ns, k.BlockStart.GetId(), k.BlockStart.GetName(), attrs))
			} else {
				out = append(out, fmt.Sprintf("%s%s{", ns, blockName(k.BlockStart.GetType())))
			}
		case *canonical.KindBlockDelta:
			out = append(out, fmt.Sprintf("%s  %q", ns, k.BlockDelta.GetText()))
		case *canonical.KindBlockFinish:
			out = append(out, ns+"}")
		case *canonical.KindToolFailed:
			kind := ev.GetExtensions()[extError].GetStringValue()
			out = append(out, fmt.Sprintf("%sfailed %s %s %s: %s", ns, k.ToolFailed.GetToolCallId(), kind,
				canonical.Code(k.ToolFailed.GetError().GetCode()), k.ToolFailed.GetError().GetMessage()))
		case *canonical.KindToolStarted:
			out = append(out, fmt.Sprintf("%sstarted %s %s %s", ns, k.ToolStarted.GetToolCallId(), k.ToolStarted.GetName(),
				marshalCompact(k.ToolStarted.GetInput().AsInterface())))
		case *canonical.KindToolFinished:
			out = append(out, fmt.Sprintf("%sfinished %s %s", ns, k.ToolFinished.GetToolCallId(), marshalCompact(k.ToolFinished.GetOutput().AsInterface())))
		case *canonical.KindLifecycle:
			lc := k.Lifecycle
			s := fmt.Sprintf("%slifecycle %s", ns, strings.TrimPrefix(lc.GetStatus().String(), "RUN_STATUS_"))
			if c := lc.GetCause(); c != nil {
				s += " cause=" + c.GetType() + ":" + c.GetToolCallId()
			}
			if e := lc.GetError(); e != nil {
				s += fmt.Sprintf(" %s: %s", canonical.Code(e.GetCode()), e.GetMessage())
			}
			out = append(out, s)
		case *canonical.KindCustom:
			out = append(out, fmt.Sprintf("%scustom %s %s", ns, k.Custom.GetName(), marshalCompact(k.Custom.GetPayload().AsInterface())))
		case *canonical.KindError:
			out = append(out, fmt.Sprintf("%serror %s: %s", ns, canonical.Code(k.Error.GetCode()), k.Error.GetMessage()))
		case *canonical.KindMessageStart:
			out = append(out, ns+"message{")
		case *canonical.KindMessageFinish:
			out = append(out, ns+"message} "+strings.TrimPrefix(k.MessageFinish.GetFinishReason().String(), "FINISH_REASON_"))
		}
	}
	return out
}

func blockName(t canonical.BlockType) string {
	switch t {
	case canonical.BlockReasoning:
		return "thought"
	case canonical.BlockText:
		return "text"
	}
	return strings.ToLower(strings.TrimPrefix(t.String(), "BLOCK_TYPE_"))
}
