package agent

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// Decoder turns one upstream run's agent-protocol events (whole envelope
// frames: an SSE event's data, or a WebSocket text frame) into canonical
// events, for the backend. It keeps namespaces, graph nodes, usage, message
// ids, interrupts and the values / updates / checkpoints / tasks / custom
// channels, and guarantees a valid canonical stream whatever the upstream
// sends: blocks are renumbered 0, 1, 2... per message, a block or message
// left open is closed before the next one or the namespace's end, deltas
// outside a block open one, and End supplies the terminal event an upstream
// never sent. The run ends at the first root lifecycle event with completed,
// failed or interrupted; later events are ignored.
//
// Command answers (type "success") are ignored. An error frame is the
// run's failure, never skipped: the upstream's report that events a reader
// asked for are no longer buffered (a "since" older than its buffer, or a
// reader it lapped: min_available_seq, or resume_gap) is CodeDataLoss
// unless every event it missed came before the run; any other error frame
// carries the upstream's code. A frame of another type, or that is not JSON,
// is an InvalidArgument error naming it. Not safe for concurrent use.
//
// Frames are read as the reference server's JavaScript peers read them
// (peerJSON): member names case-sensitive, the last of repeated names.
type Decoder struct {
	// AfterSeq skips events with a seq at or below it: the replay of earlier
	// runs of the thread (set it to the run.start response's
	// meta.applied_through_seq).
	AfterSeq uint64
	// Contiguous says the frames are every event of the thread (a
	// subscription to every channel and namespace, as the backend's), so
	// their seqs after AfterSeq come one by one: a seq past the next one
	// is events lost upstream (CodeDataLoss), one at or before the last
	// decoded a repeat, skipped.
	Contiguous bool
	// MaxBlockBytes bounds the text of one block the decoder keeps to
	// reconcile it with content-block-finish. Default 16 MiB; beyond it the
	// finished block is not reconciled.
	MaxBlockBytes int

	ns      map[string]*nsDec
	order   []*nsDec
	ended   bool
	lastSeq uint64 // Contiguous: the seq of the last event decoded; 0 before the first
	msgErr  *canonical.Error
	msgs    int
	// held is a model-call error that ended a message (the messages
	// channel's error event): it is the run's failure if the next event is
	// the failed lifecycle with it, else a non-terminal error event,
	// emitted before that next event.
	held *canonical.Event
	// early holds the events at or before AfterSeq since the thread's
	// last root terminal lifecycle event (copies of their frames): the
	// run's own first events when the upstream's applied_through_seq
	// counts them (see Feed). earlyOff stops holding (too many, or
	// decided).
	early    [][]byte
	earlyOff bool
	env      wireEnvelope // the frame being decoded
	rd       *frameReader
}

// nsDec is the open message and block of one upstream namespace.
type nsDec struct {
	ns        []string
	msgOpen   bool
	blockOpen bool
	typ       canonical.BlockType
	index     uint32 // canonical index of the open block
	next      uint32
	wire      int64  // upstream index of the open block
	acc       []byte // text, reasoning or arguments so far (for finish)
	accFull   bool   // acc stopped growing at MaxBlockBytes
	data      bool   // data was sent for the open data block
	b64       []byte // base64 characters not yet decodable (fewer than 4)
	jsonBlock bool   // a block type the canonical model lacks, sent whole at finish
	// done holds the blocks of the open message that were closed, by
	// upstream index: a real upstream interleaves (LangGraph starts a
	// tool-call block, then finishes the text block before it), and a late
	// finish of a closed block adds only what its content holds beyond
	// what was streamed, never a second copy.
	done map[int64]doneBlock
}

// doneBlock is a closed block of the open message: its type and the text
// streamed on it (full: too long to keep, not reconciled).
type doneBlock struct {
	typ  canonical.BlockType
	acc  string
	full bool
}

// wireEnvelope is an Event envelope as received, read by its
// UnmarshalJSONFrom token by token (no reflection: most frames are
// deltas). Members are read as the library reads them into a struct of
// these types (a string or null; seq an unsigned integer, timestamp a
// number, or null), a member of another type being an error, and names
// case-sensitive; of repeated names the last wins whole.
type wireEnvelope struct {
	Type string
	Seq  uint64 // noSeq when absent or null
	// PrevSeq is the seq of the thread's frame before this one when it is
	// not Seq-1 (ours: events that made no frame came between); noSeq
	// when absent.
	PrevSeq uint64
	Method  string
	Params  wireParams
}

// noSeq marks an absent seq (no seq of the protocol's, a js-uint, is it).
const noSeq = math.MaxUint64

// wireError is an error frame (ErrorResponse; the gap report's
// min_available_seq is the reference's section 6.2).
type wireError struct {
	Error           string  `json:"error"`
	Message         string  `json:"message"`
	MinAvailableSeq *uint64 `json:"min_available_seq"`
}

type wireParams struct {
	Namespace []string
	Timestamp float64
	Node      string
	Data      frameData
	// The last frame's node and namespace: a frame with the same ones
	// (most) shares their strings instead of copying them again.
	lastNode string
	lastNS   []string
	text     textReader
}

// errMemberType is a member of a type the frame's struct does not take.
var errMemberType = errors.New("agent upstream: a member of another type")

// frameData is params.data: its bytes, a slice of the frame, and the
// members of a content-block-delta, read on the way (one pass over the
// frame, for most of a run's frames).
type frameData struct {
	frame []byte // the frame being read
	raw   json.Value
	// isDelta says data is a content-block-delta with an integer index and
	// a delta object, each member of the type read here.
	isDelta bool
	index   int64
	delta   wireDeltaIn
}

// wireDeltaIn is a delta as received.
type wireDeltaIn struct {
	Type      string
	Text      string
	Reasoning string
	Args      string
	Data      string
}

// reset readies env for frame, keeping the last node and namespace and
// the text buffer.
func (env *wireEnvelope) reset(frame []byte) {
	p := &env.Params
	*env = wireEnvelope{Seq: noSeq, PrevSeq: noSeq, Params: wireParams{lastNode: p.lastNode, lastNS: p.lastNS, text: p.text, Data: frameData{frame: frame}}}
}

// frameReader reads the frames of a Decoder through one JSON decoder.
type frameReader struct {
	buf bytes.Buffer // over the frame being read (the decoder reads it in place)
	dec json.Decoder
}

// errTrailing is a frame with more than one JSON value.
var errTrailing = errors.New("agent upstream: data after the frame's object")

// read reads frame, one JSON object, into env.
func (r *frameReader) read(frame []byte, env *wireEnvelope) error {
	r.buf = *bytes.NewBuffer(frame)
	r.dec.Reset(&r.buf, peerJSON)
	if err := env.UnmarshalJSONFrom(&r.dec); err != nil {
		return err
	}
	if _, err := r.dec.ReadToken(); err != io.EOF {
		return errTrailing
	}
	return nil
}

// release lets go of the frame read.
func (r *frameReader) release() {
	r.buf = bytes.Buffer{}
	r.dec.Reset(&r.buf)
}

