package agent

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// record is one agent-protocol event of a thread, framed with its seq:
// what filters look at, and the frame to send.
type record struct {
	seq    uint64
	method string
	custom string
	ns     []string
	frame  []byte
	// run and status of a lifecycle event.
	run, status string
	// ref, for a values event whose state is its checkpoint's
	// (wireRecords), names the checkpoint; frame is nil and wire is the
	// event to frame once the state is read (stateFrames).
	ref  string
	wire *wireEvent
}

// gap reports that a reader asked for events the replay log no longer
// holds: delivery resumes from the oldest it holds.
type gap struct {
	since    uint64 // the reader's position
	minAvail uint64 // the oldest seq the log holds
}

// readBatch is how many canonical events a reader takes at a time.
const readBatch = 256

// tailReader reads a thread's agent-protocol events from the bridge's
// replay log (canonical.Observer) for one stream or WebSocket: the frames
// the agent runtime made for each event (wireRecords), with the states
// the large values events name read back. It is read by one goroutine at
// a time, which polls it: notify is called when it has news.
type tailReader struct {
	f      *Frontend
	ctx    context.Context
	thread string
	obs    canonical.Poller
	notify func()
	// at is the seq of the last event read (matched or not).
	at uint64
	// lapsed is set when the log no longer held what came after at: the
	// reader reopened from the log's start, and the first event read
	// tells the gap's end.
	lapsed bool
	// more is set by a read that stopped at readLimit events.
	more bool
	// enc encodes the events the runtime did not (encode); nil until one
	// comes.
	enc    *Encoder
	wire   []wireEvent
	events []*canonical.Event
	closed bool
	// held is a failed message's finish, whose messages error frame enc
	// makes with the event after it: the frame takes held's seq, so that
	// no two frames share one (runtimeRun.add holds it so too).
	held *canonical.Event
	// unframed counts the events right before the next that enc made no
	// frame of (a block's finish whose start the runtime encoded): that
	// frame says which seq came before it, as the runtime's frames do.
	unframed int
}

