package xmlaction

import (
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Extension keys the decoder sets on the events it produces.
const (
	// extAttributes, on a tool-call block_start, holds the <action> tag's
	// attributes as written (names lower-cased, first occurrence kept,
	// "name" left out), so the renderer can write the tag back.
	extAttributes = "xml.attributes"
	// extError, on a tool_failed event the decoder emits, holds the action
	// error kind (invalid_json, missing_name, ...).
	extError = "xml.error"
)

// scanState is where the scanner is in the XML action stream.
type scanState uint8

const (
	stOutside  scanState = iota // between blocks
	stThought                   // inside <thought>
	stResponse                  // inside <response>
	stAction                    // inside an <action> body
	stDiscard                   // inside an action body past MaxActionBytes
)

// openKind is the kind of block the decoder has open.
type openKind uint8

const (
	openNone openKind = iota
	openReasoning
	openText
	openTool
)

// mark records, for the executor, a position in the events a Feed or End
// produced: an action completed there (its block and any tool error come
// just before), or out[at] is a response text delta holding exactly one
// $reference.
type mark struct {
	at  int
	act *action
	ref string
}

// maxWhitespace is how much leading whitespace of a text run outside tags
// is held back to learn whether the run is whitespace only (and dropped);
// a longer run is text.
const maxWhitespace = 4096

// maxIdent bounds a $reference's name; a longer one is literal text.
const maxIdent = 128

// Decoder turns XML action-stream text, as a model writes it, into
// canonical events: <thought> text becomes reasoning deltas, <response> text
// and text outside tags become text deltas, and each <action> becomes a
// tool-call block whose arguments are the action's JSON body as written
// (streamed as it arrives, from the moment the body's "name" is known),
// followed by a tool_failed event when the action is malformed. Text is
// emitted as soon as it is known not to belong to a tag: only a possible
// partial tag, character reference, $reference or UTF-8 sequence at the end
// of a chunk is held back.
//
// One Decoder decodes one stream and is not safe for concurrent use.
type Decoder struct {
	cfg Config
	b   *canonical.Builder

	st    scanState
	held  []byte // bytes not consumed yet, at most a tag, reference or rune
	buf   []byte // held + chunk
	open  openKind
	index uint32 // the open block's index
	pend  []byte // text for the open block not yet emitted as a delta

	ws      []byte // outside: the current run's leading whitespace
	runText bool   // outside: the current run has text (its block is open)

	act   *pendingAction
	nAct  int
	ids   map[string]bool
	track bool   // record marks (the executor reads them)
	marks []mark // since the last takeMarks
	stray int
	ended bool
}

// NewDecoder returns a Decoder for one stream. Only cfg's limits are used.
func NewDecoder(cfg Config) *Decoder {
	return newDecoder(cfg.withDefaults(), canonical.NewBuilder())
}

func newDecoder(cfg Config, b *canonical.Builder) *Decoder {
	return &Decoder{cfg: cfg, b: b, ids: map[string]bool{}}
}

// mark records a mark when the executor is listening.
func (d *Decoder) mark(m mark) {
	if d.track {
		d.marks = append(d.marks, m)
	}
}

// Feed decodes chunk, cut anywhere, and appends the events it completes.
// It fails only when called after End.
func (d *Decoder) Feed(chunk []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	if d.ended {
		return out, canonical.Errorf(canonical.CodeFailedPrecondition, "xmlaction: Feed after End")
	}
	data := chunk
	if len(d.held) > 0 {
		d.buf = append(append(d.buf[:0], d.held...), chunk...)
		data = d.buf
	}
	out, rest := d.scan(data, false, out)
	d.held = append(d.held[:0], rest...)
	if cap(d.buf) > 64<<10 {
		d.buf = nil // kept between chunks only while small
	}
	return out, nil
}

// End flushes what is held back as text, ends an open block (an open
// action fails as unterminated), closes the message and appends the run's
// terminal event (completed).
func (d *Decoder) End(out []*canonical.Event) ([]*canonical.Event, error) {
	if d.ended {
		return out, nil
	}
	out = d.finish(out)
	d.ended = true
	return d.b.End(out, canonical.StatusCompleted, nil), nil
}

// Dropped counts the stray closing tags dropped so far.
func (d *Decoder) Dropped() int { return d.stray }

// takeMarks returns the marks recorded since the last call.
func (d *Decoder) takeMarks() []mark {
	m := d.marks
	d.marks = nil
	return m
}

// buffered is the number of peer bytes the decoder holds.
func (d *Decoder) buffered() int {
	n := len(d.held) + len(d.ws) + len(d.pend)
	if d.act != nil {
		n += len(d.act.body)
	}
	return n
}

// finish decodes what is held as the end of the stream and closes the
// open block, without ending the message or the run.
func (d *Decoder) finish(out []*canonical.Event) []*canonical.Event {
	data := d.held
	d.held = nil
	out, _ = d.scan(data, true, out)
	for {
		switch d.st {
		case stAction:
			a := d.act
			if a.skip < 0 {
				out = d.finishAction(out, endUnterminated)
				continue
			}
			// An unbalanced quote hid the real </action>: cut there and
			// decode the rest again in the enclosing state.
			rest := append([]byte(nil), a.body[a.skip+a.skipLen:]...)
			a.body = a.body[:a.skip]
			out = d.finishAction(out, endClosed)
			out, _ = d.scan(rest, true, out)
			continue
		case stDiscard:
			out = d.finishAction(out, endTooLarge)
			continue
		case stOutside:
			out = d.endRun(out)
		default:
			out = d.closeBlock(out)
			d.st = stOutside
		}
		return d.flush(out)
	}
}

// interrupt ends the open block because the surrounding stream ended its
// message (the wrapper calls it); decoding resumes in a new block.
func (d *Decoder) interrupt(out []*canonical.Event) []*canonical.Event {
	out = d.flush(out)
	if d.open == openNone {
		return out
	}
	if d.open == openTool && d.act != nil {
		d.act.blockClosed = true
	}
	d.open = openNone
	return d.b.FinishBlock(out)
}

// scan decodes data and returns the bytes it could not consume yet.
func (d *Decoder) scan(data []byte, final bool, out []*canonical.Event) ([]*canonical.Event, []byte) {
	i := 0
	for i < len(data) {
		var hold bool
		switch d.st {
		case stAction:
			i, hold, out, data = d.body(data, i, final, out)
		case stDiscard:
			i, hold, out = d.discard(data, i, final, out)
		default:
			i, hold, out = d.text(data, i, final, out)
		}
		if hold {
			break
		}
	}
	return d.flush(out), data[i:]
}

// text decodes from data[i] in a text state (outside, thought, response).
// It returns where to continue and whether to hold data[i:].
func (d *Decoder) text(data []byte, i int, final bool, out []*canonical.Event) (int, bool, []*canonical.Event) {
	var j int
	if d.st == stResponse {
		j = i + indexAny3(data[i:], '<', '&', '$')
	} else {
		j = i + indexAny3(data[i:], '<', '&', '&')
	}
	if j > i {
		seg := data[i:j]
		if j == len(data) && !final {
			seg = seg[:completeLen(seg)]
		}
		out = d.putText(out, seg)
		if i+len(seg) < j {
			return i + len(seg), true, out
		}
	}
	if j == len(data) {
		return j, false, out
	}
	switch data[j] {
	case '&':
		r, n, st := matchEntity(data[j:], final)
		switch st {
		case matchNeed:
			return j, true, out
		case matchOK:
			var tmp [utf8.UTFMax]byte
			out = d.putContent(out, tmp[:utf8.EncodeRune(tmp[:], r)])
			return j + n, false, out
		}
		return j + 1, false, d.putContent(out, data[j:j+1])
	case '$':
		n, st := matchRef(data[j:], final)
		switch st {
		case matchNeed:
			return j, true, out
		case matchOK:
			return j + n, false, d.ref(out, data[j:j+n])
		}
		return j + 1, false, d.putContent(out, data[j:j+1])
	}
	kind, n, attrs, st := matchTag(data[j:], d.allowed(), final, d.cfg.MaxTagBytes)
	switch st {
	case matchNeed:
		return j, true, out
	case matchOK:
		return j + n, false, d.tag(out, kind, attrs)
	}
	return j + 1, false, d.putContent(out, data[j:j+1])
}

// allowed is the set of structural tags in the current state.
func (d *Decoder) allowed() tagSet {
	switch d.st {
	case stThought:
		return tagSet(1<<tThoughtClose | 1<<tActionOpen | 1<<tActionSelf | 1<<tResponseOpen | 1<<tResponseSelf)
	case stResponse:
		return tagSet(1 << tResponseClose)
	case stAction:
		return tagSet(1 << tActionClose)
	}
	return tagSet(1<<tThoughtOpen | 1<<tThoughtSelf | 1<<tResponseOpen | 1<<tResponseSelf |
		1<<tActionOpen | 1<<tActionSelf | 1<<tThoughtClose | 1<<tResponseClose | 1<<tActionClose)
}

// putText appends raw text bytes of the current state; invalid UTF-8 bytes
// become U+FFFD one by one.
func (d *Decoder) putText(out []*canonical.Event, seg []byte) []*canonical.Event {
	if d.st == stOutside && !d.runText {
		k := 0
		for k < len(seg) && isSpace(seg[k]) {
			k++
		}
		d.ws = append(d.ws, seg[:k]...)
		seg = seg[k:]
		if len(seg) == 0 {
			if len(d.ws) > maxWhitespace {
				out = d.startRun(out)
			}
			return out
		}
		out = d.startRun(out)
	}
	return d.put(out, d.kind(), seg)
}

// putContent appends text that is not whitespace (a decoded character
// reference, a literal '<', '&' or '$').
func (d *Decoder) putContent(out []*canonical.Event, s []byte) []*canonical.Event {
	if d.st == stOutside && !d.runText {
		out = d.startRun(out)
	}
	return d.put(out, d.kind(), s)
}

// startRun opens the text block of a text run outside tags and emits its
// held leading whitespace.
func (d *Decoder) startRun(out []*canonical.Event) []*canonical.Event {
	d.runText = true
	out = d.put(out, openText, d.ws)
	d.ws = d.ws[:0]
	return out
}

// endRun ends a text run outside tags: a whitespace-only run is dropped.
func (d *Decoder) endRun(out []*canonical.Event) []*canonical.Event {
	d.ws = d.ws[:0]
	d.runText = false
	return d.closeBlock(out)
}

func (d *Decoder) kind() openKind {
	if d.st == stThought {
		return openReasoning
	}
	return openText
}

// ref emits a response's $reference as a delta of its own and marks it.
func (d *Decoder) ref(out []*canonical.Event, tok []byte) []*canonical.Event {
	out = d.flush(d.put(d.flush(out), openText, tok))
	d.mark(mark{at: len(out) - 1, ref: string(tok[1:])})
	return out
}

// put appends s (converted to whole UTF-8) to the block of kind k, opening
// it first if another block (or none) is open.
func (d *Decoder) put(out []*canonical.Event, k openKind, s []byte) []*canonical.Event {
	if len(s) == 0 {
		return out
	}
	if d.open != k {
		out = d.openBlock(out, k)
	}
	d.pend = canonical.AppendValidUTF8(d.pend, s)
	return out
}

// openBlock closes the open block and opens one of kind k (not a tool
// call, which startTool opens).
func (d *Decoder) openBlock(out []*canonical.Event, k openKind) []*canonical.Event {
	out = d.closeBlock(out)
	t := canonical.BlockText
	if k == openReasoning {
		t = canonical.BlockReasoning
	}
	d.open = k
	out = d.b.StartBlock(out, t, "", "", "", "")
	d.index = out[len(out)-1].GetBlockStart().GetIndex()
	return out
}

// closeBlock emits pending text and finishes the open block.
func (d *Decoder) closeBlock(out []*canonical.Event) []*canonical.Event {
	out = d.flush(out)
	if d.open == openNone {
		return out
	}
	d.open = openNone
	return d.b.FinishBlock(out)
}

// flush emits the pending text as one delta of the open block.
func (d *Decoder) flush(out []*canonical.Event) []*canonical.Event {
	if len(d.pend) == 0 {
		return out
	}
	s := string(d.pend)
	d.pend = d.pend[:0]
	if d.open == openNone {
		return out
	}
	// A delta changes no state the Builder tracks: build it directly (it
	// is the per-token hot path).
	return append(out, newDelta(d.b.Namespace, d.index, s))
}

// deltaEvent holds a delta event's three messages in one allocation.
type deltaEvent struct {
	ev   canonical.Event
	kind canonical.KindBlockDelta
	d    canonical.BlockDelta
}

// newDelta returns a text delta event for block index.
func newDelta(ns []string, index uint32, text string) *canonical.Event {
	a := &deltaEvent{}
	a.d.Index, a.d.Text = index, text
	a.kind.BlockDelta = &a.d
	a.ev.Namespace, a.ev.Kind = ns, &a.kind
	return &a.ev
}

// tag applies a structural tag.
func (d *Decoder) tag(out []*canonical.Event, k tagKind, attrs []byte) []*canonical.Event {
	switch d.st {
	case stOutside:
		out = d.endRun(out)
		switch k {
		case tThoughtOpen:
			d.st = stThought
			return d.openBlock(out, openReasoning)
		case tThoughtSelf:
			return d.closeBlock(d.openBlock(out, openReasoning))
		case tResponseOpen:
			d.st = stResponse
			return d.openBlock(out, openText)
		case tResponseSelf:
			return d.closeBlock(d.openBlock(out, openText))
		case tActionOpen, tActionSelf:
			return d.startAction(out, attrs, false, k == tActionSelf)
		}
		d.stray++ // a closing tag with nothing open
		return out
	case stThought:
		out = d.closeBlock(out)
		switch k {
		case tThoughtClose:
			d.st = stOutside
		case tActionOpen, tActionSelf:
			return d.startAction(out, attrs, true, k == tActionSelf)
		case tResponseOpen:
			d.st = stResponse
			return d.openBlock(out, openText)
		case tResponseSelf:
			d.st = stOutside
			return d.closeBlock(d.openBlock(out, openText))
		}
		return out
	case stResponse: // </response>
		d.st = stOutside
		return d.closeBlock(out)
	}
	return out
}

// Actions.

// pendingAction is an <action> whose body is being read.
type pendingAction struct {
	ord       int
	id        string
	attrs     []attr
	inThought bool

	body        []byte
	emitted     int  // body bytes sent as argument deltas
	inStr, esc  bool // JSON string state, for </action> inside strings
	lex         nameLexer
	started     bool // its tool-call block has started
	blockClosed bool // the wrapper ended its block early
	skip        int  // offset of the first </action> inside a JSON string, or -1
	skipLen     int
}

type endHow uint8

const (
	endClosed endHow = iota
	endUnterminated
	endTooLarge
)

// startAction begins an action at its opening tag.
func (d *Decoder) startAction(out []*canonical.Event, rawAttrs []byte, inThought, self bool) []*canonical.Event {
	d.nAct++
	a := &pendingAction{ord: d.nAct, attrs: parseAttrs(rawAttrs), inThought: inThought, skip: -1}
	if id, ok := attrValue(a.attrs, "id"); ok && id != "" {
		a.id = validString([]byte(id))
	} else {
		a.id = "action-" + itoa(a.ord) // the Cortex spec does not require an id
	}
	d.act = a
	d.st = stAction
	if self {
		return d.finishAction(out, endClosed)
	}
	return out
}

// body decodes from data[i] inside an action body. It may replace data
// (when an over-long body is cut and its tail decoded again).
func (d *Decoder) body(data []byte, i int, final bool, out []*canonical.Event) (int, bool, []*canonical.Event, []byte) {
	a := d.act
	k := i
	for ; k < len(data); k++ {
		if a.lex.done && !a.esc {
			// Skip to the next byte that matters: a quote, a backslash in
			// a string, or '<'; never past the body limit.
			end := max(k, min(len(data), k+d.cfg.MaxActionBytes-len(a.body)-(k-i)))
			if a.inStr {
				k += indexAny3(data[k:end], '"', '\\', '<')
			} else {
				k += indexAny3(data[k:end], '"', '<', '<')
			}
			if k == len(data) {
				break
			}
		}
		if len(a.body)+k-i >= d.cfg.MaxActionBytes {
			a.body = append(a.body, data[i:k]...)
			out = d.emitArgs(out, false)
			if a.skip >= 0 {
				// Cut at the skipped </action>: what follows it (in the
				// body, and the tag's tail may still be in data) is
				// decoded again.
				var rest []byte
				if cut := a.skip + a.skipLen; cut <= len(a.body) {
					rest = append(append([]byte(nil), a.body[cut:]...), data[k:]...)
				} else {
					rest = append([]byte(nil), data[k+cut-len(a.body):]...)
				}
				a.body = a.body[:a.skip]
				return 0, false, d.finishAction(out, endClosed), rest
			}
			d.st = stDiscard
			return k, false, out, data
		}
		c := data[k]
		if c == '<' {
			_, n, _, st := matchTag(data[k:], tagSet(1<<tActionClose), final, maxSimpleTag)
			if st == matchNeed {
				a.body = append(a.body, data[i:k]...)
				return k, true, d.emitArgs(out, false), data
			}
			if st == matchOK {
				if !a.inStr {
					a.body = append(a.body, data[i:k]...)
					return k + n, false, d.finishAction(out, endClosed), data
				}
				if a.skip < 0 {
					a.skip, a.skipLen = len(a.body)+k-i, n
					// The body may be cut here: a name after this point
					// is known only from the whole (cut) body.
					a.lex.done = true
				}
			}
		}
		if a.inStr {
			switch {
			case a.esc:
				a.esc = false
			case c == '\\':
				a.esc = true
			case c == '"':
				a.inStr = false
			}
		} else if c == '"' {
			a.inStr = true
		}
		if !a.lex.done && a.lex.step(c, a.inStr) && !a.blockClosed {
			a.body = append(a.body, data[i:k+1]...)
			i = k + 1
			out = d.startTool(out, a, a.lex.name)
			out = d.emitArgs(out, false)
		}
	}
	a.body = append(a.body, data[i:k]...)
	return k, false, d.emitArgs(out, false), data
}

// discard skips an over-long action body up to its </action>.
func (d *Decoder) discard(data []byte, i int, final bool, out []*canonical.Event) (int, bool, []*canonical.Event) {
	a := d.act
	for k := i; k < len(data); k++ {
		c := data[k]
		if a.inStr {
			switch {
			case a.esc:
				a.esc = false
			case c == '\\':
				a.esc = true
			case c == '"':
				a.inStr = false
			}
			continue
		}
		switch c {
		case '"':
			a.inStr = true
		case '<':
			_, n, _, st := matchTag(data[k:], tagSet(1<<tActionClose), final, maxSimpleTag)
			switch st {
			case matchNeed:
				return k, true, out
			case matchOK:
				return k + n, false, d.finishAction(out, endTooLarge)
			}
		}
	}
	return len(data), false, out
}

// emitArgs sends the body read so far as argument deltas, once the block
// has started: up to the last whole rune (all of it when final), and never
// past a </action> that lay inside a JSON string.
func (d *Decoder) emitArgs(out []*canonical.Event, final bool) []*canonical.Event {
	a := d.act
	if !a.started || a.blockClosed {
		return out
	}
	end := len(a.body)
	if a.skip >= 0 && a.skip < end {
		end = a.skip
	}
	if end <= a.emitted {
		return out
	}
	seg := a.body[a.emitted:end]
	if !final {
		seg = seg[:completeLen(seg)]
	}
	a.emitted += len(seg)
	return d.put(out, openTool, seg)
}

// startTool opens an action's tool-call block.
func (d *Decoder) startTool(out []*canonical.Event, a *pendingAction, name string) []*canonical.Event {
	out = d.closeBlock(out)
	a.started = true
	out = d.b.ToolCall(out, a.id, name)
	d.index = out[len(out)-1].GetBlockStart().GetIndex()
	fields := make(map[string]*structpb.Value, len(a.attrs))
	for _, at := range a.attrs {
		if at.name != "name" {
			fields[at.name] = structpb.NewStringValue(validString([]byte(at.value)))
		}
	}
	out[len(out)-1].Extensions = map[string]*structpb.Value{
		extAttributes: structpb.NewStructValue(&structpb.Struct{Fields: fields}),
	}
	d.open = openTool
	return out
}

// finishAction ends the action: its block is completed and finished, the
// action is parsed, and a tool_failed event reports a malformed one.
func (d *Decoder) finishAction(out []*canonical.Event, how endHow) []*canonical.Event {
	a := d.act
	if how == endClosed {
		a.skip = -1
	}
	if !a.started && !a.blockClosed {
		name := a.lex.name
		if !a.lex.found {
			name = bodyName(a.body)
		}
		out = d.startTool(out, a, name)
	}
	out = d.emitArgs(out, true)
	var act *action
	var aerr *actionError
	switch how {
	case endUnterminated:
		aerr = actionErrf(kindUnterminated, "the stream ended inside the action body")
		act = &action{id: a.id, ord: a.ord}
		// Before the block's finish, so a renderer leaves the tag open.
		out = d.toolFailed(d.flush(out), a.id, aerr)
	case endTooLarge:
		aerr = actionErrf(kindBodyTooLarge, "the body exceeds MaxActionBytes (%d bytes)", d.cfg.MaxActionBytes)
		act = &action{id: a.id, ord: a.ord}
	default:
		act, aerr = d.parseAction(a)
	}
	if !a.blockClosed {
		out = d.closeBlock(out)
	}
	if how != endUnterminated && aerr != nil {
		out = d.toolFailed(out, a.id, aerr)
	}
	act.err = aerr
	if d.ids[a.id] {
		act.dup = true
	} else if len(d.ids) < d.cfg.MaxActions {
		d.ids[a.id] = true
	}
	d.mark(mark{at: len(out), act: act})
	d.act = nil
	d.st = stOutside
	if a.inThought {
		d.st = stThought
	}
	return out
}

// toolFailed appends the tool error for a malformed action.
func (d *Decoder) toolFailed(out []*canonical.Event, id string, e *actionError) []*canonical.Event {
	return d.b.Emit(out, &canonical.Event{
		Kind: &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{
			ToolCallId: id, Error: e.toCanonical(id).Proto(),
		}},
		Extensions: map[string]*structpb.Value{extError: structpb.NewStringValue(e.kind)},
	})
}