// UnmarshalJSONFrom reads the envelope object.
func (env *wireEnvelope) UnmarshalJSONFrom(dec *json.Decoder) error {
	r := &env.Params.text
	r.dec = dec
	defer func() { r.dec = nil }()
	return r.object(false, func() error {
		switch string(r.buf) {
		case "type":
			err := r.mustString()
			if string(r.buf) == "event" {
				env.Type = "event"
			} else {
				env.Type = string(r.buf)
			}
			return err
		case "seq":
			var err error
			env.Seq, err = readUint(dec)
			return err
		case "prev_seq":
			var err error
			env.PrevSeq, err = readUint(dec)
			return err
		case "method":
			err := r.mustString()
			env.Method = internMethod(r.buf)
			return err
		case "params":
			return env.Params.read(r)
		}
		return dec.SkipValue()
	})
}

// read reads params (null: none), replacing what an earlier params
// member of the frame held.
func (p *wireParams) read(r *textReader) error {
	p.Namespace, p.Timestamp, p.Node = nil, 0, ""
	p.Data = frameData{frame: p.Data.frame}
	return r.object(true, func() error {
		switch string(r.buf) {
		case "namespace":
			return p.readNamespace(r)
		case "timestamp":
			var err error
			p.Timestamp, err = readFloat(r.dec)
			return err
		case "node":
			err := r.mustString()
			if string(r.buf) != p.lastNode {
				p.lastNode = string(r.buf)
			}
			p.Node = p.lastNode
			return err
		case "data":
			return p.Data.read(r)
		}
		return r.dec.SkipValue()
	})
}

