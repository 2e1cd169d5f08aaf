package agent

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/jsonw"
)

// The fast path: most frames of a run are text, reasoning or tool-argument
// deltas on the block already open,
//
//	{"type":"event","seq":N,"method":"messages","params":{"namespace":[...],
//	 "timestamp":N,"node":"...","data":{"event":"content-block-delta",
//	 "index":N,"delta":{"type":"text-delta","text":"..."}}}}
//
// with members in any order and any others beside them; and values frames,
// a namespace's whole state,
//
//	{"type":"event","seq":N,"method":"values","params":{"namespace":[...],
//	 "timestamp":N,"node":"...","data":<any JSON>}}
//
// with "method" before "params" (as every encoder writes it), whose data
// grows with the thread's history. feedFast scans such a frame by hand,
// with no reflection, maps or copies of raw values (a values frame's data
// straight into its structpb value, where encoding/json validated the
// frame, decoded it into maps and structpb copied those), and produces
// exactly the events Feed's encoding/json path produces.
//
// Any other event frame (lifecycle, checkpoints, updates, message and
// block starts and finishes: some ten a run) fastEnvelope decodes from
// what feedFast read: the envelope, and data split into its members, each
// then decoded as the general path decodes it (feedEvent). Decoding those
// with encoding/json took twice as long and allocated twice as much
// (BenchmarkDecodeRunFrames).
//
// Whenever the fast path cannot prove it decodes a frame as the general
// path does (another shape, a member it does not read
// spelt in another case or twice, null, an escaped name, a number
// encoding/json would refuse, a namespace it has not seen, a block not
// open, invalid JSON anywhere) it declines without side effects and the
// general path decodes the frame, errors included.

// Fast-path bounds: beyond them the general path decodes the frame.
const (
	fastMaxNamespace = 8  // namespace elements read
	fastMaxDepth     = 64 // nesting of the members skipped over
	fastMaxStates    = 16 // namespaces searched for the frame's block
)

// The delta fields the fast path reads, indexing fastFrame.fields.
const (
	fastText = iota
	fastReasoning
	fastArgs
	fastData
	fastFields
)

// fastSpan is a JSON string's raw contents (between the quotes) in the frame.
type fastSpan struct {
	start, end int
	backslash  bool // holds an escape
	high       bool // holds a byte >= 0x80
}

// fastFrame is what feedFast read from a frame.
type fastFrame struct {
	seq      uint64
	hasSeq   bool
	ns       [fastMaxNamespace]fastSpan
	nsN      int
	ts       float64
	hasTS    bool
	node     fastSpan
	hasNode  bool
	index    int64
	method   int             // fastMessages, fastValues or fastOther once read
	name     fastSpan        // the method's name
	values   *structpb.Value // a values frame's data
	data     fastSpan        // data's raw JSON value (start and end only)
	whole    bool            // the frame was read whole: an event not replayed
	skip     bool            // the frame was read whole: an event at or before the run's last seq
	dtype    int             // the field the delta type carries; -1 before it is read
	fields   [fastFields]fastSpan
	hasField [fastFields]bool
	seen     uint32 // members read, to decline duplicates
}

// The methods the fast path reads (fastFrame.method).
const (
	fastMessages = iota + 1
	fastValues
	fastOther // any other: only the envelope is read
)

// Bits of fastFrame.seen, one per member read.
const (
	fastSeenType = 1 << iota
	fastSeenSeq
	fastSeenMethod
	fastSeenParams
	fastSeenNamespace
	fastSeenTimestamp
	fastSeenNode
	fastSeenData
	fastSeenEvent
	fastSeenIndex
	fastSeenDelta
	fastSeenDeltaType
)

// Member names per object, for the case-insensitive match encoding/json
// makes: a name equal to one of them but for case is declined.
var (
	fastEnvelopeNames = []string{"type", "seq", "method", "params"}
	fastParamsNames   = []string{"namespace", "timestamp", "node", "data"}
	fastDataNames     = []string{"event", "index", "delta"}
	fastDeltaNames    = []string{"type", "text", "reasoning", "args", "data"}
)