// bodyName is the "name" of a complete body, or "".
func bodyName(body []byte) string {
	v, _ := decodeJSON(trimFence(body))
	obj, _ := v.(map[string]any)
	name, _ := obj["name"].(string)
	return name
}

// nameLexer follows an action body's JSON just far enough to find the
// top-level "name" string, so the tool-call block can start (with its
// name) before the body is complete.
type nameLexer struct {
	depth       int
	expectKey   bool
	capKey      bool
	capVal      bool
	isName      bool
	wantVal     bool
	inStr       bool
	raw         []byte
	done, found bool
	name        string
}

// Capture limits: a longer key is not "name"; a longer name is found only
// when the body is complete.
const (
	maxKeyCapture  = 16
	maxNameCapture = 1024
)

// step takes the next body byte (inStr is the JSON string state after it)
// and reports whether the name has just been found.
func (l *nameLexer) step(c byte, inStr bool) bool {
	if l.inStr {
		if !inStr { // string ended
			l.inStr = false
			switch {
			case l.capKey:
				l.capKey = false
				l.isName = decodeJSONString(l.raw) == "name"
			case l.capVal:
				l.capVal = false
				l.name, l.found, l.done = decodeJSONString(l.raw), true, true
				return true
			}
			return false
		}
		if l.capKey || l.capVal {
			limit := maxKeyCapture
			if l.capVal {
				limit = maxNameCapture
			}
			if len(l.raw) >= limit {
				if l.capVal {
					l.done = true // found at the end, from the whole body
				}
				l.capKey = false
				return false
			}
			l.raw = append(l.raw, c)
		}
		return false
	}
	if inStr { // string starts
		l.inStr = true
		if l.depth != 1 {
			if l.depth == 0 {
				l.done = true // the body is a string
			}
			return false
		}
		l.raw = l.raw[:0]
		switch {
		case l.expectKey:
			l.expectKey, l.capKey = false, true
		case l.wantVal:
			l.wantVal, l.capVal = false, true
		}
		return false
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		return false
	case '{', '[':
		if l.depth == 0 {
			if c == '[' {
				l.done = true // not an object
				return false
			}
			l.expectKey = true
		}
		l.depth++
		return false
	case '}', ']':
		l.depth--
		if l.depth <= 0 {
			l.done = true
		}
		return false
	}
	if l.depth == 0 && c == '`' {
		return false // a Markdown code fence before the JSON
	}
	if l.depth == 0 && !l.expectKey && c != '`' {
		// Text of a code fence's info string ("```json") or junk: keep
		// looking only while inside a fence's first line.
		if isLetter(c) {
			return false
		}
		l.done = true
		return false
	}
	if l.depth != 1 {
		return false
	}
	switch c {
	case ',':
		l.expectKey, l.wantVal, l.isName = true, false, false
	case ':':
		if l.isName {
			l.wantVal = true
		}
		l.isName = false
	default:
		if l.wantVal {
			l.done = true // "name" is not a string
		}
	}
	return false
}

// plainJSONString reports a string literal's inside that decodes to
// itself: valid UTF-8 without escapes or control characters.
func plainJSONString(raw []byte) bool {
	for _, c := range raw {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return utf8.Valid(raw)
}

// decodeJSONString decodes the inside of a JSON string literal ("" when it
// is not valid JSON).
func decodeJSONString(raw []byte) string {
	if plainJSONString(raw) {
		return string(raw) // no escapes: the bytes are the string
	}
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var s string
	if json.Unmarshal(q, &s, readOptions...) != nil {
		return ""
	}
	return s
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
