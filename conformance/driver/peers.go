package driver

import (
	"encoding/json"
	"errors"
	"time"

	"connectrpc.com/connect"

	evergreenpeer "github.com/interlingua-dev/interlingua/conformance/peers/evergreen"
	glidepeer "github.com/interlingua-dev/interlingua/conformance/peers/glide"
	tritonpeer "github.com/interlingua-dev/interlingua/conformance/peers/triton"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// TextDeltas returns the text deltas r's root text produces on a text-only
// wire: the echoed prompt's words, then every text item's deltas, in
// order (reasoning, tool calls, tool activity, data, refs and non-terminal
// errors have no place on such a wire).
func TextDeltas(r *cv1.Response, prompt string) []string {
	var out []string
	if r.GetEcho() {
		out = append(out, Words(prompt)...)
	}
	for _, it := range r.GetItems() {
		if t := it.GetText(); t != nil {
			out = append(out, Deltas(t)...)
		}
	}
	return out
}

// TritonModel is the reference Triton peer's script for r: the text
// deltas as raw responses (a rune may be cut across two), the failure as
// Triton's error object after them (status 500 when nothing came before),
// the delay, hang and write size. A pure echo uses the peer's own echo, so
// the prompt that reached the peer is what comes back.
func TritonModel(name string, r *cv1.Response, prompt string) tritonpeer.Model {
	m := tritonpeer.Model{
		Name:      name,
		Delay:     time.Duration(r.GetDelayMs()) * time.Millisecond,
		WriteSize: int(r.GetWriteBytes()),
		Hang:      r.GetHang(),
	}
	if !(r.GetEcho() && len(r.GetItems()) == 0) {
		m.Chunks = TextDeltas(r, prompt)
		if m.Chunks == nil {
			m.Chunks = []string{} // nil would echo
		}
	}
	if f := r.GetFailure(); f != nil {
		m.ErrorMessage = FailureError(f).Message
		m.ErrorAt = len(m.Chunks)
		if m.Chunks == nil { // echo: after the prompt's words
			m.ErrorAt = len(Words(prompt))
		}
	}
	return m
}

// GlideRouter is the reference Glide peer's router for r. Glide's frames
// are JSON text, so deltas are re-cut at rune boundaries; a non-terminal
// error item is a model failing mid-stream (model_unavailable, then the
// next model streams the rest); a failure is the last model failing
// (model_unavailable, then all_models_unavailable); a hang waits on a latch
// no one opens (the peer ends it when the client disconnects).
func GlideRouter(hangLatch string, r *cv1.Response, prompt string) glidepeer.Router {
	delay := time.Duration(r.GetDelayMs()) * time.Millisecond
	var models []glidepeer.Model
	cur := glidepeer.Model{ID: "model-1"}
	if r.GetEcho() && len(r.GetItems()) == 0 {
		cur.Steps = append(cur.Steps, glidepeer.Step{Echo: true, Delay: delay})
	} else if r.GetEcho() {
		for _, w := range Words(prompt) {
			cur.Steps = append(cur.Steps, glidepeer.Step{Text: w, Delay: delay})
		}
	}
	for _, it := range r.GetItems() {
		switch k := it.GetKind().(type) {
		case *cv1.Item_Text:
			for _, d := range WholeRunes(Deltas(k.Text)) {
				cur.Steps = append(cur.Steps, glidepeer.Step{Text: d, Delay: delay})
			}
		case *cv1.Item_Error:
			cur.Steps = append(cur.Steps, glidepeer.Step{Unavailable: FailureError(k.Error).Message})
			models = append(models, cur)
			cur = glidepeer.Model{ID: "model-" + itoa(len(models)+1)}
		}
	}
	if r.GetHang() {
		cur.Steps = append(cur.Steps, glidepeer.Step{Wait: hangLatch})
	}
	if f := r.GetFailure(); f != nil {
		cur.Steps = append(cur.Steps, glidepeer.Step{Unavailable: FailureError(f).Message})
	}
	return glidepeer.Router{Models: append(models, cur)}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// EvergreenScript is the reference Evergreen peer's script for r: text
// blocks are response parts (a fragment per delta, runes possibly cut
// across fragments), reasoning blocks reasoning parts, data and refs
// response parts, tool calls and tool activity tool_calls parts (the
// Interlingua tool-event JSON); the failure is the session's abort status;
// non-terminal errors and interrupts have no Evergreen form and are left
// out.
func EvergreenScript(r *cv1.Response, prompt string) evergreenpeer.Script {
	sc := evergreenpeer.Script{Delay: time.Duration(r.GetDelayMs()) * time.Millisecond, Hang: r.GetHang()}
	var open *evergreenpeer.Part // the text or reasoning part items append to
	text := func(output string, deltas []string) {
		if len(deltas) == 0 {
			return
		}
		if open == nil || open.Output != output {
			sc.Parts = append(sc.Parts, evergreenpeer.Part{Output: output})
			open = &sc.Parts[len(sc.Parts)-1]
		}
		for _, d := range deltas {
			open.Fragments = append(open.Fragments, []byte(d))
		}
	}
	add := func(p evergreenpeer.Part) {
		sc.Parts = append(sc.Parts, p)
		open = nil
	}
	tool := func(v map[string]any) {
		data, _ := json.Marshal(v)
		add(evergreenpeer.Part{Output: evergreenpeer.ToolCalls, Mime: "application/json", Fragments: [][]byte{data}})
	}
	if r.GetEcho() {
		text(evergreenpeer.Response, Words(prompt))
	}
	for _, it := range r.GetItems() {
		switch k := it.GetKind().(type) {
		case *cv1.Item_Text:
			text(evergreenpeer.Response, Deltas(k.Text))
		case *cv1.Item_Reasoning:
			text(evergreenpeer.Reasoning, Deltas(k.Reasoning))
		case *cv1.Item_ToolCall:
			tool(map[string]any{"type": "tool_call", "id": k.ToolCall.GetId(), "name": k.ToolCall.GetName(), "arguments": Full(k.ToolCall.GetArguments())})
		case *cv1.Item_Tool:
			t := k.Tool
			tool(map[string]any{"type": "tool_started", "id": t.GetId(), "name": t.GetName(), "input": t.GetInput().AsInterface()})
			for _, o := range t.GetOutput() {
				tool(map[string]any{"type": "tool_output", "id": t.GetId(), "delta": o})
			}
			if f := t.GetFailure(); f != nil {
				e := FailureError(f)
				tool(map[string]any{"type": "tool_failed", "id": t.GetId(), "error": map[string]any{"code": e.Code.String(), "message": e.Message}})
			} else {
				tool(map[string]any{"type": "tool_finished", "id": t.GetId(), "output": t.GetResult().AsInterface()})
			}
		case *cv1.Item_Data:
			add(evergreenpeer.Part{Output: evergreenpeer.Response, Mime: k.Data.GetMime(), Fragments: [][]byte{DataBytes(k.Data)}})
		case *cv1.Item_Ref:
			add(evergreenpeer.Part{Output: evergreenpeer.Response, Mime: k.Ref.GetMime(), Ref: k.Ref.GetUri()})
		case *cv1.Item_Message, *cv1.Item_Error:
			open = nil // what follows is a part of its own
		}
	}
	if f := r.GetFailure(); f != nil {
		e := FailureError(f)
		sc.Abort = connect.NewError(connect.Code(e.Code), errors.New(e.Message))
	}
	return sc
}