// readNamespace reads the namespace (null: none). Strings equal to the
// last frame's are its strings.
func (p *wireParams) readNamespace(r *textReader) error {
	dec := r.dec
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		p.Namespace = nil
		return err
	}
	if dec.PeekKind() != '[' {
		return errMemberType
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	last := p.lastNS
	var ns []string // nil while the elements are last's
	same := 0
	for dec.PeekKind() != ']' {
		if err := r.mustString(); err != nil {
			return err
		}
		if ns == nil && same < len(last) && string(r.buf) == last[same] {
			same++
			continue
		}
		if ns == nil {
			ns = append(make([]string, 0, same+1), last[:same]...)
		}
		ns = append(ns, string(r.buf))
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	switch {
	case ns != nil:
		p.lastNS = ns
	case same == len(last):
		ns = last
	default:
		ns = last[:same:same]
	}
	p.Namespace = ns
	return nil
}

// read reads data. Its bytes are the frame's from the decoder's offset
// before the value to the one after (the colon and whitespace between
// the name and the value trimmed).
func (f *frameData) read(r *textReader) error {
	dec := r.dec
	start := dec.InputOffset()
	f.isDelta, f.index, f.delta = false, 0, wireDeltaIn{}
	var err error
	if dec.PeekKind() == '{' {
		err = f.readDelta(r)
	} else {
		err = dec.SkipValue()
	}
	end := dec.InputOffset()
	f.raw = nil
	if err == nil && 0 <= start && start <= end && end <= int64(len(f.frame)) {
		f.raw = bytes.TrimLeft(f.frame[start:end], " \t\r\n:")
	}
	return err
}

// readDelta reads data's members as a content-block-delta's. A member of
// another type makes it not one (isDelta false), not an error: the
// general path reads it.
func (f *frameData) readDelta(r *textReader) error {
	event, index, delta, typed := false, false, false, true
	err := r.object(false, func() error {
		var ok bool
		var err error
		switch string(r.buf) {
		case "event":
			ok, err = r.string()
			event = ok && string(r.buf) == "content-block-delta"
		case "index":
			f.index, ok, err = peerInt(r.dec)
			index = ok
		case "delta":
			f.delta = wireDeltaIn{}
			if delta = r.dec.PeekKind() == '{'; !delta {
				return r.dec.SkipValue()
			}
			ok, err = f.delta.read(r)
		default:
			return r.dec.SkipValue()
		}
		typed = typed && ok
		return err
	})
	f.isDelta = err == nil && event && index && delta && typed
	return err
}

// read reads a delta object's members; ok is false when one is not a
// string (or null).
func (d *wireDeltaIn) read(r *textReader) (ok bool, err error) {
	ok = true
	err = r.object(false, func() error {
		var field *string
		switch string(r.buf) {
		case "type":
			isString, err := r.string()
			d.Type, ok = internDeltaType(r.buf), ok && isString
			return err
		case "text":
			field = &d.Text
		case "reasoning":
			field = &d.Reasoning
		case "args":
			field = &d.Args
		case "data":
			field = &d.Data
		default:
			return r.dec.SkipValue()
		}
		isString, err := r.string()
		*field, ok = string(r.buf), ok && isString
		return err
	})
	return ok, err
}

// textReader reads a frame's objects and strings. buf holds the text of
// the last name or string read; it is reused frame to frame.
type textReader struct {
	dec *json.Decoder
	buf []byte
}

// object reads an object, calling member for each member with its name
// in buf to read the value; null is an empty object when nullOK, any
// other value an error.
func (r *textReader) object(nullOK bool, member func() error) error {
	dec := r.dec
	switch dec.PeekKind() {
	case 'n':
		if nullOK {
			_, err := dec.ReadToken()
			return err
		}
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		for dec.PeekKind() != '}' {
			if err := r.mustString(); err != nil {
				return err
			}
			if err := member(); err != nil {
				return err
			}
		}
		_, err := dec.ReadToken()
		return err
	}
	if err := dec.SkipValue(); err != nil {
		return err
	}
	return errMemberType
}

// string reads a string into buf (null: ""); ok is false, the value
// read past, for any other kind. Invalid UTF-8 reads as U+FFFD
// (peerJSON).
func (r *textReader) string() (ok bool, err error) {
	r.buf = r.buf[:0]
	v, err := r.dec.ReadValue()
	switch {
	case err != nil:
		return false, err
	case v.Kind() == '"':
		r.buf, _ = json.AppendUnquote(r.buf, v) // the decoder checked v: the only error is invalid UTF-8
		return true, nil
	}
	return v.Kind() == 'n', nil
}

// mustString is string where another kind is an error.
func (r *textReader) mustString() error {
	ok, err := r.string()
	if err == nil && !ok {
		err = errMemberType
	}
	return err
}

// peerInt reads an integer in int64's range; ok is false, the value
// skipped, for anything else (null included).
func peerInt(dec *json.Decoder) (n int64, ok bool, err error) {
	if dec.PeekKind() != '0' {
		return 0, false, dec.SkipValue()
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return 0, false, err
	}
	n, nerr := tok.Int()
	return n, nerr == nil, nil
}

// readUint reads an unsigned integer; null is noSeq, anything else an
// error.
func readUint(dec *json.Decoder) (uint64, error) {
	tok, err := dec.ReadToken()
	switch {
	case err != nil:
		return noSeq, err
	case tok.Kind() == 'n':
		return noSeq, nil
	case tok.Kind() != '0':
		return noSeq, errMemberType
	}
	return tok.Uint()
}

// readFloat reads a number in float64's range; null is 0, anything else
// an error.
func readFloat(dec *json.Decoder) (float64, error) {
	tok, err := dec.ReadToken()
	switch {
	case err != nil:
		return 0, err
	case tok.Kind() == 'n':
		return 0, nil
	case tok.Kind() != '0':
		return 0, errMemberType
	}
	if n, err := tok.Int(); err == nil { // a timestamp in ms: the same float64, without parsing one
		return float64(n), nil
	}
	return tok.Float()
}

// internMethod is m, without a copy for the methods this version reads.
func internMethod(m []byte) string {
	for _, known := range [...]string{methodMessages, methodValues, methodUpdates, methodTools, methodLifecycle,
		methodInputRequested, methodInputAnswered, methodCheckpoints, methodTasks, methodCustom} {
		if string(m) == known {
			return known
		}
	}
	return string(m)
}

// internDeltaType is t, without a copy for the delta types of fastDelta.
func internDeltaType(t []byte) string {
	for _, known := range [...]string{"text-delta", "reasoning-delta", "tool-call-delta", "data-delta"} {
		if string(t) == known {
			return known
		}
	}
	return string(t)
}

// Ended reports whether the run's terminal event has been decoded.
func (d *Decoder) Ended() bool { return d.ended }

func (d *Decoder) state(ns []string) *nsDec {
	k := nsKey(ns)
	s := d.ns[k]
	if s == nil {
		if d.ns == nil {
			d.ns = map[string]*nsDec{}
		}
		s = &nsDec{ns: ns, wire: -1}
		d.ns[k] = s
		d.order = append(d.order, s)
	}
	return s
}

func (d *Decoder) maxBlock() int {
	if d.MaxBlockBytes <= 0 {
		return 16 << 20
	}
	return d.MaxBlockBytes
}

// Feed decodes one frame and appends the canonical events it completes.
func (d *Decoder) Feed(frame []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	n := len(out)
	out, err := d.feed(frame, out)
	if d.held != nil {
		out = d.release(out, n)
	}
	return out, err
}

// release decides the held error at the first event from out[n] on that
// does not close a message or block: dropped if it is the run ending with
// that error (failed, or cancelled: the terminal event carries it), else
// put before it.
func (d *Decoder) release(out []*canonical.Event, n int) []*canonical.Event {
	i := n
	for i < len(out) && (out[i] == d.held || out[i].GetMessageFinish() != nil || out[i].GetBlockFinish() != nil) {
		i++
	}
	if i == len(out) {
		return out // nothing yet decides
	}
	held := d.held
	d.held = nil
	if onlyFinish(held) {
		return out // no error beyond the message's finish reason
	}
	if _, ok := canonical.TerminalOf(out[i]); ok {
		if e := out[i].GetLifecycle().GetError(); e.GetCode() == held.GetError().GetCode() && e.GetMessage() == held.GetError().GetMessage() {
			return out
		}
	}
	out = append(out, nil)
	copy(out[i+1:], out[i:])
	out[i] = held
	return out
}

// onlyFinish reports a held error that says no more than its message's
// finish reason (see msgModelCallFailed).
func onlyFinish(ev *canonical.Event) bool {
	e := ev.GetError()
	return canonical.Code(e.GetCode()) == canonical.CodeUnknown && e.GetMessage() == msgModelCallFailed
}

func (d *Decoder) feed(frame []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	frame = bytes.TrimSpace(frame)
	if len(frame) == 0 || frame[0] != '{' {
		return out, canonical.Errorf(canonical.CodeInvalidArgument, "agent upstream: a frame is not a JSON object: %.80q", frame)
	}
	return d.feedJSON(frame, out)
}

// wanted reports whether an event with seq is the run's next to decode:
// checkSeq decides an event by its seq: skip it (the replay of what came
// before the run, or a repeat), or fail the run when events between the
// last one decoded and it never came: unless the frame says the seq
// before it is the last decoded (prev, noSeq when it says nothing).
func (d *Decoder) checkSeq(seq, prev uint64) (skip bool, err error) {
	if seq <= d.floor() {
		return true, nil
	}
	if d.Contiguous && d.lastSeq != 0 && seq != d.lastSeq+1 && prev != d.lastSeq {
		return true, canonical.Errorf(canonical.CodeDataLoss, "agent upstream: event %d came after event %d: the events between were lost", seq, d.lastSeq)
	}
	return false, nil
}

// floor is the seq at or before which events are skipped.
func (d *Decoder) floor() uint64 { return max(d.AfterSeq, d.lastSeq) }

// decoded records the seq of an event decoded.
func (d *Decoder) decoded(seq uint64, has bool) {
	if has && d.Contiguous {
		d.lastSeq = seq
	}
}

// notEvent decides a frame of type typ that is not an event (see
// Decoder): nil for a command's answer and for a gap that lost none of
// the run's events, else the run's failure.
func (d *Decoder) notEvent(frame []byte, typ string) error {
	switch typ {
	case "success":
		return nil
	case "error":
	default:
		return canonical.Errorf(canonical.CodeInvalidArgument, "agent upstream: a frame of type %.40q is neither an event, a command's answer nor an error", typ)
	}
	var e wireError
	gap := false
	if json.Unmarshal(frame, &e, peerJSON) != nil { // a member of another type: read the strings, and a gap's extent is unknown
		var probe map[string]json.Value
		_ = json.Unmarshal(frame, &probe, peerJSON)
		e = wireError{Error: jstr(probe["error"]), Message: jstr(probe["message"])}
		_, gap = probe["min_available_seq"]
	}
	msg := cmp.Or(e.Message, e.Error, "no message")
	if gap || e.MinAvailableSeq != nil || e.Error == errResumeGap {
		floor := d.floor()
		if e.MinAvailableSeq != nil && *e.MinAvailableSeq <= floor+1 {
			return nil // it missed events the run does not read
		}
		oldest := "unknown"
		if e.MinAvailableSeq != nil {
			oldest = strconv.FormatUint(*e.MinAvailableSeq, 10)
		}
		return canonical.Errorf(canonical.CodeDataLoss, "agent upstream lost the run's events after seq %d (its oldest buffered: %s): %.200s", floor, oldest, msg)
	}
	return canonical.WireError(canonicalCode(e.Error), fmt.Sprintf("agent upstream: %s: %.200s", cmp.Or(e.Error, "error"), msg))
}

// feedJSON decodes a frame.
func (d *Decoder) feedJSON(frame []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	env := &d.env
	env.reset(frame)
	if d.rd == nil {
		d.rd = new(frameReader)
	}
	err := d.rd.read(frame, env)
	defer func() { // keep no part of the frame
		env.Params.Data = frameData{}
		d.rd.release()
	}()
	if err != nil {
		var probe map[string]json.Value
		if json.Unmarshal(frame, &probe, peerJSON) != nil {
			return out, canonical.Errorf(canonical.CodeInvalidArgument, "agent upstream: a frame is not a JSON object: %.80q", frame)
		}
		if d.ended {
			return out, nil
		}
		if typ := jstr(probe["type"]); typ != "event" {
			return out, d.notEvent(frame, typ) // an answer or error whose fields are not the types we read
		}
		return out, canonical.Errorf(canonical.CodeInvalidArgument, "agent upstream: event %s: params is not an object with namespace, timestamp and data", jstr(probe["method"]))
	}
	if env.Type != "event" {
		if d.ended {
			return out, nil
		}
		return out, d.notEvent(frame, env.Type)
	}
	if !d.earlyOff && env.Seq != noSeq && !d.ended {
		if env.Seq <= d.AfterSeq {
			d.holdEarly(frame, env)
			if env.Seq < d.AfterSeq {
				return out, nil
			}
			return d.releaseEarly(out) // every event up to AfterSeq has come
		}
		var err error
		if out, err = d.releaseEarly(out); err != nil || d.ended {
			return out, err
		}
		env.reset(frame) // releaseEarly read other frames through env
		if err := d.rd.read(frame, env); err != nil {
			return out, err
		}
	}
	return d.feedEvent(env, nil, out)
}

// maxEarly bounds the events held at or before AfterSeq.
const maxEarly = 1024

// holdEarly holds an event at or before AfterSeq: a root terminal
// lifecycle event ends the runs before this one, so what was held is
// dropped with it.
func (d *Decoder) holdEarly(frame []byte, env *wireEnvelope) {
	if env.Method == methodLifecycle && len(env.Params.Namespace) == 0 {
		var lc struct {
			Event string `json:"event"`
		}
		_ = json.Unmarshal(env.Params.Data.raw, &lc, peerJSON)
		switch lc.Event {
		case "completed", "failed", "interrupted":
			clear(d.early)
			d.early = d.early[:0]
			return
		case "running", "started":
			if len(d.early) == 0 {
				d.early = append(d.early, bytes.Clone(frame))
			}
			return
		}
	}
	if len(d.early) == 0 {
		return // the run's events begin with its root lifecycle
	}
	if len(d.early) == maxEarly {
		d.earlyOff, d.early = true, nil
		return
	}
	d.early = append(d.early, bytes.Clone(frame))
}

// releaseEarly decodes the held events, once: those after the thread's
// last root terminal event at or before AfterSeq, from a root running or
// started lifecycle event on. An upstream whose applied_through_seq counts
// the run's first events (LangGraph's answers run.start after the run's
// root running event, and its first events when they came meanwhile) has
// sent them before the seq it named; an upstream that names the seq
// before the command's effect (ours) has none there, the last root event
// before it being the previous run's terminal one.
func (d *Decoder) releaseEarly(out []*canonical.Event) ([]*canonical.Event, error) {
	early := d.early
	d.earlyOff, d.early = true, nil
	if len(early) == 0 {
		return out, nil
	}
	after := d.AfterSeq
	d.AfterSeq = 0
	defer func() { d.AfterSeq = after }()
	for _, f := range early {
		var err error
		if out, err = d.feedJSON(f, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// feedEvent decodes an event frame from its envelope; data, an object's
// members, is decoded here when nil. It keeps no part of env.Params.Data.
func (d *Decoder) feedEvent(env *wireEnvelope, data map[string]json.Value, out []*canonical.Event) ([]*canonical.Event, error) {
	if d.ended {
		return out, nil
	}
	if env.Seq != noSeq {
		if skip, err := d.checkSeq(env.Seq, env.PrevSeq); skip {
			return out, err
		}
		d.decoded(env.Seq, true)
	}
	p := env.Params
	raw := p.Data.raw
	if p.Namespace == nil {
		p.Namespace = []string{}
	}
	base := canonical.Event{Namespace: p.Namespace, GraphNode: p.Node}
	if ts := p.Timestamp; ts > 0 && ts < 1e14 {
		base.TimeUnixNano = int64(ts) * 1e6
	}
	if env.Method == methodMessages {
		if done, o := d.fastDelta(&base, &p.Data, out); done {
			return o, nil
		}
	}
	switch env.Method {
	case methodValues, methodTasks: // any JSON
	default:
		if data == nil && json.Unmarshal(raw, &data, peerJSON) != nil {
			return out, canonical.Errorf(canonical.CodeInvalidArgument, "agent upstream: %s event: data is not an object", env.Method)
		}
	}
	switch env.Method {
	case methodMessages:
		return d.messages(&base, data, out), nil
	case methodTools:
		return d.tools(&base, data, out), nil
	case methodLifecycle:
		return d.lifecycle(&base, data, out), nil
	case methodInputRequested:
		return d.emit(out, &base, &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{
			InterruptId: jstr(data["interrupt_id"]), Payload: rawValue(data["payload"])}}), nil
	case methodInputAnswered:
		var ids []string
		_ = json.Unmarshal(data["interrupt_ids"], &ids, peerJSON)
		return d.emit(out, &base, &canonical.KindInputAnswered{InputAnswered: &canonical.InputAnswered{InterruptIds: ids}}), nil
	case methodValues:
		return d.emit(out, &base, &canonical.KindStateSnapshot{StateSnapshot: &canonical.StateSnapshot{Values: rawValue(raw)}}), nil
	case methodUpdates:
		return d.emit(out, &base, &canonical.KindStateUpdate{StateUpdate: decodeUpdate(p.Node, raw, data)}), nil
	case methodCheckpoints:
		step, _ := strconv.ParseInt(string(bytes.TrimSpace(data["step"])), 10, 64)
		return d.emit(out, &base, &canonical.KindCheckpoint{Checkpoint: &canonical.Checkpoint{
			Id: jstr(data["id"]), ParentId: jstr(data["parent_id"]), Step: step, Source: jstr(data["source"])}}), nil
	case methodTasks:
		return d.emit(out, &base, &canonical.KindTask{Task: &canonical.Task{Payload: rawValue(raw)}}), nil
	case methodCustom:
		name := jstr(data["name"])
		if name == errorCustomName {
			var pl struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(data["payload"], &pl, peerJSON)
			return d.emit(out, &base, &canonical.KindError{Error: errorProto(pl.Code, pl.Message, "upstream error")}), nil
		}
		return d.emit(out, &base, &canonical.KindCustom{Custom: &canonical.Custom{Name: name, Payload: rawValue(data["payload"])}}), nil
	}
	return out, nil // an event this version does not know: ignored
}

// decodeUpdate reads an updates event. The protocol's form is data
// {node?, values}; LangGraph's is the node's update itself as data (e.g.
// {"messages": [...]}) with the node in params.node. Data with members
// other than node and values, or without values, is the update whole.
func decodeUpdate(paramsNode string, raw json.Value, data map[string]json.Value) *canonical.StateUpdate {
	_, hasValues := data["values"]
	_, hasNode := data["node"]
	if hasValues && len(data) == 1+btoi(hasNode) {
		return &canonical.StateUpdate{Node: cmp.Or(jstr(data["node"]), paramsNode), Values: rawValue(data["values"])}
	}
	return &canonical.StateUpdate{Node: paramsNode, Values: rawValue(raw)}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// End appends what the run still owes when the upstream stream ends: the
// finishes of open blocks and messages, and a failed terminal event unless
// the run ended.
func (d *Decoder) End(out []*canonical.Event) []*canonical.Event {
	if d.ended {
		return out
	}
	if d.held != nil { // the stream ended after it: it did happen
		if !onlyFinish(d.held) {
			out = append(out, d.held)
		}
		d.held = nil
	}
	return d.terminal(&canonical.Event{Namespace: []string{}}, canonical.StatusFailed,
		canonical.Errorf(canonical.CodeUnavailable, "agent upstream: the event stream ended before the run's terminal lifecycle event"), "", out)
}

func (d *Decoder) emit(out []*canonical.Event, base *canonical.Event, kind any) []*canonical.Event {
	e := &canonical.Event{Namespace: base.Namespace, GraphNode: base.GraphNode, TimeUnixNano: base.TimeUnixNano}
	canonical.SetKind(e, kind)
	return append(out, e)
}

// jstr is the string raw holds ("" for null or anything but a string).
func jstr(raw json.Value) string {
	var s string
	_ = json.Unmarshal(raw, &s, peerJSON)
	return s
}

// errorProto is a canonical error from an upstream code string (a
// canonical code name, else the protocol's ErrorCode) and message.
func errorProto(code, msg, def string) *canonical.ErrorProto {
	c, ok := canonical.ParseCode(code)
	if !ok || c == canonical.CodeOK {
		c = canonicalCode(code)
	}
	if msg == "" {
		msg = def
	}
	return &canonical.ErrorProto{Code: uint32(c), Message: msg}
}

// closeBlock finishes the open block of s.
func (d *Decoder) closeBlock(out []*canonical.Event, base *canonical.Event, s *nsDec) []*canonical.Event {
	if !s.blockOpen {
		return out
	}
	out = d.flushB64(out, base, s, true)
	s.blockOpen = false
	if s.wire >= 0 {
		if s.done == nil {
			s.done = map[int64]doneBlock{}
		}
		s.done[s.wire] = doneBlock{typ: s.typ, acc: string(s.acc), full: s.accFull || s.jsonBlock}
	}
	return d.emit(out, base, &canonical.KindBlockFinish{BlockFinish: &canonical.BlockFinish{Index: s.index}})
}

// closeMessage finishes the open block and message of s.
func (d *Decoder) closeMessage(out []*canonical.Event, base *canonical.Event, s *nsDec, reason canonical.FinishReason, usage *canonical.Usage) []*canonical.Event {
	out = d.closeBlock(out, base, s)
	if !s.msgOpen {
		return out
	}
	s.msgOpen = false
	clear(s.done)
	return d.emit(out, base, &canonical.KindMessageFinish{MessageFinish: &canonical.MessageFinish{FinishReason: reason, Usage: usage}})
}

// ensureMessage opens a message if none is open (an upstream that streams
// blocks without message-start, which the SDK tolerates too).
func (d *Decoder) ensureMessage(out []*canonical.Event, base *canonical.Event, s *nsDec) []*canonical.Event {
	if s.msgOpen {
		return out
	}
	d.msgs++
	s.msgOpen, s.next = true, 0
	return d.emit(out, base, &canonical.KindMessageStart{MessageStart: &canonical.MessageStart{MessageId: "upstream-msg-" + strconv.Itoa(d.msgs), Role: "assistant"}})
}

// openBlock closes the open block and opens one of typ for upstream index
// wire.
func (d *Decoder) openBlock(out []*canonical.Event, base *canonical.Event, s *nsDec, wire int64, bs *canonical.BlockStart) []*canonical.Event {
	out = d.closeBlock(out, base, s)
	out = d.ensureMessage(out, base, s)
	bs.Index = s.next
	s.blockOpen, s.typ, s.index, s.wire, s.next = true, bs.GetType(), s.next, wire, s.next+1
	s.acc, s.accFull, s.data, s.b64, s.jsonBlock = s.acc[:0], false, false, s.b64[:0], false
	return d.emit(out, base, &canonical.KindBlockStart{BlockStart: bs})
}

// appendText emits a text delta on the open text, reasoning or tool block.
func (d *Decoder) appendText(out []*canonical.Event, base *canonical.Event, s *nsDec, text string) []*canonical.Event {
	if text == "" || !s.blockOpen || s.typ == canonical.BlockData || s.typ == canonical.BlockRef || s.jsonBlock {
		return out
	}
	if !s.accFull {
		if len(s.acc)+len(text) > d.maxBlock() {
			s.accFull = true
		} else {
			s.acc = append(s.acc, text...)
		}
	}
	e := canonical.NewTextDelta(s.index, text)
	e.Namespace, e.GraphNode, e.TimeUnixNano = base.Namespace, base.GraphNode, base.TimeUnixNano
	return append(out, e)
}

// appendB64 emits the decodable part of base64 data on the open data block.
func (d *Decoder) appendB64(out []*canonical.Event, base *canonical.Event, s *nsDec, chars string) []*canonical.Event {
	if chars == "" || !s.blockOpen || s.typ != canonical.BlockData || s.jsonBlock {
		return out
	}
	if len(s.b64)+len(chars) > d.maxBlock() {
		return out
	}
	s.b64 = append(s.b64, chars...)
	return d.flushB64(out, base, s, false)
}

// flushB64 decodes whole 4-character groups (all of it, padded, at the end).
func (d *Decoder) flushB64(out []*canonical.Event, base *canonical.Event, s *nsDec, final bool) []*canonical.Event {
	if len(s.b64) == 0 || s.typ != canonical.BlockData {
		return out
	}
	n := len(s.b64) - len(s.b64)%4
	if final {
		n = len(s.b64)
	}
	if n == 0 {
		return out
	}
	src := bytes.TrimRight(s.b64[:n], "=")
	raw, err := base64.RawStdEncoding.DecodeString(string(src))
	if err != nil {
		raw, err = base64.RawURLEncoding.DecodeString(string(src))
	}
	s.b64 = append(s.b64[:0], s.b64[n:]...)
	if err != nil || len(raw) == 0 {
		return out
	}
	s.data = true
	return d.emit(out, base, &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Index: s.index, Data: raw}})
}

// blockStart maps a content block's initial state to a canonical block.
func blockStart(content map[string]json.Value) (bs *canonical.BlockStart, jsonBlock bool) {
	typ := jstr(content["type"])
	id := jstr(content["id"])
	switch typ {
	case "text":
		return &canonical.BlockStart{Type: canonical.BlockText, Id: id}, false
	case "reasoning":
		return &canonical.BlockStart{Type: canonical.BlockReasoning, Id: id}, false
	case "tool_call_chunk", "tool_call", "server_tool_call_chunk", "server_tool_call", "invalid_tool_call":
		return &canonical.BlockStart{Type: canonical.BlockToolCall, Id: id, Name: jstr(content["name"]), Mime: "application/json"}, false
	case "image", "audio", "video", "file":
		mime := jstr(content["mime_type"])
		if mime == "" && typ != "file" {
			mime = typ + "/*"
		}
		if url := jstr(content["url"]); url != "" && jstr(content["base64"]) == "" {
			return &canonical.BlockStart{Type: canonical.BlockRef, Id: id, Mime: mime, Ref: url}, false
		}
		if mime == "" {
			mime = "application/octet-stream"
		}
		return &canonical.BlockStart{Type: canonical.BlockData, Id: id, Mime: mime}, false
	}
	// non_standard, server_tool_result and types this version does not
	// know: a data block holding the finished block as JSON.
	return &canonical.BlockStart{Type: canonical.BlockData, Id: id, Mime: "application/json"}, true
}

// initialText is the text a block's content carries beyond its type.
func initialText(content map[string]json.Value, typ canonical.BlockType) string {
	switch typ {
	case canonical.BlockText:
		return jstr(content["text"])
	case canonical.BlockReasoning:
		return jstr(content["reasoning"])
	case canonical.BlockToolCall:
		raw := bytes.TrimSpace(content["args"])
		if len(raw) > 0 && raw[0] == '{' {
			if c := compact(raw); c != nil {
				return string(c)
			}
		}
		return jstr(raw)
	}
	return ""
}

func (d *Decoder) messages(base *canonical.Event, data map[string]json.Value, out []*canonical.Event) []*canonical.Event {
	s := d.state(base.Namespace)
	idx := int64(-1)
	if raw, ok := data["index"]; ok {
		if v, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64); err == nil && v >= 0 {
			idx = v
		}
	}
	switch jstr(data["event"]) {
	case "message-start":
		out = d.closeMessage(out, base, s, 0, nil)
		ms := &canonical.MessageStart{MessageId: jstr(data["id"]), Role: canonicalMsgRole(jstr(data["role"]))}
		if ms.MessageId == "" {
			d.msgs++
			ms.MessageId = "upstream-msg-" + strconv.Itoa(d.msgs)
		}
		var md map[string]json.Value
		if json.Unmarshal(data["metadata"], &md, peerJSON) == nil && len(md) > 0 {
			ms.Metadata = map[string]*structpb.Value{}
			for k, v := range md {
				if pv := rawValue(v); pv != nil && isScalar(pv) {
					ms.Metadata[k] = pv
				}
			}
		}
		s.msgOpen, s.next = true, 0
		out = d.emit(out, base, &canonical.KindMessageStart{MessageStart: ms})
		if r := jstr(data["run_id"]); r != "" { // LangGraph's, on each of the message's events
			out[len(out)-1].Extensions = map[string]*structpb.Value{runIDExt: structpb.NewStringValue(r)}
		}
		return out
	case "content-block-start":
		var content map[string]json.Value
		_ = json.Unmarshal(data["content"], &content, peerJSON)
		bs, jb := blockStart(content)
		out = d.openBlock(out, base, s, idx, bs)
		s.jsonBlock = jb
		if bs.GetType() == canonical.BlockData && !jb {
			return d.appendB64(out, base, s, jstr(content["base64"]))
		}
		return d.appendText(out, base, s, initialText(content, bs.GetType()))
	case "content-block-delta":
		return d.delta(base, s, idx, data, out)
	case "content-block-finish":
		var content map[string]json.Value
		_ = json.Unmarshal(data["content"], &content, peerJSON)
		if db, ok := s.done[idx]; ok && (!s.blockOpen || s.wire != idx) {
			return d.lateFinish(base, s, idx, db, content, out)
		}
		if !s.blockOpen || s.wire != idx {
			bs, jb := blockStart(content)
			out = d.openBlock(out, base, s, idx, bs)
			s.jsonBlock = jb
		}
		out = d.reconcile(base, s, content, data["content"], out)
		return d.closeBlock(out, base, s)
	case "message-finish":
		if !s.msgOpen {
			return out
		}
		return d.closeMessage(out, base, s, canonicalReason(jstr(data["reason"])), canonicalUsage(data["usage"]))
	case "error":
		ep := errorProto(jstr(data["code"]), jstr(data["message"]), msgModelCallFailed)
		d.msgErr = canonical.FromProto(ep)
		if !s.msgOpen {
			return d.emit(out, base, &canonical.KindError{Error: ep})
		}
		out = d.closeMessage(out, base, s, canonical.FinishError, nil)
		d.held = d.emit(nil, base, &canonical.KindError{Error: ep})[0]
		return out
	}
	return out
}

// lateFinish applies the finish of block idx, closed before (another
// block started first): what its content holds beyond the text streamed
// on it goes in a block of its own; the block open now stays open.
func (d *Decoder) lateFinish(base *canonical.Event, s *nsDec, idx int64, db doneBlock, content map[string]json.Value, out []*canonical.Event) []*canonical.Event {
	delete(s.done, idx) // a second finish of it opens a block, as one never started does
	if db.full || (db.typ == canonical.BlockToolCall && db.acc != "") {
		return out // streamed arguments stand, as in reconcile
	}
	final := initialText(content, db.typ)
	rest, ok := strings.CutPrefix(final, db.acc)
	if !ok || rest == "" || (db.typ != canonical.BlockText && db.typ != canonical.BlockReasoning && db.typ != canonical.BlockToolCall) {
		return out
	}
	bs, _ := blockStart(content)
	bs.Type = db.typ
	out = d.openBlock(out, base, s, idx, bs)
	out = d.appendText(out, base, s, rest)
	out = d.closeBlock(out, base, s)
	delete(s.done, idx)
	return out
}

// fastDelta decodes a text, reasoning, tool-call or data delta on the open
// block of its index from the typed members read with the frame; done is
// false for anything else, which the general path then decodes.
func (d *Decoder) fastDelta(base *canonical.Event, data *frameData, out []*canonical.Event) (bool, []*canonical.Event) {
	if !data.isDelta {
		return false, out
	}
	s := d.state(base.Namespace)
	if !s.blockOpen || s.wire != data.index || s.jsonBlock {
		return false, out
	}
	// A member of the delta absent reads as "": as the general path reads
	// it, for a delta of the open block.
	switch dl := &data.delta; {
	case dl.Type == "text-delta" && s.typ == canonical.BlockText:
		return true, d.appendText(out, base, s, dl.Text)
	case dl.Type == "reasoning-delta" && s.typ == canonical.BlockReasoning:
		return true, d.appendText(out, base, s, dl.Reasoning)
	case dl.Type == "tool-call-delta" && s.typ == canonical.BlockToolCall:
		return true, d.appendText(out, base, s, dl.Args)
	case dl.Type == "data-delta" && s.typ == canonical.BlockData:
		return true, d.appendB64(out, base, s, dl.Data)
	}
	return false, out
}

// delta applies a content-block-delta.
func (d *Decoder) delta(base *canonical.Event, s *nsDec, idx int64, data map[string]json.Value, out []*canonical.Event) []*canonical.Event {
	var delta map[string]json.Value
	legacy := false
	if json.Unmarshal(data["delta"], &delta, peerJSON) != nil || delta == nil {
		// The SDK's legacy form: a partial block in content, appended.
		if json.Unmarshal(data["content"], &delta, peerJSON) != nil || delta == nil {
			return out
		}
		legacy = true
	}
	dt := jstr(delta["type"])
	want := canonical.BlockType(0)
	switch dt {
	case "text-delta", "text":
		want = canonical.BlockText
	case "reasoning-delta", "reasoning":
		want = canonical.BlockReasoning
	case "tool-call-delta", "tool_call_chunk", "server_tool_call_chunk":
		want = canonical.BlockToolCall
	case "data-delta":
		want = canonical.BlockData
	case "block-delta":
		var fields map[string]json.Value
		_ = json.Unmarshal(delta["fields"], &fields, peerJSON)
		return d.blockDelta(base, s, idx, fields, out)
	default:
		if !legacy {
			return out // a delta this version does not know: ignored
		}
	}
	if !s.blockOpen || (idx >= 0 && s.wire != idx) || (want != 0 && s.typ != want && !s.jsonBlock) {
		if want == 0 {
			return out
		}
		bs := &canonical.BlockStart{Type: want}
		if want == canonical.BlockToolCall {
			bs.Id, bs.Name, bs.Mime = jstr(delta["id"]), jstr(delta["name"]), "application/json"
		}
		if want == canonical.BlockData {
			bs.Mime = "application/octet-stream"
		}
		out = d.openBlock(out, base, s, idx, bs)
	}
	switch dt {
	case "text-delta", "text":
		return d.appendText(out, base, s, jstr(delta["text"]))
	case "reasoning-delta", "reasoning":
		return d.appendText(out, base, s, jstr(delta["reasoning"]))
	case "tool-call-delta", "tool_call_chunk", "server_tool_call_chunk":
		return d.appendText(out, base, s, jstr(delta["args"]))
	case "data-delta":
		return d.appendB64(out, base, s, jstr(delta["data"]))
	}
	return out
}

// blockDelta applies block-delta fields: they replace what they name, so
// only a value that extends what was sent can be streamed on; others wait
// for content-block-finish.
func (d *Decoder) blockDelta(base *canonical.Event, s *nsDec, idx int64, fields map[string]json.Value, out []*canonical.Event) []*canonical.Event {
	if fields == nil {
		return out
	}
	if !s.blockOpen || (idx >= 0 && s.wire != idx) {
		bs, jb := blockStart(fields)
		out = d.openBlock(out, base, s, idx, bs)
		s.jsonBlock = jb
	}
	var text string
	switch s.typ {
	case canonical.BlockText:
		text = jstr(fields["text"])
	case canonical.BlockReasoning:
		text = jstr(fields["reasoning"])
	case canonical.BlockToolCall:
		text = initialText(fields, canonical.BlockToolCall)
	default:
		return out
	}
	if !s.accFull && strings.HasPrefix(text, string(s.acc)) {
		return d.appendText(out, base, s, text[len(s.acc):])
	}
	return out
}

// reconcile sends what the finished block holds beyond what was streamed.
func (d *Decoder) reconcile(base *canonical.Event, s *nsDec, content map[string]json.Value, raw json.Value, out []*canonical.Event) []*canonical.Event {
	if s.jsonBlock {
		if c := compact(raw); len(c) > 0 && len(c) <= d.maxBlock() {
			s.data = true
			out = d.emit(out, base, &canonical.KindBlockDelta{BlockDelta: &canonical.BlockDelta{Index: s.index, Data: c}})
		}
		return out
	}
	switch s.typ {
	case canonical.BlockData:
		out = d.flushB64(out, base, s, true)
		if !s.data {
			out = d.appendB64(out, base, s, jstr(content["base64"]))
			out = d.flushB64(out, base, s, true)
		}
		return out
	case canonical.BlockRef:
		return out
	}
	final := initialText(content, s.typ)
	if s.typ == canonical.BlockToolCall && len(s.acc) > 0 {
		return out // streamed arguments stand; the finished block parses them
	}
	if !s.accFull && strings.HasPrefix(final, string(s.acc)) {
		return d.appendText(out, base, s, final[len(s.acc):])
	}
	return out
}

// compact is a copy of the JSON value raw without its whitespace; nil when
// raw is not JSON.
func compact(raw json.Value) []byte {
	c := raw.Clone()
	if c.Compact(peerJSON) != nil {
		return nil
	}
	return c
}

func canonicalMsgRole(r string) string {
	switch r {
	case "ai":
		return "assistant"
	case "human":
		return "user"
	case "":
		return "assistant"
	}
	return r
}

func canonicalReason(r string) canonical.FinishReason {
	switch r {
	case "":
		return 0
	case "stop", "end_turn", "stop_sequence":
		return canonical.FinishStop
	case "length", "max_tokens":
		return canonical.FinishLength
	case "tool_calls", "tool_use":
		return canonical.FinishToolCalls
	case "content_filter":
		return canonical.FinishContentFilter
	}
	return canonical.FinishOther
}

// canonicalUsage reads UsageInfo; nil when absent.
func canonicalUsage(raw json.Value) *canonical.Usage {
	var u struct {
		In    int64 `json:"input_tokens"`
		Out   int64 `json:"output_tokens"`
		Total int64 `json:"total_tokens"`
		InDet struct {
			CacheRead     int64 `json:"cache_read"`
			CacheCreation int64 `json:"cache_creation"`
		} `json:"input_token_details"`
		OutDet struct {
			Reasoning int64 `json:"reasoning"`
		} `json:"output_token_details"`
	}
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &u, peerJSON) != nil {
		return nil
	}
	return &canonical.Usage{InputTokens: u.In, OutputTokens: u.Out, TotalTokens: u.Total, ReasoningTokens: u.OutDet.Reasoning,
		CacheReadTokens: u.InDet.CacheRead, CacheCreationTokens: u.InDet.CacheCreation}
}

