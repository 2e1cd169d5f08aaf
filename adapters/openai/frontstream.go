package openai

import (
	"net/http"
	"strconv"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// ReasoningField says which delta member carries reasoning.
const (
	ReasoningContent = "reasoning_content" // DeepSeek, llama.cpp, sglang
	ReasoningPlain   = "reasoning"         // vLLM since late 2025, Ollama, OpenRouter
	ReasoningBoth    = "both"
)

// streamWriter writes a run as chat.completion.chunk events. Every chunk
// is its constant parts (id, created, model, made once) around
// library-quoted strings; the 200 and the headers go out with the first
// chunk, so a run that fails before its first message gets an HTTP error.
type streamWriter struct {
	w        http.ResponseWriter
	sw       *sse.Writer
	reasonTo string
	id       string
	model    string
	created  int64
	usage    bool // include_usage
	started  bool
	prefix   []byte // {"id":…,"choices":[{"index":0,"delta":{
	buf      []byte
}

func newStreamWriter(w http.ResponseWriter, sw *sse.Writer, model, reasoning string, created int64, usage bool) *streamWriter {
	s := &streamWriter{w: w, sw: sw, reasonTo: reasoning, id: newID("chatcmpl-"), model: model, created: created, usage: usage}
	s.prefix = s.head(nil)
	s.prefix = append(s.prefix, `[{"index":0,"delta":{`...)
	return s
}

// head appends a chunk's members up to "choices":.
func (s *streamWriter) head(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = json.AppendQuote(b, s.id)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, s.created, 10)
	b = append(b, `,"model":`...)
	b = json.AppendQuote(b, s.model)
	return append(b, `,"choices":`...)
}

func (s *streamWriter) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	sse.SetHeaders(h)
	s.w.WriteHeader(http.StatusOK)
}

// send queues one chunk whose delta members are delta, with finish as the
// finish_reason ("" for null).
func (s *streamWriter) send(delta []byte, finish string) error {
	b := append(s.buf[:0], s.prefix...)
	b = append(b, delta...)
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = json.AppendQuote(b, finish)
	}
	b = append(b, "}]"...)
	if s.usage {
		b = append(b, `,"usage":null`...)
	}
	b = append(b, '}')
	s.buf = b
	s.start()
	return s.sw.QueueData(b)
}

func (s *streamWriter) begin() error {
	return s.send([]byte(`"role":"assistant","content":""`), "")
}

func (s *streamWriter) text(t string) error {
	return s.send(json.AppendQuote([]byte(`"content":`), t), "")
}

func (s *streamWriter) reasoning(t string) error {
	var d []byte
	if s.reasonTo != ReasoningPlain {
		d = json.AppendQuote(append(d, `"reasoning_content":`...), t)
	}
	if s.reasonTo != ReasoningContent {
		if len(d) > 0 {
			d = append(d, ',')
		}
		d = json.AppendQuote(append(d, `"reasoning":`...), t)
	}
	return s.send(d, "")
}

func (s *streamWriter) toolStart(index int, id, name string) error {
	d := strconv.AppendInt([]byte(`"tool_calls":[{"index":`), int64(index), 10)
	d = json.AppendQuote(append(d, `,"id":`...), id)
	d = json.AppendQuote(append(d, `,"type":"function","function":{"name":`...), name)
	return s.send(append(d, `,"arguments":""}}]`...), "")
}

func (s *streamWriter) toolArgs(index int, t string) error {
	d := strconv.AppendInt([]byte(`"tool_calls":[{"index":`), int64(index), 10)
	d = json.AppendQuote(append(d, `,"function":{"arguments":`...), t)
	return s.send(append(d, "}}]"...), "")
}

// finish writes the finish chunk, the usage chunk when asked, [DONE].
func (s *streamWriter) finish(reason string, u *canonical.Usage) error {
	if err := s.send(nil, reason); err != nil {
		return err
	}
	if s.usage {
		data, err := json.Marshal(usageChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
			Choices: []struct{}{}, Usage: wireUsageOf(u)})
		if err != nil {
			return canonical.Errorf(canonical.CodeInternal, "encoding the usage chunk: %v", err)
		}
		if err := s.sw.QueueData(data); err != nil {
			return err
		}
	}
	if err := s.sw.Data([]byte("[DONE]")); err != nil {
		return err
	}
	return nil
}

// fail reports a failure: OpenAI's error answer with its status before the
// first chunk; after it, one data: error object and the end of the stream
// without [DONE] (reference 10.1: never a made-up finish_reason).
func (s *streamWriter) fail(e *canonical.Error) error {
	if !s.started {
		fromCanonical(e).write(s.w)
		return nil
	}
	return s.sw.Data(streamError(e))
}

// usageChunk is the last chunk of include_usage: no choices, the usage.
type usageChunk struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []struct{} `json:"choices"`
	Usage   *wireUsage `json:"usage"`
}

// collector gathers a run into one chat.completion, bounded by limit bytes
// of text, reasoning and arguments.
type collector struct {
	c         completion
	reasonTo  string
	textBuf   []byte
	reasonBuf []byte
	calls     []wireCall
	limit     int
	size      int
	failed    *canonical.Error
	finished  bool
}

func (c *collector) grow(n int) error {
	c.size += n
	if c.size > c.limit {
		return canonical.Errorf(canonical.CodeResourceExhausted, "the answer exceeds the frontend's max_output_bytes (%d)", c.limit)
	}
	return nil
}

func (c *collector) begin() error { return nil }

func (c *collector) text(s string) error {
	c.textBuf = append(c.textBuf, s...)
	return c.grow(len(s))
}

func (c *collector) reasoning(s string) error {
	c.reasonBuf = append(c.reasonBuf, s...)
	return c.grow(len(s))
}

func (c *collector) toolStart(_ int, id, name string) error {
	c.calls = append(c.calls, wireCall{ID: id, Type: "function", Function: wireFunction{Name: name}})
	return c.grow(len(id) + len(name))
}

func (c *collector) toolArgs(index int, s string) error {
	if index < len(c.calls) {
		c.calls[index].Function.Arguments += s
	}
	return c.grow(len(s))
}

func (c *collector) finish(reason string, u *canonical.Usage) error {
	c.finished = true
	m := outMessage{Role: "assistant", Annotations: []struct{}{}, ToolCalls: c.calls}
	if len(c.textBuf) > 0 || len(c.calls) == 0 {
		t := string(c.textBuf)
		m.Content = &t
	}
	if len(c.reasonBuf) > 0 {
		r := string(c.reasonBuf)
		if c.reasonTo != ReasoningPlain {
			m.ReasoningContent = &r
		}
		if c.reasonTo != ReasoningContent {
			m.Reasoning = &r
		}
	}
	for i := range c.calls {
		if c.calls[i].Function.Arguments == "" {
			c.calls[i].Function.Arguments = "{}"
		}
	}
	c.c.Choices = []choice{{Message: m, FinishReason: reason}}
	if u != nil {
		c.c.Usage = wireUsageOf(u)
	}
	return nil
}

func (c *collector) fail(e *canonical.Error) error {
	c.failed = e
	return nil
}
