package agent

import (
	"encoding/json"
	"strconv"
	"time"
)

// A thread record is saved at the end of every run, with the thread's
// values (its whole history) in it once and once more in each checkpoint
// a save encodes for the first time. json.Marshal validated and compacted
// every one of those copies again, byte by byte through its scanner: 7%
// of the process's CPU in an unpaced agent-to-agent benchmark whose
// threads held a few long messages. The record is written here instead, in json.Marshal's
// very bytes (TestEncodeRecordMatchesMarshal), each distinct raw value
// compacted once per save (the checkpoints share their values' arrays with
// the record) by appendCompact, which relies on what this package keeps
// in values: valid JSON (it writes it, or decodes it with encoding/json).

// encodeRecord is the JSON of rec, with "checkpoints" first. Each
// checkpoint is encoded once, the first time a save needs it, and kept in
// rec.Checkpoints (the thread's own array: the caller holds t.mu): every
// checkpoint holds a full copy of the values, and encoding them all anew
// on every save made a save cost the thread's history times its
// checkpoints (about 600 KB after five runs of 5,000 deltas).
func encodeRecord(rec *threadRecord) ([]byte, error) {
	var w recordWriter
	cps := rec.Checkpoints
	size := len(`{"checkpoints":[],`)
	for i := range cps {
		if cps[i].enc == nil {
			b, err := w.checkpoint(nil, &cps[i])
			if err != nil {
				return nil, err
			}
			cps[i].enc = b
		}
		size += len(cps[i].enc) + 1
	}
	body, err := w.rest(make([]byte, 0, w.restSize(rec)), rec)
	if err != nil || len(cps) == 0 {
		return body, err
	}
	out := make([]byte, 0, size+len(body))
	out = append(out, `{"checkpoints":[`...)
	for i := range cps {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, cps[i].enc...)
	}
	out = append(out, "],"...)
	return append(out, body[1:]...), nil // body is {"v":...}: never empty
}

// recordWriter writes a record's parts. It remembers the values it
// compacted, by array, so a value shared by the record and its
// checkpoints is compacted once.
type recordWriter struct {
	seen map[rawKey][]byte
}

// rawKey identifies a raw value's bytes.
type rawKey struct {
	first *byte
	n     int
}

// rest appends rec without its checkpoints, as json.Marshal writes
// threadRecord (fields in declaration order, omitempty ones left out when
// empty).
func (w *recordWriter) rest(b []byte, rec *threadRecord) ([]byte, error) {
	b = strconv.AppendInt(append(b, `{"v":`...), int64(rec.Version), 10)
	b = appendMarshalString(append(b, `,"thread_id":`...), rec.Thread)
	if rec.Assistant != "" {
		b = appendMarshalString(append(b, `,"assistant_id":`...), rec.Assistant)
	}
	b = strconv.AppendUint(append(b, `,"seq":`...), rec.Seq, 10)
	if rec.Agent {
		b = append(b, `,"agent":true`...)
	}
	b = w.values(append(b, `,"values":`...), rec.Values)
	if rec.Head != "" {
		b = appendMarshalString(append(b, `,"head":`...), rec.Head)
	}
	b = strconv.AppendUint(append(b, `,"next_checkpoint":`...), rec.NextCkpt, 10)
	if len(rec.Interrupts) > 0 {
		b = append(b, `,"interrupts":[`...)
		for i := range rec.Interrupts {
			if i > 0 {
				b = append(b, ',')
			}
			b = w.interrupt(b, &rec.Interrupts[i])
		}
		b = append(b, ']')
	}
	b = appendMarshalString(append(b, `,"status":`...), rec.Status)
	b = strconv.AppendUint(append(b, `,"runs":`...), rec.Runs, 10)
	if rec.LastRun != "" {
		b = appendMarshalString(append(b, `,"last_run":`...), rec.LastRun)
	}
	b, err := appendTime(append(b, `,"updated":`...), rec.Updated)
	return append(b, '}'), err
}

// restSize is about the length of rest's output.
func (w *recordWriter) restSize(rec *threadRecord) int {
	n := 256
	for k, v := range rec.Values {
		n += len(k) + len(v) + 4
	}
	return n
}