func (d *Decoder) tools(base *canonical.Event, data map[string]json.Value, out []*canonical.Event) []*canonical.Event {
	id := jstr(data["tool_call_id"])
	switch jstr(data["event"]) {
	case "tool-started":
		return d.emit(out, base, &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{ToolCallId: id, Name: jstr(data["tool_name"]), Input: rawValue(data["input"])}})
	case "tool-output-delta":
		return d.emit(out, base, &canonical.KindToolOutput{ToolOutput: &canonical.ToolOutput{ToolCallId: id, Delta: jstr(data["delta"])}})
	case "tool-finished":
		return d.emit(out, base, &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{ToolCallId: id, Output: rawValue(data["output"])}})
	case "tool-error":
		return d.emit(out, base, &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{ToolCallId: id, Error: errorProto(jstr(data["code"]), jstr(data["message"]), "tool failed")}})
	}
	return out
}

func (d *Decoder) lifecycle(base *canonical.Event, data map[string]json.Value, out []*canonical.Event) []*canonical.Event {
	status := jstr(data["event"])
	errText := jstr(data["error"])
	lc := &canonical.Lifecycle{GraphName: jstr(data["graph_name"])}
	var cause struct {
		Type       string `json:"type"`
		ToolCallID string `json:"tool_call_id"`
		FromNode   string `json:"from_node"`
	}
	if json.Unmarshal(data["cause"], &cause, peerJSON) == nil && cause.Type != "" {
		lc.Cause = &canonical.Cause{Type: cause.Type, ToolCallId: cause.ToolCallID, FromNode: cause.FromNode}
	}
	var cp struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(data["checkpoint"], &cp, peerJSON) == nil {
		lc.CheckpointId = cp.ID
	}
	root := len(base.Namespace) == 0
	switch status {
	case "started":
		lc.Status = canonical.StatusStarted
	case "running":
		lc.Status = canonical.StatusRunning
	case "completed", "interrupted", "failed":
		st := map[string]canonical.RunStatus{"completed": canonical.StatusCompleted, "interrupted": canonical.StatusInterrupted, "failed": canonical.StatusFailed}[status]
		var ce *canonical.Error
		if st == canonical.StatusFailed {
			st, ce = d.failure(errText)
		}
		if root {
			return d.terminal(base, st, ce, lc.GetGraphName(), out)
		}
		out = d.closeMessage(out, base, d.state(base.Namespace), canonical.FinishError, nil)
		lc.Status = st
		if ce != nil {
			lc.Error = ce.Proto()
		}
	default:
		return out
	}
	return d.emit(out, base, &canonical.KindLifecycle{Lifecycle: lc})
}

