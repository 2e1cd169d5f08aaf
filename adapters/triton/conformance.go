package triton

import (
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/conformance/driver"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// conformanceProfile is what the protocol's wire keeps of a run, checked
// by the conformance runner (conformance/profile).
var conformanceProfile = &profile.Profile{
	NewPeer: newConformancePeer,
	Front:   conformanceFront, Back: conformanceBack, UpstreamCancel: true,
	Upstream: "the reference Triton peer (conformance/peers/triton)",
	FrontNotes: []profile.Degradation{
		profile.AgentAnswer,
		{"text", "all root text is one text_output stream: the client reads one text block"},
		{"reasoning", "dropped; with the request parameter include_reasoning, rendered in the text as <think>…</think>"},
		{"tool-call, tool-activity", "surfaced as response parameters (tool_call_*), which a Triton client does not read as content: dropped from the transcript"},
		{"multimodal", "data and ref blocks dropped"},
		{"error-nonterminal", "dropped"},
		{"error-before", "an HTTP error status: the code goes through Triton's status table (e.g. data_loss → 500 → internal, resource_exhausted → 400 → invalid_argument)"},
		{"error-mid", "an in-band {\"error\"} under the 200 already sent: the code is internal"},
		{"interrupt", "surfaced as parameters; the run reads as completed"},
		profile.NoReplay,
		profile.HTTPConcurrency,
	},
	BackNotes: []profile.Degradation{
		{"text", "text only, one block; a rune cut across responses is held back until whole"},
		{"reasoning, tool-call, tool-activity, multimodal, error-nonterminal, interrupt", "Triton's wire cannot carry them: the peer sends text only (and completes)"},
		{"error-before", "the peer's status 500: refused with internal"},
		{"error-mid", "an in-band error: failed with internal"},
	},
}

// conformanceStatusCode is the code a Triton client reads from the status our
// frontend answers a code with (adapters/triton errors.go: statusOf, then
// codeOf).
func conformanceStatusCode(code string) string {
	c, _ := canonical.ParseCode(code)
	switch c {
	case canonical.CodeNotFound:
		return canonical.CodeNotFound.String()
	case canonical.CodeUnavailable, canonical.CodeDeadlineExceeded:
		return canonical.CodeUnavailable.String()
	case canonical.CodeUnimplemented:
		return canonical.CodeUnimplemented.String()
	case canonical.CodePermissionDenied, canonical.CodeUnauthenticated:
		return canonical.CodePermissionDenied.String()
	case canonical.CodeUnknown, canonical.CodeInvalidArgument, canonical.CodeAlreadyExists, canonical.CodeCanceled,
		canonical.CodeResourceExhausted, canonical.CodeFailedPrecondition, canonical.CodeOutOfRange:
		return canonical.CodeInvalidArgument.String()
	}
	return canonical.CodeInternal.String()
}

// conformanceFront: what a Triton client reads from our Triton frontend.
func conformanceFront(t *cv1.Transcript, c *cases.Case) *cv1.Transcript {
	var sb strings.Builder
	for _, b := range t.GetBlocks() {
		switch {
		case b.GetType() == transcript.Text:
			sb.WriteString(b.GetText())
		case b.GetType() == transcript.Reasoning && profile.BoolParam(c, "include_reasoning"):
			sb.WriteString("<think>" + b.GetText() + "</think>")
		}
	}
	text := sb.String()
	out := profile.TextOnly(t, text)
	switch t.GetStatus() {
	case transcript.Refused:
		out.Code = conformanceStatusCode(t.GetCode())
	case transcript.Failed:
		if text == "" {
			out.Status, out.Code = transcript.Refused, conformanceStatusCode(t.GetCode())
		} else {
			out.Code = canonical.CodeInternal.String()
		}
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Completed, ""
	}
	return out
}

// conformanceBack: what the bridge reads from the Triton peer playing the
// definition.
func conformanceBack(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := profile.TextOnly(t, profile.JoinedText(t))
	switch t.GetStatus() {
	case transcript.Interrupted:
		out.Status = transcript.Completed // the peer cannot ask: it completes
	case transcript.Refused, transcript.Failed:
		out.Code = canonical.CodeInternal.String()
		if !profile.HasText(t) {
			out.Status = transcript.Refused
		}
	}
	return out
}

// newConformancePeer is the reference Triton peer (conformance/peers/
// triton), a model per case, behind one backend.
func newConformancePeer(cs []*cases.Case) (*profile.Peer, error) {
	var models []tritonpeer.Model
	for _, c := range cs {
		models = append(models, conformanceModel(c.GetName(), c.GetResponse(), c.GetRequest().GetPrompt()))
	}
	peer := tritonpeer.New(models...)
	return &profile.Peer{Handler: peer, Cancelled: peer.Cancelled(),
		Backend: func(addr, _ string) map[string]any { return map[string]any{"url": "http://" + addr} }}, nil
}

// conformanceModel is the reference Triton peer's script for r: the text
// deltas as raw responses (a rune may be cut across two), the failure as
// Triton's error object after them (status 500 when nothing came before),
// the delay, hang and write size. A pure echo uses the peer's own echo, so
// the prompt that reached the peer is what comes back.
func conformanceModel(name string, r *cv1.Response, prompt string) tritonpeer.Model {
	m := tritonpeer.Model{
		Name:      name,
		Delay:     time.Duration(r.GetDelayMs()) * time.Millisecond,
		WriteSize: int(r.GetWriteBytes()),
		Hang:      r.GetHang(),
	}
	if !(r.GetEcho() && len(r.GetItems()) == 0) {
		m.Chunks = driver.TextDeltas(r, prompt)
		if m.Chunks == nil {
			m.Chunks = []string{} // nil would echo
		}
	}
	if f := r.GetFailure(); f != nil {
		m.ErrorMessage = driver.FailureError(f).Message
		m.ErrorAt = len(m.Chunks)
		if m.Chunks == nil { // echo: after the prompt's words
			m.ErrorAt = len(driver.Words(prompt))
		}
	}
	return m
}
