package sse

import (
	"bytes"
	"math"
)

// DefaultMaxEventBytes is the MaxEventBytes a Parser uses when the field is
// zero or negative: 4 MiB.
const DefaultMaxEventBytes = 4 << 20

// maxCachedType is the longest event type a Parser remembers to reuse its
// string for the next event of the same type.
const maxCachedType = 64

var bom = [3]byte{0xEF, 0xBB, 0xBF}

// Event is one event a Parser dispatched, or, with Parser.KeepComments, one
// comment line.
type Event struct {
	// ID is the stream's last event ID when the event was dispatched, as
	// EventSource's lastEventId reports it: the value of the latest id
	// field, in this event's block or an earlier one ("" before any).
	ID string
	// HasID reports whether this event's own block had an id field (an
	// empty "id:" field sets it and resets ID to "").
	HasID bool
	// Event is the event field's value, "" when the block had none.
	Event string
	// Data is the block's data field values joined with LF. It is never
	// nil for an event and belongs to the caller (unless the Parser
	// borrows: see Parser.BorrowData).
	Data []byte
	// Retry is the value of the last valid retry field in this event's
	// block, in milliseconds, 0 when it had none (see Parser.Retry).
	Retry int
	// Comment is a comment line's text after the colon, with one leading
	// space removed.
	Comment string
	// IsComment reports that this is a comment, not an event.
	IsComment bool
}

// Parser is an incremental text/event-stream parser following the
// WHATWG EventSource rules: one per stream, fed chunks cut at any byte. The
// zero value is ready to use; set the fields before the first Feed.
//
// An event is dispatched at the blank line that ends its block, and only if
// the block had at least one data field (a block with only id or retry
// fields updates LastEventID or Retry and dispatches nothing). Unknown
// fields, ids containing NUL and retry values that are not all ASCII
// digits are ignored.
//
// After an error every later Feed and End returns it; after End, Feed and
// End return an error. A Parser is not safe for concurrent use.
type Parser struct {
	// MaxEventBytes bounds the bytes the parser holds at once: the line
	// being read plus the pending event's data, event type and the last
	// event ID. Zero or negative means DefaultMaxEventBytes.
	MaxEventBytes int
	// KeepComments makes the parser return each comment line (a line
	// starting with ':', such as a heartbeat) as an Event with IsComment
	// set, in stream order. By default comments are dropped.
	KeepComments bool
	// DispatchIncompleteAtEnd makes End treat the end of the stream as the
	// blank line that would end the last event: a trailing line without
	// line end is processed, and a pending event is dispatched. By default
	// End discards them, as the standard says; set it for upstreams that
	// omit the final blank line.
	DispatchIncompleteAtEnd bool
	// BorrowData saves copying each event's data: an event's Data may
	// alias the chunk fed or a buffer of the parser, and is valid only
	// until the next call to Feed or End (and while the chunk is not
	// changed). For callers that are done with the events before feeding
	// more, as a decoder that turns each into its own types at once is.
	BorrowData bool

	line      []byte // start of a line cut by the chunk's end, copied
	alias     []byte // BorrowData: the pending block's one data value, in the chunk
	data      []byte // pending data buffer: each value followed by LF
	eventType string // pending event type buffer
	typeCache string // last event type allocated, reused if repeated
	id        string // last event ID buffer; survives dispatch
	blockID   bool   // the pending block had an id field
	blockRty  int    // the pending block's last valid retry
	retry     int    // the stream's reconnection time
	retrySet  bool
	lastCR    bool  // the previous chunk ended in CR: skip one leading LF
	bomN      uint8 // BOM bytes matched at the start of the stream
	bomDone   bool  // past the point where a BOM could be
	ended     bool
	err       error
}