// failure maps a failed lifecycle's error text: "cancelled: ..." is a
// cancellation (our frontend's form); a text equal to the last message
// error keeps that error's code.
func (d *Decoder) failure(text string) (canonical.RunStatus, *canonical.Error) {
	if msg, ok := strings.CutPrefix(text, cancelledPrefix); ok {
		return canonical.StatusCancelled, canonical.WireError(canonical.CodeCanceled, msg)
	}
	if d.msgErr != nil && (text == "" || text == d.msgErr.Message) {
		return canonical.StatusFailed, d.msgErr
	}
	if text == "" { // the upstream said no more (LangGraph's failed subgraphs): no text is made up
		return canonical.StatusFailed, canonical.WireError(canonical.CodeUnknown, "")
	}
	// The upstream's text as it was (LangGraph's is JSON:
	// {"error":"Error","message":"..."}): a client of the agent protocol
	// sees the same error string through us.
	return canonical.StatusFailed, canonical.WireError(canonical.CodeUnknown, text)
}

// terminal closes everything open, innermost namespaces first, and appends
// the run's terminal event.
func (d *Decoder) terminal(base *canonical.Event, st canonical.RunStatus, ce *canonical.Error, graph string, out []*canonical.Event) []*canonical.Event {
	for i := len(d.order) - 1; i >= 0; i-- {
		s := d.order[i]
		reason := canonical.FinishError
		if st == canonical.StatusCompleted {
			reason = canonical.FinishStop
		}
		nb := &canonical.Event{Namespace: s.ns, TimeUnixNano: base.TimeUnixNano}
		out = d.closeMessage(out, nb, s, reason, nil)
	}
	d.ended = true
	t := canonical.Terminal(st, ce)
	t.GetLifecycle().GraphName = graph
	t.Namespace, t.TimeUnixNano = []string{}, base.TimeUnixNano
	return append(out, t)
}

