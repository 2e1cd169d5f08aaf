package glide

import (
	"bytes"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// This file turns canonical events into Glide response frames (the
// frontend's direction) and canonical requests into Glide request frames
// (the backend's).

// model is what a chunk says about the model that produced it.
type model struct {
	ID, Provider, Name string
}

// Keys of canonical MessageStart.Metadata read and written by this adapter.
const (
	metaModelID  = "model_id" // Glide chunk.model_id (the router's model id)
	metaProvider = "provider" // Glide chunk.provider_id
	metaModel    = "model"    // Glide chunk.model_name
)

// Keys of canonical Request.Extensions read and written by this adapter.
const (
	extID             = "glide.id"              // the client's request id
	extMetadata       = "glide.metadata"        // the request's metadata object
	extOverrideParams = "glide.override_params" // the request's override_params object
)

// writeOptions write JSON as Go's encoding/json writes it, which is what
// Glide's WriteJSON sends and its clients send: <, > and & escaped, U+2028
// and U+2029 escaped, invalid UTF-8 as U+FFFD, map keys sorted. The echoed
// metadata may repeat a name, as the client sent it.
var writeOptions = []json.Options{json.EscapeForHTML(true), json.EscapeForJS(true),
	json.AllowInvalidUTF8(true), json.AllowDuplicateNames(true), json.Deterministic(true)}

// replyFrame is Glide's ChatStreamMessage as the frontend writes it.
type replyFrame struct {
	ID        string     `json:"id"`
	CreatedAt int64      `json:"created_at"`
	RouterID  string     `json:"router_id"`
	Metadata  json.Value `json:"metadata,omitzero"`
	Chunk     *wireChunk `json:"chunk,omitzero"`
	Error     *wireError `json:"error,omitzero"`
}

// replyEncoder turns one request's canonical events into response frames.
// Each frame is a new slice the caller may hand off (wsconn.Conn.Send takes
// ownership). It is not safe for concurrent use.
type replyEncoder struct {
	now func() time.Time

	frame replyFrame    // id, router_id and metadata; the rest is per frame
	chunk wireChunk     // the open message's model and role
	buf   bytes.Buffer  // what enc writes, copied out frame by frame
	enc   *json.Encoder // ends each frame with a newline, as WriteJSON does

	def  model // the model named when the run says nothing
	text bool  // the open root block is a text block

	reason    string                 // the finish_reason of a chunk
	finish    canonical.FinishReason // of the last root message
	finished  bool                   // a root message has finished
	done      bool                   // the terminal frame was produced
	cancelMsg string                 // message for a cancelled run, if set
	interrupt string                 // "interrupt <id>: <payload JSON>" of the last input request

	// delta is the template of the open message's text chunks (made once
	// tried; nil: they are marshalled): marshalling every delta's frame
	// was 37% of the CPU an unpaced glide:triton server spent.
	delta      *json.Template
	deltaTried bool
	scratch    []byte // a delta's frame, copied out
}

// newReplyEncoder returns the encoder for request id on router; metadata
// is the request's metadata object, compact, or nil.
func newReplyEncoder(now func() time.Time, id, router string, metadata json.Value, def model) *replyEncoder {
	e := &replyEncoder{now: now, def: def, frame: replyFrame{ID: id, RouterID: router, Metadata: metadata}}
	e.enc = json.NewEncoder(&e.buf, writeOptions...)
	e.setModel(def, "assistant")
	return e
}

// setModel names the model and role of the chunks that follow.
func (e *replyEncoder) setModel(m model, role string) {
	e.chunk = wireChunk{ModelID: m.ID, ProviderID: m.Provider, ModelName: m.Name}
	e.chunk.ModelResponse.Message.Role = role
	e.delta, e.deltaTried = nil, false
}

// deltaFill makes the open message's text chunk frames created at n with
// text s, for their template.
func (e *replyEncoder) deltaFill(n int64, s string) any {
	c, f := e.chunk, e.frame
	c.ModelResponse.Message.Content, c.FinishReason = s, nil
	f.CreatedAt, f.Chunk, f.Error = n, &c, nil
	return &f
}

// deltaFrame is the text chunk frame of text from the open message's
// template, newline-ended as encode's; false when there is no template or
// it leaves text to encode.
func (e *replyEncoder) deltaFrame(text string) ([]byte, bool) {
	if !e.deltaTried {
		e.deltaTried = true
		e.delta, _ = json.NewTemplate(e.deltaFill, writeOptions...)
	}
	if e.delta == nil {
		return nil, false
	}
	b, ok := e.delta.Append(e.scratch[:0], e.now().Unix(), text)
	if !ok {
		return nil, false
	}
	e.scratch = append(b, '\n')
	return bytes.Clone(e.scratch), true
}

// encode is the frame carrying chunk or error, stamped now.
func (e *replyEncoder) encode(chunk *wireChunk, wireErr *wireError) []byte {
	e.frame.CreatedAt = e.now().Unix()
	e.frame.Chunk, e.frame.Error = chunk, wireErr
	e.buf.Reset()
	if err := json.MarshalEncode(e.enc, &e.frame); err != nil {
		// Only metadata that is not JSON can fail (strings may hold
		// invalid UTF-8), and decodeRequest gives none. Should it come,
		// the frames go without it rather than not at all.
		e.enc.Reset(&e.buf, writeOptions...)
		e.buf.Reset()
		e.frame.Metadata = nil
		e.delta, e.deltaTried = nil, false
		_ = json.MarshalEncode(e.enc, &e.frame)
	}
	return bytes.Clone(e.buf.Bytes())
}

// chunkFrame is a chunk frame carrying text, with finish_reason when
// reason is not empty.
func (e *replyEncoder) chunkFrame(text, reason string) []byte {
	if reason == "" {
		if b, ok := e.deltaFrame(text); ok {
			return b
		}
	}
	c := &e.chunk
	c.ModelResponse.Message.Content, c.FinishReason = text, nil
	if reason != "" {
		e.reason = reason // (a field: &reason would cost every delta an allocation)
		c.FinishReason = &e.reason
	}
	return e.encode(c, nil)
}

// errorFrame is an error frame; terminal ones carry finish_reason "error".
func (e *replyEncoder) errorFrame(name, msg string, terminal bool) []byte {
	we := &wireError{Name: name, Message: msg}
	if terminal {
		reason := "error"
		we.FinishReason = &reason
	}
	return e.encode(nil, we)
}

// fail is the terminal error frame for err, and marks the request done.
func (e *replyEncoder) fail(err *canonical.Error) []byte {
	e.done = true
	name := errorName(err.Code)
	return e.errorFrame(name, errorMessage(name, err.Code, err.Message), true)
}

// event returns the frame ev produces, or nil. Only the root namespace
// speaks (the frontend hands it canonical.AnswerStream's view, the
// agent's answer on the root): text deltas become chunks, non-terminal
// errors model_unavailable, and the terminal event the final chunk or a
// terminal error; an interrupted run's error names the last input
// request's interrupt id and payload (JSON).
func (e *replyEncoder) event(ev *canonical.Event) []byte {
	if e.done || len(ev.GetNamespace()) != 0 {
		return nil
	}
	switch k := ev.GetKind().(type) {
	case *canonical.KindBlockDelta:
		if e.text && k.BlockDelta.GetText() != "" {
			return e.chunkFrame(k.BlockDelta.GetText(), "")
		}
	case *canonical.KindMessageStart:
		e.startMessage(k.MessageStart)
	case *canonical.KindBlockStart:
		e.text = k.BlockStart.GetType() == canonical.BlockText
	case *canonical.KindBlockFinish:
		e.text = false
	case *canonical.KindMessageFinish:
		e.finish, e.finished = k.MessageFinish.GetFinishReason(), true
	case *canonical.KindInputRequested:
		var payload any
		if p := k.InputRequested.GetPayload(); p != nil {
			payload = p.AsInterface()
		}
		b, _ := json.Marshal(payload, writeOptions...)
		e.interrupt = "interrupt " + k.InputRequested.GetInterruptId() + ": " + string(b)
	case *canonical.KindError:
		c := canonical.Code(k.Error.GetCode())
		return e.errorFrame(nameModelUnavailable, errorMessage(nameModelUnavailable, c, k.Error.GetMessage()), false)
	case *canonical.KindLifecycle:
		return e.terminal(k.Lifecycle)
	}
	return nil
}

// startMessage switches the chunk prefix to the message's model and role.
func (e *replyEncoder) startMessage(ms *canonical.MessageStart) {
	m := e.def
	md := ms.GetMetadata()
	if s := md[metaModelID].GetStringValue(); s != "" {
		m.ID = s
	}
	if s := md[metaProvider].GetStringValue(); s != "" {
		m.Provider = s
	}
	if s := md[metaModel].GetStringValue(); s != "" {
		m.Name = s
	}
	role := ms.GetRole()
	if role == "" {
		role = "assistant"
	}
	e.setModel(m, role)
}

// terminal is the frame ending the request, if lc ends the run.
func (e *replyEncoder) terminal(lc *canonical.Lifecycle) []byte {
	switch lc.GetStatus() {
	case canonical.StatusCompleted:
		e.done = true
		reason := "other" // a run that ended without a finished message
		if e.finished {
			reason = finishName(e.finish)
		}
		return e.chunkFrame("", reason)
	case canonical.StatusInterrupted:
		msg := "run interrupted waiting for input, which Glide chatStream cannot carry"
		if e.interrupt != "" { // the question, so the client can show it
			msg += "; " + e.interrupt
		}
		return e.fail(canonical.Errorf(canonical.CodeFailedPrecondition, "%s", msg))
	case canonical.StatusFailed, canonical.StatusCancelled:
		err := canonical.FromProto(lc.GetError())
		if err == nil || err.Code == canonical.CodeOK {
			code := canonical.CodeUnknown
			if lc.GetStatus() == canonical.StatusCancelled {
				code = canonical.CodeCanceled
			}
			err = canonical.Errorf(code, "run %s", lc.GetStatus())
		}
		if lc.GetStatus() == canonical.StatusCancelled && e.cancelMsg != "" {
			err = canonical.Errorf(canonical.CodeCanceled, "%s", e.cancelMsg)
		}
		return e.fail(err)
	}
	return nil
}

// wireMessage is Glide's ChatMessage.
type wireMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// wireRequest is Glide's ChatStreamRequest as the backend sends it.
type wireRequest struct {
	ID             string        `json:"id"`
	Message        wireMessage   `json:"message"`
	MessageHistory []wireMessage `json:"message_history,omitempty"`
	OverrideParams json.Value    `json:"override_params,omitzero"`
	Metadata       json.Value    `json:"metadata,omitzero"`
}

// wireCancel is the Interlingua cancel extension frame.
type wireCancel struct {
	ID     string `json:"id"`
	Cancel bool   `json:"cancel"`
}

// encodeRequest is the request frame asking upstream for req under id:
// the text leaves of the input named "prompt" (else of every input) with
// their roles, the last as message and the rest as message_history;
// metadata and override_params from the request's glide.* extensions, the
// metadata else from Request.Metadata. Parameters, tools and non-text
// leaves have no place on this wire and are dropped.
func encodeRequest(id string, req *canonical.Request) ([]byte, error) {
	var leaves []*canonical.Node
	if p := canonical.Input(req, "prompt"); p != nil {
		leaves = canonical.Leaves(nil, p)
	} else {
		for _, in := range req.GetInputs() {
			leaves = canonical.Leaves(leaves, in.GetNode())
		}
	}
	var msgs []wireMessage
	for _, l := range leaves {
		if !canonical.IsText(l) {
			continue
		}
		role := l.GetRole()
		if role == "" {
			role = "user"
		}
		msgs = append(msgs, wireMessage{Role: role, Content: string(l.GetData())})
	}
	if len(msgs) == 0 {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "request has no text input to send as the Glide message")
	}
	w := wireRequest{ID: id, Message: msgs[len(msgs)-1], MessageHistory: msgs[:len(msgs)-1]}
	var err error
	if v := req.GetExtensions()[extOverrideParams]; v.GetStructValue() != nil {
		if w.OverrideParams, err = v.MarshalJSON(); err != nil {
			return nil, canonical.Errorf(canonical.CodeInvalidArgument, "extension %s: %v", extOverrideParams, err)
		}
	}
	if v := req.GetExtensions()[extMetadata]; v.GetStructValue() != nil {
		if w.Metadata, err = v.MarshalJSON(); err != nil {
			return nil, canonical.Errorf(canonical.CodeInvalidArgument, "extension %s: %v", extMetadata, err)
		}
	} else if len(req.GetMetadata()) > 0 {
		if w.Metadata, err = json.Marshal(req.GetMetadata(), writeOptions...); err != nil {
			return nil, canonical.Errorf(canonical.CodeInvalidArgument, "metadata: %v", err)
		}
	}
	b, err := json.Marshal(w, writeOptions...)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInternal, "encoding the request frame: %v", err)
	}
	return b, nil
}
