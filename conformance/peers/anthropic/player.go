package anthropic

import (
	"context"
	"net/http"
	"time"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// Wire structs of the events the peer writes (RawMessageStreamEvent).
type (
	usage struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	}
	message struct {
		ID           string  `json:"id"`
		Type         string  `json:"type"`
		Role         string  `json:"role"`
		Model        string  `json:"model"`
		Content      []any   `json:"content"`
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
		Usage        usage   `json:"usage"`
	}
	messageStart struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}
	blockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	blockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	blockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	messageDelta struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage usage `json:"usage"`
	}
	typed struct {
		Type string `json:"type"`
	}
	errorEvent struct {
		Type  string      `json:"type"`
		Error errorDetail `json:"error"`
	}
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	thinkingBlock struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	redactedBlock struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	toolUseBlock struct {
		Type  string         `json:"type"`
		ID    string         `json:"id"`
		Name  string         `json:"name"`
		Input map[string]any `json:"input"`
	}
	kv struct {
		Type  string `json:"type"`
		Text  string `json:"text,omitzero"`
		JSON  string `json:"partial_json,omitzero"`
		Think string `json:"thinking,omitzero"`
		Sig   string `json:"signature,omitzero"`
	}
)

// player writes one model's stream.
type player struct {
	w      http.ResponseWriter
	m      Model
	ctx    context.Context
	closed <-chan struct{}
	err    bool
}

func (p *player) send(name string, v any) {
	if p.err {
		return
	}
	data, _ := json.Marshal(v)
	if _, err := p.w.Write([]byte("event: " + name + "\ndata: " + string(data) + "\n\n")); err != nil {
		p.err = true
		return
	}
	_ = http.NewResponseController(p.w).Flush()
}

func (p *player) wait() {
	if p.m.Delay <= 0 {
		return
	}
	t := time.NewTimer(p.m.Delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.ctx.Done():
		p.err = true
	}
}

// play writes the documented sequence for the model.
func (p *player) play() {
	h := p.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Request-Id", "req_peer")
	p.w.WriteHeader(http.StatusOK)
	m := p.m
	u := usage{InputTokens: m.Usage.Input, CacheReadInputTokens: m.Usage.CacheRead, CacheCreationInputTokens: m.Usage.CacheCreation, OutputTokens: 1}
	p.send("message_start", messageStart{Type: "message_start", Message: message{
		ID: "msg_peer_" + m.Name, Type: "message", Role: "assistant", Model: m.Name, Content: []any{}, Usage: u,
	}})
	stop := "end_turn"
	for i, b := range m.Blocks {
		if m.ErrorEvent != "" && i == m.ErrorEventAt {
			break
		}
		p.block(i, b)
		if b.Type == "tool_use" {
			stop = "tool_use"
		} else {
			stop = "end_turn"
		}
	}
	switch {
	case p.err:
		return
	case m.ErrorEvent != "":
		p.send("error", errorEvent{Type: "error", Error: errorDetail{Type: m.ErrorEvent, Message: m.ErrorMessage}})
		return
	case m.Cut:
		cut()
	case m.Hang:
		select {
		case <-p.ctx.Done():
		case <-p.closed:
		}
		return
	}
	md := messageDelta{Type: "message_delta"}
	md.Delta.StopReason = stop
	if m.StopReason != "" {
		md.Delta.StopReason = m.StopReason
	}
	if m.StopSequence != "" {
		md.Delta.StopSequence = &m.StopSequence
	}
	u.OutputTokens = m.Usage.Output
	md.Usage = u
	p.send("message_delta", md)
	p.send("message_stop", typed{Type: "message_stop"})
}

// block writes one block: start, (a ping after the first), deltas, a
// thinking block's signature, stop.
func (p *player) block(i int, b Block) {
	var start any
	dt := ""
	switch b.Type {
	case "text":
		start, dt = textBlock{Type: "text"}, "text_delta"
	case "thinking":
		start, dt = thinkingBlock{Type: "thinking"}, "thinking_delta"
	case "redacted_thinking":
		start = redactedBlock{Type: "redacted_thinking", Data: b.Data}
	case "tool_use":
		start, dt = toolUseBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: map[string]any{}}, "input_json_delta"
	}
	p.send("content_block_start", blockStart{Type: "content_block_start", Index: i, ContentBlock: start})
	if i == 0 {
		p.send("ping", typed{Type: "ping"})
	}
	deltas := b.Deltas
	if b.Type == "tool_use" {
		deltas = append([]string{""}, deltas...)
	}
	for _, d := range deltas {
		p.wait()
		v := kv{Type: dt}
		switch dt {
		case "text_delta":
			v.Text = d
		case "thinking_delta":
			v.Think = d
		case "input_json_delta":
			v.JSON = d
		default:
			continue
		}
		if d == "" && dt == "input_json_delta" {
			p.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: struct {
				Type string `json:"type"`
				JSON string `json:"partial_json"`
			}{dt, ""}})
			continue
		}
		p.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: v})
	}
	if b.Type == "thinking" && b.Signature != "" {
		p.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: kv{Type: "signature_delta", Sig: b.Signature}})
	}
	p.send("content_block_stop", blockStop{Type: "content_block_stop", Index: i})
}