// SSEDecoder decodes an upstream SSE event stream cut anywhere (Feed and
// End, as every decoder in the repository does): each event's data is one
// envelope for the Decoder. Comments (heartbeats) decode to nothing; their
// cadence is kept for the backend's silence bound (SilenceLimit).
type SSEDecoder struct {
	Decoder
	parser sse.Parser
	evs    []sse.Event

	beats    int           // comment lines seen
	lastBeat time.Time     // when the last was decoded
	beatGap  time.Duration // between the last two
}

// NewSSEDecoder returns an SSE decoder whose events may hold at most
// maxEventBytes (default 4 MiB).
func NewSSEDecoder(afterSeq uint64, maxEventBytes int) *SSEDecoder {
	d := &SSEDecoder{}
	d.AfterSeq = afterSeq
	d.parser.MaxEventBytes = maxEventBytes
	d.parser.BorrowData = true   // each event is decoded before the next Feed
	d.parser.KeepComments = true // heartbeats, for SilenceLimit
	return d
}

// Bounds of SilenceLimit: those of the official SDK's idle watchdog.
const (
	minSilence = 6 * time.Second
	maxSilence = 30 * time.Second
)

// SilenceLimit is how long the stream may stay silent, heartbeats
// included, before its server is taken for gone, as
// @langchain/langgraph-sdk's idle watchdog takes it (reference section
// 6.3): 0 (no bound) until two heartbeats were seen, then three times the
// interval between the last two, within 6 to 30 s. LangGraph Platform
// writes one about every 5 s.
func (d *SSEDecoder) SilenceLimit() time.Duration {
	if d.beats < 2 {
		return 0
	}
	return min(max(3*d.beatGap, minSilence), maxSilence)
}