// feedFast decodes frame (trimmed, starting with '{') if it is a delta or
// values frame the fast path handles; ok is false, with out unchanged and
// no decoding state touched (only the lookup cache d.last), for any other
// frame, which fastEnvelope may then decode from what feedFast read.
func (d *Decoder) feedFast(frame []byte, out []*canonical.Event) (_ []*canonical.Event, ok bool) {
	f := &d.fast
	*f = fastFrame{dtype: -1}
	if d.ended {
		return out, false
	}
	s := fastScanner{b: frame}
	if !s.envelope(f) || s.pos != len(frame) {
		return out, false
	}
	if f.hasSeq && !d.wanted(f.seq) {
		f.skip = f.seq <= d.floor() // else a jump: the general path fails the run
		return out, false
	}
	f.whole = true
	switch f.method {
	case fastValues:
		return d.fastValues(frame, f, out)
	case fastMessages:
		return d.fastDeltaFrame(frame, f, out)
	}
	return out, false
}

// fastDeltaFrame emits a messages frame that is a delta on the open block.
func (d *Decoder) fastDeltaFrame(frame []byte, f *fastFrame, out []*canonical.Event) (_ []*canonical.Event, ok bool) {
	const all = fastSeenType | fastSeenMethod | fastSeenParams | fastSeenData | fastSeenEvent | fastSeenIndex | fastSeenDelta | fastSeenDeltaType
	if f.seen&all != all || !f.hasField[f.dtype] {
		return out, false
	}
	st := d.fastState(frame, f)
	if st == nil || !st.blockOpen || st.wire != f.index || st.jsonBlock {
		return out, false
	}
	want := [fastFields]canonical.BlockType{canonical.BlockText, canonical.BlockReasoning, canonical.BlockToolCall, canonical.BlockData}
	if st.typ != want[f.dtype] {
		return out, false
	}
	var node string
	if f.hasNode {
		raw, plain := fastPlain(frame, f.node)
		if !plain {
			return out, false
		}
		if string(raw) != d.node {
			d.node = string(raw)
		}
		node = d.node
	}
	base := canonical.Event{Namespace: st.ns, GraphNode: node}
	if f.hasTS && f.ts > 0 && f.ts < 1e14 {
		base.TimeUnixNano = int64(f.ts) * 1e6
	}
	sp := f.fields[f.dtype]
	raw := frame[sp.start:sp.end]
	if sp.backslash || sp.high {
		d.scratch = jsonw.Unquote(d.scratch[:0], raw)
		raw = d.scratch
		if cap(d.scratch) > 64<<10 {
			d.scratch = nil // keep no large buffer
		}
	}
	if f.dtype == fastData {
		return d.appendB64(out, &base, st, string(raw)), true
	}
	return d.appendText(out, &base, st, d.arena.String(raw)), true
}

// fastValues emits a values frame's state snapshot.
func (d *Decoder) fastValues(frame []byte, f *fastFrame, out []*canonical.Event) (_ []*canonical.Event, ok bool) {
	const all = fastSeenType | fastSeenMethod | fastSeenParams | fastSeenData
	if f.seen&all != all {
		return out, false
	}
	node, plain := f.graphNode(frame)
	if !plain {
		return out, false
	}
	base := canonical.Event{Namespace: f.namespace(frame), GraphNode: node}
	if f.hasTS && f.ts > 0 && f.ts < 1e14 {
		base.TimeUnixNano = int64(f.ts) * 1e6
	}
	return d.emit(out, &base, &canonical.KindStateSnapshot{StateSnapshot: &canonical.StateSnapshot{Values: f.values}}), true
}

// fastEnvelope decodes the frame feedFast read and declined from its
// envelope, with data decoded as feedJSON decodes it (feedEvent): the
// frames whose data the fast path does not read, and those whose data it
// declined. Like feedFast it declines without side effects.
func (d *Decoder) fastEnvelope(frame []byte, out []*canonical.Event) (_ []*canonical.Event, ok bool) {
	f := &d.fast
	const all = fastSeenType | fastSeenMethod | fastSeenParams
	if !f.whole || f.seen&all != all {
		return out, false
	}
	name, plain := fastPlain(frame, f.name)
	if !plain {
		return out, false
	}
	node, plain := f.graphNode(frame)
	if !plain {
		return out, false
	}
	env := wireEnvelope{Type: "event", Method: fastMethodName(name)}
	p := &env.Params
	p.Node = node
	if st := d.fastState(frame, f); st != nil {
		p.Namespace = st.ns
	} else {
		p.Namespace = f.namespace(frame)
	}
	if f.hasTS {
		p.Timestamp = &f.ts
	}
	var data map[string]json.RawMessage
	if f.seen&fastSeenData != 0 {
		p.Data = frame[f.data.start:f.data.end] // feedEvent keeps none of it
		if p.Data[0] == '{' && env.Method != methodValues && env.Method != methodTasks {
			if data, ok = fastObject(p.Data); !ok {
				return out, false
			}
		}
	}
	out, err := d.feedEvent(&env, data, out)
	if err != nil {
		// Only data that is not an object fails, before any state
		// changes: the general path makes the same error of it.
		return out, false
	}
	return out, true
}