// checkpoint appends cp as json.Marshal writes checkpointRec.
func (w *recordWriter) checkpoint(b []byte, cp *checkpointRec) ([]byte, error) {
	b = appendMarshalString(append(b, `{"id":`...), cp.ID)
	if cp.Parent != "" {
		b = appendMarshalString(append(b, `,"parent_id":`...), cp.Parent)
	}
	b = strconv.AppendInt(append(b, `,"step":`...), cp.Step, 10)
	b = appendMarshalString(append(b, `,"source":`...), cp.Source)
	if cp.Node != "" {
		b = appendMarshalString(append(b, `,"node":`...), cp.Node)
	}
	b, err := appendTime(append(b, `,"time":`...), cp.Time)
	b = w.values(append(b, `,"values":`...), cp.Values)
	return append(b, '}'), err
}

// interrupt appends in as json.Marshal writes interruptRec.
func (w *recordWriter) interrupt(b []byte, in *interruptRec) []byte {
	b = appendMarshalString(append(b, `{"id":`...), in.ID)
	b = append(b, `,"namespace":`...)
	if in.Namespace == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range in.Namespace {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMarshalString(b, s)
		}
		b = append(b, ']')
	}
	b = w.raw(append(b, `,"payload":`...), in.Payload)
	b = appendMarshalString(append(b, `,"run":`...), in.Run)
	return append(b, '}')
}

// values appends a map of raw values as json.Marshal does: null when nil,
// keys sorted.
func (w *recordWriter) values(b []byte, m map[string]json.RawMessage) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	return appendMarshalObject(b, m, w.raw)
}

// raw appends a raw value as json.Marshal does (null when nil), compacting
// each array of bytes once. An empty one, which json.Marshal refuses and
// this package never stores, is written null too: the record stays JSON.
func (w *recordWriter) raw(b []byte, v json.RawMessage) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	if len(v) < 64 { // not worth remembering
		return appendCompact(b, v)
	}
	k := rawKey{&v[0], len(v)}
	if c, ok := w.seen[k]; ok {
		return append(b, c...)
	}
	start := len(b)
	b = appendCompact(b, v)
	if w.seen == nil {
		w.seen = map[rawKey][]byte{}
	}
	w.seen[k] = b[start:len(b):len(b)]
	return b
}

// appendTime appends t as its MarshalJSON does.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	j, err := t.MarshalJSON()
	return append(b, j...), err
}

// compactByte says what appendCompact does with a byte outside a string
// (compactSpace: drops it; compactQuote: a string starts) and inside one
// (compactEscape: the next byte is escaped; compactQuote: the string ends;
// compactHTML: writes it escaped; compactLineSep: may start U+2028 or
// U+2029, which it writes escaped).
var compactByte = func() (t [2][256]uint8) {
	const out, in = 0, 1
	for _, c := range " \t\n\r" {
		t[out][c] = compactSpace
	}
	t[out]['"'], t[in]['"'] = compactQuote, compactQuote
	t[in]['\\'] = compactEscape
	for _, c := range "<>&" {
		t[in][c] = compactHTML
	}
	t[in][0xE2] = compactLineSep
	return t
}()

const (
	compactPlain = iota
	compactSpace
	compactQuote
	compactEscape
	compactHTML
	compactLineSep
)

// appendCompact appends raw, valid JSON, as json.Marshal writes a
// json.RawMessage: without the whitespace between tokens, and with <, >,
// & and U+2028 and U+2029 in strings escaped (\u003c, ...). It does not
// check raw is valid: json.Marshal's scan of that, byte by byte, was most
// of the cost.
func appendCompact(b, raw []byte) []byte {
	const hex = "0123456789abcdef"
	state, start := 0, 0 // state 1: in a string
	for i := 0; i < len(raw); i++ {
		switch compactByte[state][raw[i]] {
		case compactPlain:
			continue
		case compactSpace:
			b = append(b, raw[start:i]...)
			start = i + 1
		case compactQuote:
			state ^= 1
		case compactEscape:
			i++ // the escaped byte, whatever it is
		case compactHTML:
			c := raw[i]
			b = append(append(b, raw[start:i]...), '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			start = i + 1
		case compactLineSep:
			if i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8 {
				b = append(append(b, raw[start:i]...), '\\', 'u', '2', '0', '2', hex[raw[i+2]&0xF])
				i += 2
				start = i + 1
			}
		}
	}
	return append(b, raw[start:]...)
}
