package glide

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/interlingua-dev/interlingua/canonical"

	"github.com/interlingua-dev/interlingua/internal/jsonw"
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

// replyEncoder turns one request's canonical events into response frames.
// Each frame is a new slice the caller may hand off (wsconn.Conn.Send takes
// ownership). It is not safe for concurrent use.
type replyEncoder struct {
	now func() time.Time

	head []byte // {"id":<id>,"created_at":
	tail []byte // ,"router_id":<router>[,"metadata":<metadata>]

	def       model  // the model named when the run says nothing
	chunkHead []byte // ,"chunk":{...,"message":{"role":<role>,"content":
	text      bool   // the open root block is a text block

	finish    canonical.FinishReason // of the last root message
	finished  bool                   // a root message has finished
	done      bool                   // the terminal frame was produced
	cancelMsg string                 // message for a cancelled run, if set
}

// newReplyEncoder returns the encoder for request id on router; metadata
// is the request's metadata object, compact, or nil.
func newReplyEncoder(now func() time.Time, id, router string, metadata []byte, def model) *replyEncoder {
	e := &replyEncoder{now: now, def: def}
	e.head = appendString(append(e.head, `{"id":`...), id)
	e.head = append(e.head, `,"created_at":`...)
	e.tail = appendString(append(e.tail, `,"router_id":`...), router)
	if len(metadata) > 0 {
		e.tail = append(append(e.tail, `,"metadata":`...), metadata...)
	}
	e.setModel(def, "assistant")
	return e
}

// setModel precomputes the chunk prefix for a model and role.
func (e *replyEncoder) setModel(m model, role string) {
	b := append(e.chunkHead[:0], `,"chunk":{"model_id":`...)
	b = appendString(b, m.ID)
	b = appendString(append(b, `,"provider_id":`...), m.Provider)
	b = appendString(append(b, `,"model_name":`...), m.Name)
	b = append(b, `,"cached":false,"model_response":{"message":{"role":`...)
	b = appendString(b, role)
	e.chunkHead = append(b, `,"content":`...)
}

// start begins a frame: the common fields, stamped now.
func (e *replyEncoder) start(extra int) []byte {
	b := make([]byte, 0, len(e.head)+len(e.tail)+len(e.chunkHead)+24+extra)
	b = append(b, e.head...)
	b = strconv.AppendInt(b, e.now().Unix(), 10)
	return append(b, e.tail...)
}

// chunk is a chunk frame carrying text, with finish_reason when reason is
// not empty.
func (e *replyEncoder) chunk(text, reason string) []byte {
	b := e.start(len(text) + len(text)/8 + len(reason) + 20)
	b = append(b, e.chunkHead...)
	b = appendString(b, text)
	b = append(b, `}}`...)
	if reason != "" {
		b = appendString(append(b, `,"finish_reason":`...), reason)
	}
	return append(b, "}}\n"...)
}

// errorFrame is an error frame; terminal ones carry finish_reason "error".
func (e *replyEncoder) errorFrame(name, msg string, terminal bool) []byte {
	b := e.start(len(name) + len(msg) + 64)
	b = appendString(append(b, `,"error":{"name":`...), name)
	b = appendString(append(b, `,"message":`...), msg)
	if terminal {
		b = append(b, `,"finish_reason":"error"`...)
	}
	return append(b, "}}\n"...)
}

// fail is the terminal error frame for err, and marks the request done.
func (e *replyEncoder) fail(err *canonical.Error) []byte {
	e.done = true
	name := errorName(err.Code)
	return e.errorFrame(name, errorMessage(name, err.Code, err.Message), true)
}

// event returns the frame ev produces, or nil. Only the root namespace
// speaks: text deltas become chunks, non-terminal errors model_unavailable,
// and the terminal event the final chunk or a terminal error.
func (e *replyEncoder) event(ev *canonical.Event) []byte {
	if e.done || len(ev.GetNamespace()) != 0 {
		return nil
	}
	switch k := ev.GetKind().(type) {
	case *canonical.KindBlockDelta:
		if e.text && k.BlockDelta.GetText() != "" {
			return e.chunk(k.BlockDelta.GetText(), "")
		}
	case *canonical.KindMessageStart:
		e.startMessage(k.MessageStart)
	case *canonical.KindBlockStart:
		e.text = k.BlockStart.GetType() == canonical.BlockText
	case *canonical.KindBlockFinish:
		e.text = false
	case *canonical.KindMessageFinish:
		e.finish, e.finished = k.MessageFinish.GetFinishReason(), true
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
		return e.chunk("", reason)
	case canonical.StatusInterrupted:
		return e.fail(canonical.Errorf(canonical.CodeFailedPrecondition,
			"run interrupted waiting for input, which Glide chatStream cannot carry"))
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
	ID             string          `json:"id"`
	Message        wireMessage     `json:"message"`
	MessageHistory []wireMessage   `json:"message_history,omitempty"`
	OverrideParams json.RawMessage `json:"override_params,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
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
		msgs = append(msgs, wireMessage{Role: role, Content: toValidUTF8(l.GetData())})
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
		if w.Metadata, err = json.Marshal(req.GetMetadata()); err != nil {
			return nil, canonical.Errorf(canonical.CodeInvalidArgument, "metadata: %v", err)
		}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInternal, "encoding the request frame: %v", err)
	}
	return b, nil
}

func toValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string([]rune(string(b))) // invalid bytes become U+FFFD
}

// appendString appends s as a JSON string exactly as encoding/json writes
// it (HTML-safe: <, > and & escaped; U+2028 and U+2029 escaped; invalid
// UTF-8 as \ufffd), which is what Glide's WriteJSON sends.
func appendString(dst []byte, s string) []byte {
	return jsonw.AppendString(dst, s, jsonw.EncodingJSON)
}