// namespace is the frame's namespace, read as strings (each plain: the
// scan's namespace checked it).
func (f *fastFrame) namespace(frame []byte) []string {
	ns := make([]string, f.nsN)
	for i, sp := range f.ns[:f.nsN] {
		raw, _ := fastPlain(frame, sp)
		ns[i] = string(raw)
	}
	return ns
}

// graphNode is the frame's node ("" without one); plain is false when its
// string is not what encoding/json decodes it to as it lies.
func (f *fastFrame) graphNode(frame []byte) (node string, plain bool) {
	if !f.hasNode {
		return "", true
	}
	raw, plain := fastPlain(frame, f.node)
	return string(raw), plain
}

// fastObject is data, a JSON object the envelope's scan read, as
// encoding/json decodes it into a map: names unquoted, a repeated name's
// last value. The values share one copy of data (the decoders may keep
// them; the frame's buffer is reused). ok is false for what the scan
// should have refused.
func fastObject(data []byte) (_ map[string]json.RawMessage, ok bool) {
	s := fastScanner{b: bytes.Clone(data)}
	empty, ok := s.open('{')
	if !ok {
		return nil, false
	}
	m := make(map[string]json.RawMessage)
	for !empty {
		sp, ok := s.anyKey()
		if !ok {
			return nil, false
		}
		s.ws()
		start := s.pos
		if !s.skip(1) {
			return nil, false
		}
		m[s.text(sp)] = s.b[start:s.pos:s.pos]
		more, ok := s.next('}')
		if !ok {
			return nil, false
		}
		empty = !more
	}
	return m, true
}

// fastMethods are the methods fastMethodName returns without allocating.
var fastMethods = [...]string{methodValues, methodMessages, methodLifecycle, methodTools, methodUpdates,
	methodCheckpoints, methodTasks, methodCustom, methodInputRequested, methodInputAnswered}

// fastMethodName is a method's name as a string.
func fastMethodName(raw []byte) string {
	for _, m := range fastMethods {
		if string(raw) == m {
			return m
		}
	}
	return string(raw)
}

// fastState is the state of the frame's namespace if it exists: the one
// whose namespace equals it element by element, so the general path's
// lookup by key would find the same one.
func (d *Decoder) fastState(frame []byte, f *fastFrame) *nsDec {
	if d.last != nil && fastSameNS(frame, f, d.last.ns) {
		return d.last
	}
	for i := len(d.order) - 1; i >= 0 && i >= len(d.order)-fastMaxStates; i-- {
		if s := d.order[i]; fastSameNS(frame, f, s.ns) {
			d.last = s
			return s
		}
	}
	return nil
}

func fastSameNS(frame []byte, f *fastFrame, ns []string) bool {
	if len(ns) != f.nsN {
		return false
	}
	for i, sp := range f.ns[:f.nsN] {
		if string(frame[sp.start:sp.end]) != ns[i] {
			return false
		}
	}
	return true
}

// fastPlain returns a string's raw bytes if they are what encoding/json
// decodes it to: no escape and valid UTF-8.
func fastPlain(frame []byte, sp fastSpan) ([]byte, bool) {
	raw := frame[sp.start:sp.end]
	if sp.backslash || (sp.high && !utf8.Valid(raw)) {
		return nil, false
	}
	return raw, true
}

// fastScanner reads JSON by hand for the fast path. Every method returns false
// for input it does not accept; that includes all invalid JSON, so a frame
// the fast path takes is one encoding/json parses.
type fastScanner struct {
	b   []byte
	pos int
}

func (s *fastScanner) ws() {
	if s.pos < len(s.b) && s.b[s.pos] > ' ' {
		return
	}
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *fastScanner) peek() byte {
	if s.pos < len(s.b) {
		return s.b[s.pos]
	}
	return 0
}

// open consumes c (after whitespace); empty reports that the object or
// array closes at once (and consumes its end).
func (s *fastScanner) open(c byte) (empty, ok bool) {
	s.ws()
	if s.peek() != c {
		return false, false
	}
	s.pos++
	s.ws()
	if p := s.peek(); p == '}' || p == ']' {
		if p != c+2 { // '{'+2 == '}', '['+2 == ']'
			return false, false
		}
		s.pos++
		return true, true
	}
	return false, true
}

