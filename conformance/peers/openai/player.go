package openai

import (
	"net/http"
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// player writes one model's stream.
type player struct {
	w     http.ResponseWriter
	m     Model
	usage bool
	id    string
	model string
	echo  string
	n     int // chunks written
}

type chunk struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   any      `json:"usage,omitzero"`
}

type choice struct {
	Index        int            `json:"index"`
	Delta        map[string]any `json:"delta"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
}

// usageObject is CompletionUsage.
func (pl *player) usageObject() map[string]any {
	u := pl.m.Usage
	return map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion, "total_tokens": u.Prompt + u.Completion,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.Cached},
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning}}
}

// send writes one chunk; it reports false when the stream must stop (an
// error written, a cut, a client gone).
func (pl *player) send(delta map[string]any, finish *string, usage any) bool {
	if pl.m.ErrorAt > 0 && pl.n == pl.m.ErrorAt {
		pl.raw(`data: {"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}}` + "\n\n" + "data: [DONE]\n\n")
		return false
	}
	if pl.m.Cut && pl.n == pl.m.CutAt {
		pl.cut()
		return false
	}
	c := chunk{ID: pl.id, Object: "chat.completion.chunk", Created: 1, Model: pl.model,
		Choices: []choice{{Delta: delta, FinishReason: finish}}}
	if delta == nil {
		c.Choices = []choice{}
	}
	if usage != nil {
		c.Usage = usage
	} else if pl.usage {
		c.Usage = json.Value("null")
	}
	b, _ := json.Marshal(c)
	s := "data: " + string(b) + "\n\n"
	if pl.m.Comments {
		s = ": OPENROUTER PROCESSING\n\n" + s
	}
	pl.n++
	if pl.m.Delay > 0 {
		time.Sleep(pl.m.Delay)
	}
	return pl.raw(s)
}

func (pl *player) raw(s string) bool {
	if _, err := pl.w.Write([]byte(s)); err != nil {
		return false
	}
	return http.NewResponseController(pl.w).Flush() == nil
}

// cut resets the connection.
func (pl *player) cut() {
	conn, _, err := http.NewResponseController(pl.w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// play writes the whole stream; it reports false when the client left.
func (pl *player) play(r *http.Request) bool {
	h := pl.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	pl.w.WriteHeader(http.StatusOK)
	m := pl.m
	first := map[string]any{"role": "assistant", "content": ""}
	if m.NullContent {
		first["content"] = nil
	}
	if !pl.send(first, nil, nil) {
		return r.Context().Err() == nil
	}
	field := m.ReasoningField
	if field == "" {
		field = "reasoning_content"
	}
	for _, s := range m.Reasoning {
		if !pl.send(map[string]any{"content": nil, field: s}, nil, nil) {
			return r.Context().Err() == nil
		}
	}
	var words []string
	if pl.echo != "" {
		words = strings.SplitAfter(pl.echo, " ")
	}
	for _, s := range append(words, m.Content...) {
		if !pl.send(map[string]any{"content": s}, nil, nil) {
			return r.Context().Err() == nil
		}
	}
	if m.Hang {
		<-r.Context().Done()
		return false
	}
	if !pl.calls() {
		return r.Context().Err() == nil
	}
	return pl.end(r)
}

// calls writes the tool calls.
func (pl *player) calls() bool {
	for i, c := range pl.m.Calls {
		head := map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}
		if pl.m.WholeCalls {
			head["function"] = map[string]any{"name": c.Name, "arguments": strings.Join(c.Args, "")}
			if !pl.send(map[string]any{"tool_calls": []any{head}}, nil, nil) {
				return false
			}
			continue
		}
		if !pl.send(map[string]any{"tool_calls": []any{head}}, nil, nil) {
			return false
		}
		for _, a := range c.Args {
			tc := map[string]any{"index": i, "function": map[string]any{"arguments": a}}
			if pl.m.RepeatToolIDs {
				tc = map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": a}}
			}
			if !pl.send(map[string]any{"tool_calls": []any{tc}}, nil, nil) {
				return false
			}
		}
	}
	return true
}

// end writes the finish chunk, the usage chunk and [DONE].
func (pl *player) end(r *http.Request) bool {
	m := pl.m
	finish := m.Finish
	if finish == "" {
		finish = "stop"
		if len(m.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	var u any
	if m.UsageOn == "finish" {
		u = pl.usageObject()
	}
	if !pl.send(map[string]any{}, &finish, u) {
		return r.Context().Err() == nil
	}
	if pl.usage && m.UsageOn == "" {
		if !pl.send(nil, nil, pl.usageObject()) {
			return r.Context().Err() == nil
		}
	}
	switch {
	case m.NoDone:
	case m.DoneNoBlank:
		pl.raw("data: [DONE]")
	default:
		pl.raw("data: [DONE]\n\n")
	}
	return true
}