// noteBeat records a comment line decoded now.
func (d *SSEDecoder) noteBeat() {
	now := time.Now()
	if d.beats > 0 {
		d.beatGap = now.Sub(d.lastBeat)
	}
	d.beats++
	d.lastBeat = now
}

// nextRun readies the decoder of a kept thread stream for the thread's
// next run, whose command was applied through seq after: the run state
// starts afresh, the parser goes on from where the last run's read left
// it (an event it holds in part is the stream's next one).
func (d *SSEDecoder) nextRun(after uint64) {
	d.Decoder = Decoder{AfterSeq: after, Contiguous: d.Contiguous, MaxBlockBytes: d.MaxBlockBytes}
}

// Feed takes a chunk of the stream and appends the canonical events it
// completes.
func (d *SSEDecoder) Feed(chunk []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	var err error
	d.evs, err = d.parser.Feed(chunk, d.evs[:0])
	for _, e := range d.evs {
		if e.IsComment {
			d.noteBeat()
			continue
		}
		if len(bytes.TrimSpace(e.Data)) == 0 {
			continue
		}
		var ferr error
		if out, ferr = d.Decoder.Feed(e.Data, out); ferr != nil {
			clear(d.evs)
			return out, ferr
		}
	}
	clear(d.evs) // keep no frame
	if err != nil {
		return out, canonical.AsError(err)
	}
	return out, nil
}

// End ends the stream: the event whose blank line never came is dispatched
// (upstreams that omit it), then what the run still owes.
func (d *SSEDecoder) End(out []*canonical.Event) ([]*canonical.Event, error) {
	d.parser.DispatchIncompleteAtEnd = true
	evs, err := d.parser.End(d.evs[:0])
	for _, e := range evs {
		if len(bytes.TrimSpace(e.Data)) == 0 {
			continue
		}
		var ferr error
		if out, ferr = d.Decoder.Feed(e.Data, out); ferr != nil && err == nil {
			err = ferr
		}
	}
	out = d.Decoder.End(out)
	if err != nil {
		return out, canonical.AsError(err)
	}
	return out, nil
}

func nsKey(ns []string) string { return strings.Join(ns, "\x00") }
