package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// A thread is saved at the end of every run, and beside it after each
// step (saveSoon), as records of the thread store: the head (the thread's
// values, its whole history, once) and one record per checkpoint, each
// written once. json.Marshal validated and compacted every copy of the
// values again, byte by byte through its scanner: 7% of the process's CPU
// in an unpaced agent-to-agent benchmark whose threads held a few long
// messages. The records are written here instead, in json.Marshal's very
// bytes (TestEncodeRecordMatchesMarshal), each distinct raw value
// compacted once per save (new checkpoints share their values' arrays with
// the head) by appendCompact, which relies on what this package keeps in
// values: valid JSON (it writes it, or decodes it with encoding/json).

// The thread store keys of a thread's records.
const headKey = "agent"

// checkpointKey is a checkpoint's record key: its id (an agent backend's
// own, any string) encoded as one key token.
func checkpointKey(id string) string { return "agent.ckpt." + subject.Key(id) }

// readRecord reads a thread's head record and the checkpoints it lists,
// but those in skip (the caller has them). It returns a nil record for a
// thread the store does not hold (rev 0) or whose head is unreadable (rev
// its revision: a save replaces it).
func readRecord(ctx context.Context, store canonical.ThreadStore, thread string, skip map[string]bool, log *slog.Logger) (*threadRecord, uint64, error) {
	head, rev, err := store.Get(ctx, thread, headKey)
	if canonical.CodeOf(err) == canonical.CodeNotFound {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	rec := decodeHead(head, thread, log)
	if rec == nil {
		return nil, rev, nil
	}
	if err := readCheckpoints(ctx, store, rec, skip, log); err != nil {
		return nil, 0, err
	}
	return rec, rev, nil
}

// decodeHead decodes a head record; nil (logged) when unreadable.
func decodeHead(head []byte, thread string, log *slog.Logger) *threadRecord {
	rec := &threadRecord{}
	if err := json.Unmarshal(head, rec); err != nil || rec.Version != stateVersion {
		log.Warn("thread record unreadable; starting afresh", "thread", thread, "err", err)
		return nil
	}
	return rec
}

// readCheckpoints reads the checkpoints rec lists, but those in skip, into
// rec.Checkpoints. A listed checkpoint the store lacks (it expired, or
// another instance let it go meanwhile) or cannot decode is left out.
func readCheckpoints(ctx context.Context, store canonical.ThreadStore, rec *threadRecord, skip map[string]bool, log *slog.Logger) error {
	for _, id := range rec.CheckpointIDs {
		if skip[id] {
			continue
		}
		b, _, err := store.Get(ctx, rec.Thread, checkpointKey(id))
		if canonical.CodeOf(err) == canonical.CodeNotFound {
			log.Debug("a listed checkpoint is not in the store", "thread", rec.Thread, "checkpoint", id)
			continue
		}
		if err != nil {
			return err
		}
		cp := checkpointRec{saved: true}
		if err := json.Unmarshal(b, &cp); err != nil {
			log.Warn("checkpoint record unreadable; left out", "thread", rec.Thread, "checkpoint", id, "err", err)
			continue
		}
		cp.Values = nil // read back when a fork needs them (checkpointValuesLocked)
		rec.Checkpoints = append(rec.Checkpoints, cp)
	}
	return nil
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

// rest appends rec as its head record, as json.Marshal writes
// threadRecord (fields in declaration order, omitempty ones left out when
// empty; the checkpoints by id).
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
	if len(rec.CheckpointIDs) > 0 {
		b = append(b, `,"checkpoints":[`...)
		for i, id := range rec.CheckpointIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMarshalString(b, id)
		}
		b = append(b, ']')
	}
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
	n := 256 + 16*len(rec.CheckpointIDs)
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