// Feed parses chunk, which may end anywhere (inside a line, a CRLF or a
// UTF-8 sequence), and appends the events it completes to out. It does not
// keep chunk. On error it returns the events completed before the error
// with a *LimitError, or an error if the Parser has ended.
func (p *Parser) Feed(chunk []byte, out []Event) ([]Event, error) {
	if p.err != nil {
		return out, p.err
	}
	if p.ended {
		return out, errEnded
	}
	if !p.bomDone {
		for len(chunk) > 0 && p.bomN < 3 && chunk[0] == bom[p.bomN] {
			p.bomN++
			chunk = chunk[1:]
		}
		switch {
		case p.bomN == 3:
			p.bomDone = true
		case len(chunk) == 0:
			return out, nil // all of it could still be a BOM
		default: // not a BOM: what matched so far is content
			p.bomDone = true
			var err error
			if out, err = p.scan(bom[:p.bomN], out); err != nil {
				return out, err
			}
		}
	}
	return p.scan(chunk, out)
}

// End ends the stream and appends what it still owes: nothing by default,
// since the standard discards an event whose blank line never came; with
// DispatchIncompleteAtEnd, the last event. It returns a nil error unless
// the stream had already failed or ended.
func (p *Parser) End(out []Event) ([]Event, error) {
	if p.err != nil {
		return out, p.err
	}
	if p.ended {
		return out, errEnded
	}
	if !p.bomDone {
		p.bomDone = true
		var err error
		if out, err = p.scan(bom[:p.bomN], out); err != nil {
			return out, err
		}
	}
	p.ended = true
	if p.DispatchIncompleteAtEnd {
		if len(p.line) > 0 {
			out = p.processLine(p.line, false, out)
		}
		out = p.dispatch(out)
	}
	p.line, p.data = nil, nil
	return out, nil
}

// LastEventID returns the stream's last event ID: the value of the latest
// id field, whether or not its block was dispatched. A client reconnecting
// sends it as Last-Event-ID.
func (p *Parser) LastEventID() string { return p.id }

// Retry returns the stream's reconnection time in milliseconds as the
// latest valid retry field set it, whether or not its block was
// dispatched, and whether any did.
func (p *Parser) Retry() (ms int, ok bool) { return p.retry, p.retrySet }

func (p *Parser) limit() int {
	if p.MaxEventBytes <= 0 {
		return DefaultMaxEventBytes
	}
	return p.MaxEventBytes
}

// held returns the bytes of the pending event and last event ID. A
// borrowed data value counts as it will once copied, with its LF, so the
// limit does not depend on where the chunks end.
func (p *Parser) held() int {
	n := len(p.data) + len(p.eventType) + len(p.id)
	if p.alias != nil {
		n += len(p.alias) + 1
	}
	return n
}

// buffered returns all the peer bytes the parser holds; tests check it
// never exceeds the limit.
func (p *Parser) buffered() int { return p.held() + len(p.line) }

// checkLimit fails if a line of n bytes (so far) does not fit beside what
// the parser holds. Since the held bytes do not change while a line is
// being read, it fails for a cut line iff it fails for the whole line, so
// the outcome does not depend on chunking.
func (p *Parser) checkLimit(n int) error {
	limit := p.limit()
	switch {
	case n > limit:
		p.err = &LimitError{Limit: limit, What: "line", Size: n}
	case p.held()+n > limit:
		p.err = &LimitError{Limit: limit, What: "event", Size: p.held() + n}
	default:
		return nil
	}
	return p.err
}

// scan splits chunk into lines and processes them. Each byte is searched
// for CR and for LF at most once, so a chunk of CR-only line ends is not
// scanned quadratically.
func (p *Parser) scan(chunk []byte, out []Event) ([]Event, error) {
	if len(chunk) == 0 {
		return out, nil
	}
	pos := 0
	if p.lastCR {
		p.lastCR = false
		if chunk[0] == '\n' {
			pos = 1
		}
	}
	lf, cr := -1, -1 // next LF and CR at or after pos; len(chunk) if none
	for pos < len(chunk) {
		if lf < pos {
			lf = indexFrom(chunk, pos, '\n')
		}
		if cr < pos {
			cr = indexFrom(chunk, pos, '\r')
		}
		end := min(lf, cr)
		if end == len(chunk) { // no line end: keep the start of the line
			rest := chunk[pos:]
			if err := p.checkLimit(len(p.line) + len(rest)); err != nil {
				return out, err
			}
			p.line = append(p.line, rest...)
			break
		}
		line := chunk[pos:end]
		if err := p.checkLimit(len(p.line) + len(line)); err != nil {
			return out, err
		}
		inChunk := len(p.line) == 0
		if !inChunk {
			p.line = append(p.line, line...)
			line = p.line
		}
		out = p.processLine(line, inChunk, out)
		p.line = p.line[:0]
		if cap(p.line) > maxKeptBuffer {
			p.line = nil
		}
		pos = end + 1
		if chunk[end] == '\r' {
			if pos == len(chunk) {
				p.lastCR = true
			} else if chunk[pos] == '\n' {
				pos++
			}
		}
	}
	p.unalias() // the chunk is the caller's again
	return out, nil
}