// next consumes the ',' before another member or element (more) or the
// closing c.
func (s *fastScanner) next(c byte) (more, ok bool) {
	s.ws()
	switch s.peek() {
	case ',':
		s.pos++
		return true, true
	case c:
		s.pos++
		return false, true
	}
	return false, false
}

// key reads a member name and its colon. Only plain ASCII names are
// accepted, so comparing raw bytes is comparing names.
func (s *fastScanner) key() ([]byte, bool) {
	s.ws()
	b, i := s.b, s.pos
	if i >= len(b) || b[i] != '"' {
		return nil, false
	}
	j := fastPlainRun(b, i+1)
	if j >= len(b) || b[j] != '"' { // an escape, a high byte: declined
		return nil, false
	}
	s.pos = j + 1
	if s.pos < len(b) && b[s.pos] == ':' {
		s.pos++
	} else {
		s.ws()
		if s.peek() != ':' {
			return nil, false
		}
		s.pos++
	}
	s.ws()
	return b[i+1 : j], true
}

// anyKey reads a member name, whatever it holds, and its colon.
func (s *fastScanner) anyKey() (fastSpan, bool) {
	s.ws()
	sp, ok := s.str()
	if !ok {
		return sp, false
	}
	s.ws()
	if s.peek() != ':' {
		return sp, false
	}
	s.pos++
	return sp, true
}

// str reads a string, checking its escapes; control characters are
// refused as JSON refuses them.
func (s *fastScanner) str() (sp fastSpan, ok bool) {
	b := s.b
	if s.pos >= len(b) || b[s.pos] != '"' {
		return sp, false
	}
	i := s.pos + 1
	sp.start = i
	for {
		i = fastPlainRun(b, i)
		if i >= len(b) {
			return sp, false
		}
		switch c := b[i]; {
		case c == '"':
			sp.end, s.pos = i, i+1
			return sp, true
		case c == '\\':
			sp.backslash = true
			if i+1 >= len(b) {
				return sp, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if jsonw.Hex4(b[i:]) < 0 {
					return sp, false
				}
				i += 6
			default:
				return sp, false
			}
		case c < 0x20:
			return sp, false
		default: // >= 0x80
			sp.high = true
			i++
		}
	}
}

// fastPlainRun returns the index of the first byte at or after i that is
// not plain (jsonw.PlainByte), or len(b): eight bytes at a time, then one.
// In each word, a byte below 0x20, a zero byte of q or bs (a quote or a
// backslash) or a set high bit flags its byte's high bit; borrows only
// carry upwards from a flagged byte, so the lowest flag is exact.
func fastPlainRun(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		q, bs := w^(ones*'"'), w^(ones*'\\')
		if flags := ((w-ones*0x20)&^w | (q-ones)&^q | (bs-ones)&^bs | w) & highs; flags != 0 {
			return i + bits.TrailingZeros64(flags)/8
		}
	}
	for i < len(b) && jsonw.PlainByte[b[i]] {
		i++
	}
	return i
}

