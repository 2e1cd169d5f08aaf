package glide

import (
	"strconv"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	glidepeer "github.com/interlingua-dev/interlingua/conformance/peers/glide"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// conformanceProfile is what the protocol's wire keeps of a run, checked
// by the conformance runner (conformance/profile).
var conformanceProfile = &profile.Profile{
	NewPeer: newConformancePeer,
	Front:   conformanceFront, Back: conformanceBack, NoParameters: true, Multiplex: true,
	Upstream: "the reference Glide peer (conformance/peers/glide)",
	FrontNotes: []profile.Degradation{
		profile.AgentAnswer,
		{"text", "text only; consecutive text blocks join into one message's chunks"},
		{"reasoning, tool-call, tool-activity, multimodal", "dropped"},
		{"error-nonterminal", "a model_unavailable error frame: read back as an unavailable error, after which the text continues in a new block"},
		{"error-before", "chatStream has no refusal: an error frame, read back as a failed run with the same code"},
		{"error-mid", "an error frame; every code survives (the message carries it: \"<code>: …\")"},
		{"cancel", "a run ended with code canceled reads as cancelled"},
		{"interrupt", "unknown_error (failed_precondition) whose message names the interrupt id and its payload as JSON"},
		profile.NoReplay,
		{"parameters", "a chatStream request has no parameters: cases that need some do not apply (server mode: the scripted faults cannot be asked for)"},
	},
	BackNotes: []profile.Degradation{
		{"text", "text only; a rune is never split (frames are JSON text)"},
		{"reasoning, tool-call, tool-activity, multimodal, interrupt", "Glide's wire cannot carry them: the peer sends text only (and completes)"},
		{"error-nonterminal", "a model failing mid-stream: model_unavailable (unavailable), then the next model's text"},
		{"error-before, error-mid", "a Glide router can only run out of models: model_unavailable, then all_models_unavailable (unavailable)"},
		{"cancel", "chatStream has no cancel: the upstream is not told (the bridge's run still ends at once)"},
	},
}

// conformanceText keeps the text, one block per stretch between non-terminal
// errors, and the errors (as unavailable).
func conformanceText(t *cv1.Transcript) []*cv1.Block {
	var out []*cv1.Block
	var cur *cv1.Block
	for _, b := range t.GetBlocks() {
		switch b.GetType() {
		case transcript.Text:
			if cur == nil {
				cur = &cv1.Block{Type: transcript.Text}
				out = append(out, cur)
			}
			cur.Text += b.GetText()
		case transcript.Error:
			out = append(out, &cv1.Block{Type: transcript.Error, Text: canonical.CodeUnavailable.String()})
			cur = nil
		}
	}
	return out
}

// conformanceFront: what a Glide client reads from our Glide frontend.
func conformanceFront(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode(), Blocks: conformanceText(t)}
	switch t.GetStatus() {
	case transcript.Refused:
		out.Status = transcript.Failed
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Failed, canonical.CodeFailedPrecondition.String()
	}
	return profile.CancelledByCode(out)
}

// conformanceBack: what the bridge reads from the Glide peer playing the
// definition (GlideRouter).
func conformanceBack(t *cv1.Transcript, _ *cases.Case) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode(), Blocks: conformanceText(t)}
	switch t.GetStatus() {
	case transcript.Interrupted:
		out.Status = transcript.Completed // the peer cannot ask: it completes
	case transcript.Refused, transcript.Failed:
		out.Blocks = append(out.Blocks, &cv1.Block{Type: transcript.Error, Text: canonical.CodeUnavailable.String()})
		out.Status, out.Code = transcript.Failed, canonical.CodeUnavailable.String()
	}
	return out
}

// newConformancePeer is the reference Glide peer (conformance/peers/
// glide), a router per case, each behind a backend of its own (the
// router is in the URL).
func newConformancePeer(cs []*cases.Case) (*profile.Peer, error) {
	routers := map[string]glidepeer.Router{}
	for _, c := range cs {
		routers[c.GetName()] = conformanceRouter("hang-"+c.GetName(), c.GetResponse(), c.GetRequest().GetPrompt())
	}
	peer := glidepeer.New(glidepeer.Config{Routers: routers})
	return &profile.Peer{Handler: peer, PerCase: true, Close: peer.Close, // ends hanging requests
		Backend: func(addr, name string) map[string]any {
			return map[string]any{"url": "ws://" + addr + "/v1/language/" + name + "/chatStream"}
		}}, nil
}

// conformanceRouter is the reference Glide peer's router for r. Glide's frames
// are JSON text, so deltas are re-cut at rune boundaries; a non-terminal
// error item is a model failing mid-stream (model_unavailable, then the
// next model streams the rest); a failure is the last model failing
// (model_unavailable, then all_models_unavailable); a hang waits on a latch
// no one opens (the peer ends it when the client disconnects).
func conformanceRouter(hangLatch string, r *cv1.Response, prompt string) glidepeer.Router {
	delay := time.Duration(r.GetDelayMs()) * time.Millisecond
	var models []glidepeer.Model
	cur := glidepeer.Model{ID: "model-1"}
	if r.GetEcho() && len(r.GetItems()) == 0 {
		cur.Steps = append(cur.Steps, glidepeer.Step{Echo: true, Delay: delay})
	} else if r.GetEcho() {
		for _, w := range driver.Words(prompt) {
			cur.Steps = append(cur.Steps, glidepeer.Step{Text: w, Delay: delay})
		}
	}
	for _, it := range r.GetItems() {
		switch k := it.GetKind().(type) {
		case *cv1.Item_Text:
			for _, d := range driver.WholeRunes(driver.Deltas(k.Text)) {
				cur.Steps = append(cur.Steps, glidepeer.Step{Text: d, Delay: delay})
			}
		case *cv1.Item_Error:
			cur.Steps = append(cur.Steps, glidepeer.Step{Unavailable: driver.FailureError(k.Error).Message})
			models = append(models, cur)
			cur = glidepeer.Model{ID: "model-" + strconv.Itoa(len(models)+1)}
		}
	}
	if r.GetHang() {
		cur.Steps = append(cur.Steps, glidepeer.Step{Wait: hangLatch})
	}
	if f := r.GetFailure(); f != nil {
		cur.Steps = append(cur.Steps, glidepeer.Step{Unavailable: driver.FailureError(f).Message})
	}
	return glidepeer.Router{Models: append(models, cur)}
}
