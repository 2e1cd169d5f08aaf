package openai

import (
	"bytes"
	"net/http"

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

// streamWriter writes a run as chat.completion.chunk events (outChunk).
// The 200 and the headers go out with the first chunk, so a run that
// fails before its first message gets an HTTP error.
type streamWriter struct {
	w        http.ResponseWriter
	sw       *sse.Writer
	reasonTo string
	id       string
	model    string
	created  int64
	usage    bool // include_usage
	started  bool
	// templates of the chunks a stream writes per delta, made when first
	// needed (nil: not yet; failed: Marshal writes them): marshalling
	// each chunk whole cost an unpaced openai:openai bench 15% more CPU
	// per delta than a template's text around the delta.
	templates [deltaKinds]*json.Template
	failed    [deltaKinds]bool
	buf       []byte
}

// The kinds of delta chunk, each with its template.
const (
	deltaContent = iota
	deltaReasoning
	deltaArguments
	deltaKinds
)

func newStreamWriter(w http.ResponseWriter, sw *sse.Writer, model, reasoning string, created int64, usage bool) *streamWriter {
	return &streamWriter{w: w, sw: sw, reasonTo: reasoning, id: newID("chatcmpl-"), model: model, created: created, usage: usage}
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

// chunk is a chunk of the stream with delta d and finish as its
// finish_reason ("" for null).
func (s *streamWriter) chunk(d chunkDelta, finish string) *outChunk {
	c := &outChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []chunkChoice{{Delta: d}}}
	if finish != "" {
		c.Choices[0].FinishReason = &finish
	}
	if s.usage {
		c.Usage = json.Value("null")
	}
	return c
}

// delta makes the chunk of a delta of kind k: its text t and n, of
// arguments the tool call's index, of the others the created time (a
// template's integer).
func (s *streamWriter) delta(k int, n int64, t string) *outChunk {
	var d chunkDelta
	created := n
	switch k {
	case deltaContent:
		d.Content = &t
	case deltaReasoning:
		if s.reasonTo != ReasoningPlain {
			d.ReasoningContent = &t
		}
		if s.reasonTo != ReasoningContent {
			d.Reasoning = &t
		}
	case deltaArguments:
		d.ToolCalls = []chunkCall{{Index: n, Function: chunkFunction{Arguments: t}}}
		created = s.created
	}
	c := s.chunk(d, "")
	c.Created = created
	return c
}

// sendDelta queues the chunk of a delta of kind k, from its template when
// there is one (ReasoningBoth has none: its text is written twice).
func (s *streamWriter) sendDelta(k int, n int64, t string) error {
	if s.templates[k] == nil && !s.failed[k] {
		s.templates[k], _ = json.NewTemplate(func(n int64, t string) any { return s.delta(k, n, t) })
		s.failed[k] = s.templates[k] == nil
	}
	if tm := s.templates[k]; tm != nil {
		if b, ok := tm.Append(s.buf[:0], n, t); ok {
			s.buf = b
			return s.queue(b)
		}
	}
	return s.send(s.delta(k, n, t))
}

// send queues c, marshalled (invalid UTF-8 written as U+FFFD: a chunk is
// never refused for text a backend sent).
func (s *streamWriter) send(c *outChunk) error {
	buf := bytes.NewBuffer(s.buf[:0])
	if err := json.MarshalWrite(buf, c, json.AllowInvalidUTF8(true)); err != nil {
		return canonical.Errorf(canonical.CodeInternal, "encoding a chunk: %v", err)
	}
	s.buf = buf.Bytes()
	return s.queue(s.buf)
}

func (s *streamWriter) queue(b []byte) error {
	s.start()
	return s.sw.QueueData(b)
}

func (s *streamWriter) begin() error {
	empty := ""
	return s.send(s.chunk(chunkDelta{Role: "assistant", Content: &empty}, ""))
}

// text, reasoning and toolArgs write a delta's chunk.
func (s *streamWriter) text(t string) error { return s.sendDelta(deltaContent, s.created, t) }

func (s *streamWriter) reasoning(t string) error { return s.sendDelta(deltaReasoning, s.created, t) }

func (s *streamWriter) toolArgs(index int, t string) error {
	return s.sendDelta(deltaArguments, int64(index), t)
}

func (s *streamWriter) toolStart(index int, id, name string) error {
	call := chunkCall{Index: int64(index), ID: id, Type: "function", Function: chunkFunction{Name: &name}}
	return s.send(s.chunk(chunkDelta{ToolCalls: []chunkCall{call}}, ""))
}

// finish writes the finish chunk, the usage chunk when asked, [DONE].
func (s *streamWriter) finish(reason string, u *canonical.Usage) error {
	if err := s.send(s.chunk(chunkDelta{}, reason)); err != nil {
		return err
	}
	if s.usage {
		c := &outChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
			Choices: []chunkChoice{}, Usage: wireUsageOf(u)}
		if err := s.send(c); err != nil {
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

// outChunk is a ChatCompletionChunk as the frontend writes it. When
// include_usage asks for it, usage is null (json.Value) on every chunk but
// the last, which has no choices and the usage (*wireUsage); otherwise it
// is absent (nil).
type outChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   any           `json:"usage,omitzero"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role             string      `json:"role,omitzero"`
	Content          *string     `json:"content,omitzero"`
	ReasoningContent *string     `json:"reasoning_content,omitzero"`
	Reasoning        *string     `json:"reasoning,omitzero"`
	ToolCalls        []chunkCall `json:"tool_calls,omitzero"`
}

// chunkCall is a tool call's delta: index, id, type and name in its
// first chunk, index and an arguments fragment after.
type chunkCall struct {
	Index    int64         `json:"index"`
	ID       string        `json:"id,omitzero"`
	Type     string        `json:"type,omitzero"`
	Function chunkFunction `json:"function"`
}

type chunkFunction struct {
	Name      *string `json:"name,omitzero"`
	Arguments string  `json:"arguments"`
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
