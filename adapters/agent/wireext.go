package agent

import (
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// The wire extension (wireExt) holds an event's agent-protocol wire
// events as one string: each a sequence of fields, each its length in
// decimal, a colon, then its text (a netstring without the comma). A
// string, not a structpb list of objects: every event of an agent run
// carries one, and the objects' maps were a fifth of an agent-to-agent
// benchmark's CPU, decoding the replay log's messages. Every field is
// UTF-8 (the event's strings, and JSON the encoder wrote), as a proto
// string must be.
//
// A wire event's fields, in order: flags (wireHasData, wireHasRef,
// wireHasNode, wireHasNS), the timestamp (ms), skip, method, custom name,
// status, then those the flags name: node, namespace (a JSON array),
// ref (the checkpoint of a values event without data), data. Node and
// namespace are written only where they are not the event's.
const (
	wireHasData = 1 << iota
	wireHasRef
	wireHasNode
	wireHasNS
)

// wireList is ws as wireExt holds them; ref is the checkpoint of a
// values event whose data is left out.
func wireList(ws []wireEvent, ev *canonical.Event, ref string) *structpb.Value {
	// Sized once for the fields (the integers and lengths take at most
	// wireFixed): every delta of an agent run makes one, and growing from
	// nil took six allocations of a delta's nine.
	size := len(ref)
	for i := range ws {
		w := &ws[i]
		size += wireFixed + len(w.method) + len(w.custom) + len(w.status) + len(w.node) + len(w.data) + 8*len(w.namespace)
		for _, n := range w.namespace {
			size += len(n)
		}
	}
	// Written into a Builder grown once, whose String is the array it
	// wrote (a []byte's string() copied it: a fifth of an agent delta's
	// bytes allocated).
	var b strings.Builder
	b.Grow(size)
	for i := range ws {
		w := &ws[i]
		flags := 0
		switch {
		case w.data != nil:
			flags |= wireHasData
		case ref != "":
			flags |= wireHasRef
		}
		if w.node != ev.GetGraphNode() {
			flags |= wireHasNode
		}
		if !slices.Equal(w.namespace, ev.GetNamespace()) {
			flags |= wireHasNS
		}
		writeWireInt(&b, int64(flags))
		writeWireInt(&b, w.timeMs)
		writeWireInt(&b, int64(w.skip))
		writeWireField(&b, w.method)
		writeWireField(&b, w.custom)
		writeWireField(&b, w.status)
		if flags&wireHasNode != 0 {
			writeWireField(&b, w.node)
		}
		if flags&wireHasNS != 0 {
			writeWireBytes(&b, appendJSON(nil, w.namespace))
		}
		if flags&wireHasRef != 0 {
			writeWireField(&b, ref)
		}
		if flags&wireHasData != 0 {
			writeWireBytes(&b, w.data)
		}
	}
	return structpb.NewStringValue(b.String())
}

// wireFixed is about what a wire event's fields take besides their texts:
// three integers (a timestamp's 13 digits) and each field's length and
// colon. More only grows the array.
const wireFixed = 3 + 13 + 3 + 10*4

func writeWireField(b *strings.Builder, s string) {
	writeWireLen(b, len(s))
	b.WriteString(s)
}

func writeWireBytes(b *strings.Builder, p []byte) {
	writeWireLen(b, len(p))
	b.Write(p)
}

func writeWireLen(b *strings.Builder, n int) {
	var digits [20]byte
	b.Write(strconv.AppendInt(digits[:0], int64(n), 10))
	b.WriteByte(':')
}

func writeWireInt(b *strings.Builder, n int64) {
	var digits [20]byte
	writeWireBytes(b, strconv.AppendInt(digits[:0], n, 10))
}

// wireReader reads wireList's fields; ok turns false at the first field
// that is not one.
type wireReader struct {
	s  string
	ok bool
}

func (r *wireReader) field() string {
	i := strings.IndexByte(r.s, ':')
	n, err := strconv.Atoi(r.s[:max(i, 0)])
	if i < 0 || err != nil || n < 0 || n > len(r.s)-i-1 {
		r.ok, r.s = false, ""
		return ""
	}
	f := r.s[i+1 : i+1+n]
	r.s = r.s[i+1+n:]
	return f
}

func (r *wireReader) int() int64 {
	n, err := strconv.ParseInt(r.field(), 10, 64)
	if err != nil {
		r.ok = false
	}
	return n
}

// wireRecords appends the agent-protocol events ev carries (wireExt, the
// agent runtime's encoding) to out, framed with ev's seq: one record each,
// its frame ready to send, but for a values event whose state is its
// checkpoint's (ref set, frame nil: the reader reads the record). An
// event the runtime made no frame of carries none; one the extension of
// which does not read is left out.
func wireRecords(ev *canonical.Event, out []record) []record {
	r := wireReader{s: ev.GetExtensions()[wireExt].GetStringValue(), ok: true}
	for r.ok && r.s != "" {
		flags := r.int()
		w := wireEvent{namespace: ev.GetNamespace(), node: ev.GetGraphNode(), timeMs: r.int(), skip: int(r.int()),
			method: r.field(), custom: r.field(), status: r.field()}
		if w.namespace == nil {
			w.namespace = []string{}
		}
		if flags&wireHasNode != 0 {
			w.node = r.field()
		}
		if flags&wireHasNS != 0 {
			var ns []string // not into the event's array
			if json.Unmarshal([]byte(r.field()), &ns) != nil || ns == nil {
				r.ok = false
			}
			w.namespace = ns
		}
		rec := record{seq: ev.GetSeq(), method: w.method, custom: w.custom, ns: w.namespace, run: ev.GetRunId(), status: w.status}
		if flags&wireHasRef != 0 {
			held := w // on the heap for this record only: a delta's frame is written at once
			rec.ref, rec.wire = r.field(), &held
		} else {
			data := ""
			if flags&wireHasData != 0 {
				data = r.field()
			}
			rec.frame = frameWith(ev.GetSeq(), &w, data)
		}
		if !r.ok {
			break
		}
		out = append(out, rec)
	}
	return out
}