// number reads a number per the JSON grammar and returns its text.
func (s *fastScanner) number() ([]byte, bool) {
	start, i := s.pos, s.pos
	b := s.b
	digits := func() bool {
		n := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	s.pos = i
	return b[start:i], true
}

// literal reads true, false or null.
func (s *fastScanner) literal() bool {
	for _, w := range [...]string{"true", "false", "null"} {
		if end := s.pos + len(w); end <= len(s.b) && string(s.b[s.pos:end]) == w {
			s.pos = end
			return true
		}
	}
	return false
}

// skip reads any value, checking it is valid JSON.
func (s *fastScanner) skip(depth int) bool {
	s.ws()
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{', c == '[':
		if depth >= fastMaxDepth {
			return false
		}
		empty, ok := s.open(c)
		if !ok || empty {
			return ok
		}
		for {
			if c == '{' {
				if _, ok := s.anyKey(); !ok {
					return false
				}
			}
			if !s.skip(depth + 1) {
				return false
			}
			more, ok := s.next(c + 2)
			if !ok || !more {
				return ok
			}
		}
	case c == '-', '0' <= c && c <= '9':
		_, ok := s.number()
		return ok
	}
	return s.literal()
}

// other skips the value of a member this object's fast path does not read,
// declining names encoding/json would match to one it reads.
func (s *fastScanner) other(name []byte, names []string, depth int) bool {
	for _, n := range names {
		if fastFoldEq(name, n) {
			return false
		}
	}
	return s.skip(depth)
}

// fastFoldEq is bytes.EqualFold for ASCII a and b.
func fastFoldEq(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// mark records member bit in f.seen; false if it was read before.
func (f *fastFrame) mark(bit uint32) bool {
	if f.seen&bit != 0 {
		return false
	}
	f.seen |= bit
	return true
}

// exact reads a string and checks its raw contents are want.
func (s *fastScanner) exact(want string) bool {
	sp, ok := s.str()
	return ok && string(s.b[sp.start:sp.end]) == want
}

// members reads an object, calling member with each name and the scanner
// at its value; member reads the value, or returns false to decline the
// frame. An empty object is accepted only with emptyOK.
func (s *fastScanner) members(emptyOK bool, member func(name []byte) bool) bool {
	empty, ok := s.open('{')
	if !ok || empty {
		return ok && emptyOK
	}
	for {
		name, ok := s.key()
		if !ok || !member(name) {
			return false
		}
		if more, ok := s.next('}'); !ok || !more {
			return ok
		}
	}
}

// envelope reads the frame's object.
func (s *fastScanner) envelope(f *fastFrame) bool {
	ok := s.members(false, func(name []byte) bool {
		switch string(name) {
		case "type":
			return f.mark(fastSeenType) && s.exact("event")
		case "seq":
			num, ok := s.number()
			if !ok || !f.mark(fastSeenSeq) {
				return false
			}
			f.seq, ok = fastUint(num)
			f.hasSeq = true
			return ok
		case "method":
			if !f.mark(fastSeenMethod) {
				return false
			}
			sp, ok := s.str()
			switch {
			case !ok:
				return false
			case string(s.b[sp.start:sp.end]) == methodMessages:
				f.method = fastMessages
			case string(s.b[sp.start:sp.end]) == methodValues && f.seen&fastSeenParams == 0:
				f.method = fastValues
			default:
				f.method = fastOther
			}
			f.name = sp
			return true
		case "params":
			return f.mark(fastSeenParams) && s.params(f)
		}
		return s.other(name, fastEnvelopeNames, 1)
	})
	s.ws()
	return ok
}

// params reads the envelope's params object.
func (s *fastScanner) params(f *fastFrame) bool {
	return s.members(true, func(name []byte) bool {
		switch string(name) {
		case "namespace":
			return f.mark(fastSeenNamespace) && s.namespace(f)
		case "timestamp":
			num, ok := s.number()
			if !ok || !f.mark(fastSeenTimestamp) {
				return false
			}
			f.ts, ok = fastFloat(num)
			f.hasTS = true
			return ok
		case "node":
			if !f.mark(fastSeenNode) {
				return false
			}
			var ok bool
			f.node, ok = s.str()
			f.hasNode = true
			return ok
		case "data":
			if !f.mark(fastSeenData) {
				return false
			}
			s.ws()
			start := s.pos
			var ok bool
			switch f.method {
			case fastValues:
				f.values, ok = s.value(2)
			case fastOther:
				ok = s.skip(2)
			default: // messages, or a method not read yet
				seen := f.seen
				if ok = s.data(f); !ok { // not a delta: read it over as any value
					s.pos, f.seen, f.dtype, f.hasField = start, seen, -1, [fastFields]bool{}
					ok = s.skip(2)
				}
			}
			f.data = fastSpan{start: start, end: s.pos}
			return ok
		}
		return s.other(name, fastParamsNames, 2)
	})
}

// namespace reads the namespace array of strings.
func (s *fastScanner) namespace(f *fastFrame) bool {
	empty, ok := s.open('[')
	if !ok || empty {
		return ok
	}
	for {
		if f.nsN == fastMaxNamespace {
			return false
		}
		sp, ok := s.str()
		if !ok {
			return false
		}
		if _, plain := fastPlain(s.b, sp); !plain {
			return false
		}
		f.ns[f.nsN] = sp
		f.nsN++
		if more, ok := s.next(']'); !ok || !more {
			return ok
		}
		s.ws()
	}
}

// data reads a content-block-delta's data object.
func (s *fastScanner) data(f *fastFrame) bool {
	return s.members(false, func(name []byte) bool {
		switch string(name) {
		case "event":
			return f.mark(fastSeenEvent) && s.exact("content-block-delta")
		case "index":
			num, ok := s.number()
			if !ok || !f.mark(fastSeenIndex) {
				return false
			}
			f.index, ok = fastInt(num)
			return ok
		case "delta":
			return f.mark(fastSeenDelta) && s.delta(f)
		}
		return s.other(name, fastDataNames, 3)
	})
}

// delta reads the delta object: its type and the four text fields.
func (s *fastScanner) delta(f *fastFrame) bool {
	return s.members(false, func(name []byte) bool {
		field := -1
		switch string(name) {
		case "type":
			if !f.mark(fastSeenDeltaType) {
				return false
			}
			sp, ok := s.str()
			if !ok {
				return false
			}
			switch string(s.b[sp.start:sp.end]) {
			case "text-delta":
				f.dtype = fastText
			case "reasoning-delta":
				f.dtype = fastReasoning
			case "tool-call-delta":
				f.dtype = fastArgs
			case "data-delta":
				f.dtype = fastData
			default:
				return false
			}
			return true
		case "text":
			field = fastText
		case "reasoning":
			field = fastReasoning
		case "args":
			field = fastArgs
		case "data":
			field = fastData
		default:
			return s.other(name, fastDeltaNames, 4)
		}
		if f.hasField[field] {
			return false
		}
		var ok bool
		f.fields[field], ok = s.str()
		f.hasField[field] = true
		return ok
	})
}

// value reads any value as the structpb value encoding/json (into an
// any) and structpb.NewValue make of it: strings unquoted as encoding/json
// does, numbers float64, a repeated member's last value. It declines
// nesting past fastMaxDepth and a number float64 cannot hold (an error
// there).
func (s *fastScanner) value(depth int) (*structpb.Value, bool) {
	s.ws()
	switch c := s.peek(); {
	case c == '"':
		sp, ok := s.str()
		if !ok {
			return nil, false
		}
		return structpb.NewStringValue(s.text(sp)), true
	case c == '{':
		if depth >= fastMaxDepth {
			return nil, false
		}
		empty, ok := s.open('{')
		if !ok {
			return nil, false
		}
		fields := map[string]*structpb.Value{}
		for !empty {
			sp, ok := s.anyKey()
			if !ok {
				return nil, false
			}
			v, ok := s.value(depth + 1)
			if !ok {
				return nil, false
			}
			fields[s.text(sp)] = v
			more, ok := s.next('}')
			if !ok {
				return nil, false
			}
			empty = !more
		}
		return structpb.NewStructValue(&structpb.Struct{Fields: fields}), true
	case c == '[':
		if depth >= fastMaxDepth {
			return nil, false
		}
		empty, ok := s.open('[')
		if !ok {
			return nil, false
		}
		var list []*structpb.Value
		for !empty {
			v, ok := s.value(depth + 1)
			if !ok {
				return nil, false
			}
			list = append(list, v)
			more, ok := s.next(']')
			if !ok {
				return nil, false
			}
			empty = !more
		}
		return structpb.NewListValue(&structpb.ListValue{Values: list}), true
	case c == '-', '0' <= c && c <= '9':
		num, ok := s.number()
		if !ok {
			return nil, false
		}
		f, ok := fastFloat(num)
		return structpb.NewNumberValue(f), ok
	case c == 't', c == 'f', c == 'n':
		if !s.literal() {
			return nil, false
		}
		if c == 'n' {
			return structpb.NewNullValue(), true
		}
		return structpb.NewBoolValue(c == 't'), true
	}
	return nil, false
}

// text is a string's value, its raw contents when they hold no escape
// and are valid UTF-8.
func (s *fastScanner) text(sp fastSpan) string {
	raw := s.b[sp.start:sp.end]
	if !sp.backslash && (!sp.high || utf8.Valid(raw)) {
		return string(raw)
	}
	return string(jsonw.Unquote(nil, raw))
}

// fastUint parses a JSON number as encoding/json does for a uint64:
// digits only; longer numbers, which might overflow, are declined.
func fastUint(num []byte) (uint64, bool) {
	if len(num) == 0 || len(num) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// fastInt parses a JSON number as encoding/json does for an int64: an
// optional minus and digits; longer numbers, which might overflow, are
// declined.
func fastInt(num []byte) (int64, bool) {
	neg := len(num) > 0 && num[0] == '-'
	if neg {
		num = num[1:]
	}
	if len(num) == 0 || len(num) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// fastFloat parses a JSON number as encoding/json does for a float64
// (strconv.ParseFloat; out of range is an error).
func fastFloat(num []byte) (float64, bool) {
	if n, ok := fastUint(num); ok && len(num) <= 15 {
		return float64(n), true // exact: below 2^53
	}
	f, err := strconv.ParseFloat(string(num), 64)
	return f, err == nil
}
