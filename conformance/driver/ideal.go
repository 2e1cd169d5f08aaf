package driver

import (
	"slices"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// Ideal is the transcript a lossless path delivers for r and a prompt: the
// canonical upstream's own output. A hanging run ends cancelled, since the
// client cancels it.
func Ideal(r *cv1.Response, prompt string) *cv1.Transcript {
	b := transcript.NewBuilder()
	if RefusesBeforeFirstEvent(r) {
		b.Refuse(FailureError(r.GetFailure()))
		return transcript.Normalize(b.Transcript())
	}
	for _, st := range Events(r, prompt) {
		b.Add(st.Event)
	}
	switch {
	case r.GetInterrupt() != nil && r.GetFailure() == nil:
		in := r.GetInterrupt()
		b.Add(&canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{InterruptId: in.GetId(), Payload: in.GetPayload()}}})
		b.Add(canonical.Terminal(canonical.StatusInterrupted, nil))
	case r.GetHang():
		b.Add(canonical.Terminal(canonical.StatusCancelled, canonical.Errorf(canonical.CodeCanceled, "cancelled by the client")))
	case r.GetFailure() != nil:
		b.Add(canonical.Terminal(canonical.StatusFailed, FailureError(r.GetFailure())))
	default:
		b.Add(canonical.Terminal(canonical.StatusCompleted, nil))
	}
	return transcript.Normalize(b.Transcript())
}

// ClientTools is the names of the tools a client declares for r: those
// its model calls and the bridge does not run (no tool activity of the
// call follows), as a model calls only the tools it was given. Frontends
// hand a client the calls of its own tools only.
func ClientTools(r *cv1.Response) []string {
	ran := map[string]bool{}
	for _, it := range r.GetItems() {
		if t := it.GetTool(); t != nil {
			ran[t.GetId()] = true
		}
	}
	var names []string
	for _, it := range r.GetItems() {
		if tc := it.GetToolCall(); tc != nil && !ran[tc.GetId()] && !slices.Contains(names, tc.GetName()) {
			names = append(names, tc.GetName())
		}
	}
	return names
}