// openTail opens a reader of the thread's events after seq since.
func (f *Frontend) openTail(ctx context.Context, thread string, since uint64, notify func()) (*tailReader, error) {
	t := &tailReader{f: f, ctx: ctx, thread: thread, notify: notify, at: since}
	err := t.open(since)
	if canonical.CodeOf(err) == canonical.CodeOutOfRange {
		// The log holds none of the events after since: the reader
		// starts from the oldest to come, and says so (readOnce).
		t.lapsed = true
		err = t.open(0)
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (t *tailReader) open(since uint64) error {
	s, err := t.f.cfg.Observer.Observe(t.ctx, t.thread, since)
	if err != nil {
		return err
	}
	p, ok := s.(canonical.Poller)
	if !ok {
		_ = s.Close()
		return canonical.Errorf(canonical.CodeInternal, "the observer's stream cannot be polled")
	}
	p.Notify(t.notify)
	t.obs = p
	return nil
}

// read appends the records after the reader's position that match; g
// reports events the log no longer holds, before the records after them.
// It reads events until one matches, none is ready, or it has looked at
// readLimit events (more is set then): an empty answer without more
// means nothing is ready. An error ends the reader.
func (t *tailReader) read(match func(*record) bool, out []record) (_ []record, g *gap, err error) {
	n := len(out)
	t.more = false
	for looked := 0; looked < readLimit; looked += readBatch {
		var polled int
		out, g, polled, err = t.readOnce(match, out)
		if err != nil || g != nil || len(out) > n || polled == 0 {
			return out, g, err
		}
	}
	t.more = true // none matched of readLimit: there may be more
	return out, g, err
}

// readLimit bounds the events one read looks at.
const readLimit = 16 * readBatch

// readOnce is read over at most readBatch events; polled is how many.
func (t *tailReader) readOnce(match func(*record) bool, out []record) (_ []record, g *gap, polled int, err error) {
	clear(t.events)
	t.events, err = t.obs.Poll(t.events[:0], readBatch)
	if canonical.CodeOf(err) == canonical.CodeOutOfRange && !t.lapsed {
		// The log let go of events after at: the reader goes on from the
		// oldest it holds, and says so.
		_ = t.obs.Close()
		t.lapsed = true
		if err := t.open(0); err != nil {
			return out, nil, 0, err
		}
		t.events, err = t.obs.Poll(t.events[:0], readBatch)
	}
	if err != nil {
		return out, nil, 0, err
	}
	for _, ev := range t.events {
		if ev.GetSeq() <= t.at {
			continue
		}
		if t.lapsed {
			g, t.lapsed = &gap{since: t.at, minAvail: ev.GetSeq()}, false
		}
		if ev.SkippedAfter != nil && ev.GetSeq()-1 > t.at {
			// No event has the seqs between (the observer read up to
			// those it skips, canonical.Follows): the next frame says which
			// came before it, as after events it made no frame of.
			t.unframed += int(ev.GetSeq() - 1 - t.at)
		}
		t.at = ev.GetSeq()
		if ev.GetExtensions()[updateExt].GetBoolValue() && ev.GetLifecycle() != nil {
			continue // an update run's lifecycle is not a run's
		}
		n := len(out)
		if _, ok := ev.GetExtensions()[wireExt]; ok {
			out = wireRecords(ev, out)
			t.unframed = 0 // the runtime's frames say their own prev_seq
		} else {
			out = t.encode(ev, out)
		}
		kept := out[:n]
		for _, r := range out[n:] {
			if match(&r) {
				kept = append(kept, r)
			}
		}
		out = kept
	}
	return t.f.states.frame(t.ctx, t.thread, out), g, len(t.events), nil
}

// encode appends the records of an event the runtime did not encode: one
// the bridge made (a run's failed end, when its owner went quiet), or of a
// run that did not name the runtime (another protocol's on the thread).
// The reader's own encoder encodes it, from what it has read.
func (t *tailReader) encode(ev *canonical.Event, out []record) []record {
	if t.enc == nil {
		t.enc = NewEncoder(EncoderConfig{MaxBlockBytes: 16 << 20, Now: t.f.cfg.Now})
	}
	ws, err := t.enc.Encode(ev, t.wire[:0])
	if err != nil {
		t.f.cfg.Logger.Warn("an event of the thread could not be encoded", "thread", t.thread, "seq", ev.GetSeq(), "err", err)
		t.unframed++
		return out
	}
	t.wire = ws
	if len(ws) == 0 {
		if t.enc.pendingErr == nil || t.held != nil {
			t.unframed++ // not held: no frame will take its seq
		}
	} else if t.unframed > 0 {
		if ws[0].skip == 0 {
			ws[0].skip = t.unframed
		}
		t.unframed = 0
	}
	if held := t.held; held != nil && len(ws) > 0 {
		t.held = nil
		out = append(out, encodedRecord(held, &ws[0]))
		ws = ws[1:]
	}
	for i := range ws {
		out = append(out, encodedRecord(ev, &ws[i]))
	}
	if t.enc.pendingErr != nil && t.held == nil {
		t.held = ev
	}
	return out
}

// encodedRecord is the record of w, a wire event of ev.
func encodedRecord(ev *canonical.Event, w *wireEvent) record {
	return record{seq: ev.GetSeq(), method: w.method, custom: w.custom, ns: slices.Clone(w.namespace),
		frame: newFrame(ev.GetSeq(), w), run: ev.GetRunId(), status: w.status}
}

// close ends the reader.
func (t *tailReader) close() {
	if !t.closed {
		t.closed = true
		_ = t.obs.Close()
	}
}

// stateCache keeps the values frames' data of the states read back from
// checkpoint records (a values event past the runtime's InlineValues),
// so an instance reads each once for all its readers; bounded in bytes,
// the oldest let go first, and a state over a quarter of the bound is
// read again by each reader rather than kept.
type stateCache struct {
	store   canonical.ThreadStore
	log     *slog.Logger
	timeout time.Duration

	mu    sync.Mutex
	data  map[string][]byte
	order []string
	bytes int
	max   int
}

// frame fills in the frames of out's values events whose state is their
// checkpoint's. One whose checkpoint cannot be read is sent with null
// data, and the reason logged: the stream goes on.
func (c *stateCache) frame(ctx context.Context, thread string, out []record) []record {
	for i := range out {
		r := &out[i]
		if r.frame != nil || r.wire == nil {
			continue
		}
		w := *r.wire
		w.data = c.get(ctx, thread, r.ref)
		r.frame, r.wire = newFrame(r.seq, &w), nil
	}
	return out
}

func (c *stateCache) get(ctx context.Context, thread, ref string) []byte {
	key := thread + "\x00" + ref
	c.mu.Lock()
	d, ok := c.data[key]
	c.mu.Unlock()
	if ok {
		return d
	}
	d = c.read(ctx, thread, ref)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.data[key]; !ok && d != nil && len(d) <= c.max/4 { // a state too large to keep for long is not kept
		c.data[key] = d
		c.order = append(c.order, key)
		c.bytes += len(d)
		for c.bytes > c.max && len(c.order) > 1 {
			c.bytes -= len(c.data[c.order[0]])
			delete(c.data, c.order[0])
			c.order = c.order[1:]
		}
	}
	return d
}

// read is the values frame data of a checkpoint's record; nil (null) when
// it cannot be read.
func (c *stateCache) read(ctx context.Context, thread, ref string) []byte {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	values, err := readCheckpointValuesJSON(ctx, c.store, thread, ref)
	if err == nil {
		return values
	}
	c.log.Warn("a values event's state could not be read", "thread", thread, "checkpoint", ref, "err", err)
	return nil
}