// unalias copies a borrowed data value into the data buffer.
func (p *Parser) unalias() {
	if p.alias != nil {
		p.data = append(append(p.data, p.alias...), '\n')
		p.alias = nil
	}
}

// indexFrom returns the index of c in b at or after from, or len(b).
func indexFrom(b []byte, from int, c byte) int {
	if i := bytes.IndexByte(b[from:], c); i >= 0 {
		return from + i
	}
	return len(b)
}

// processLine interprets one line without its line end; inChunk says
// the line lies in the chunk being fed (not in the parser's line buffer).
func (p *Parser) processLine(line []byte, inChunk bool, out []Event) []Event {
	if len(line) == 0 {
		return p.dispatch(out)
	}
	colon := bytes.IndexByte(line, ':')
	if colon == 0 {
		if p.KeepComments {
			out = append(out, Event{Comment: string(trimSpace(line[1:])), IsComment: true})
		}
		return out
	}
	name, value := line, []byte(nil)
	if colon > 0 {
		name, value = line[:colon], trimSpace(line[colon+1:])
	}
	switch string(name) {
	case "data":
		if p.BorrowData && inChunk && len(p.data) == 0 && p.alias == nil && len(value) > 0 {
			p.alias = value // the block's only value so far: no copy yet
			break
		}
		p.unalias()
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
	case "event":
		if string(value) != p.typeCache {
			s := string(value)
			if len(s) <= maxCachedType {
				p.typeCache = s
			}
			p.eventType = s
		} else {
			p.eventType = p.typeCache
		}
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			if string(value) != p.id {
				p.id = string(value)
			}
			p.blockID = true
		}
	case "retry":
		if ms, ok := parseRetry(value); ok {
			p.blockRty, p.retry, p.retrySet = ms, ms, true
		}
	}
	return out
}

// trimSpace removes one leading space, as the standard does for values.
func trimSpace(b []byte) []byte {
	if len(b) > 0 && b[0] == ' ' {
		return b[1:]
	}
	return b
}

// parseRetry parses a non-empty run of ASCII digits, clamped to
// math.MaxInt32.
func parseRetry(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = min(n*10+int(c-'0'), math.MaxInt32)
	}
	return n, true
}

// dispatch ends the pending block: it appends an event if the data buffer
// is not empty and resets the block's buffers (not the last event ID).
func (p *Parser) dispatch(out []Event) []Event {
	if p.alias != nil || len(p.data) > 0 {
		var data []byte
		switch {
		case p.alias != nil:
			data, p.alias = p.alias, nil
		case p.BorrowData: // the buffer goes with the event
			data = p.data[: len(p.data)-1 : len(p.data)-1]
			p.data = nil
		default:
			d := p.data[:len(p.data)-1] // drop the LF after the last value
			data = make([]byte, len(d))
			copy(data, d)
		}
		out = append(out, Event{
			ID:    p.id,
			HasID: p.blockID,
			Event: p.eventType,
			Data:  data,
			Retry: p.blockRty,
		})
	}
	p.data = p.data[:0]
	if cap(p.data) > maxKeptBuffer {
		p.data = nil
	}
	p.eventType, p.blockID, p.blockRty = "", false, 0
	return out
}
