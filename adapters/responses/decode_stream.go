package responses

import (
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// streamDecoder turns an upstream's Responses stream into canonical
// events: Feed takes chunks cut anywhere, End flushes. It dispatches on
// the data's type (not the event name); ignores unknown types, keepalive
// and [DONE]; drops events whose sequence_number repeats one already seen
// and fails on a gap; creates an item at its first delta when the server
// sent no .added (Ollama); lets .done payloads and the terminal output add
// what the deltas left out. One per stream; not safe for concurrent use.
type streamDecoder struct {
	p        sse.Parser
	b        *canonical.Builder
	seq      int64 // the next sequence_number expected; -1 before the first
	maxText  int
	held     int
	open     bool
	block    blockKey        // what the open block renders
	kind     string          // text, reasoning, tool
	items    map[string]bool // items whose content was emitted
	text     strings.Builder
	emitted  bool // any content was emitted
	sawTools bool
	err      error
	evs      []sse.Event
	// ev is the event being read, reused: a new upEvent was one of a
	// text delta's allocations.
	ev upEvent
}

// newStreamDecoder returns a decoder holding at most maxEvent bytes of an
// SSE event and maxText bytes of one block's text.
func newStreamDecoder(maxEvent, maxText int, msgPrefix string) *streamDecoder {
	d := &streamDecoder{b: canonical.NewBuilder(), seq: -1, maxText: maxText}
	d.b.MessageID = msgPrefix
	d.p.MaxEventBytes = maxEvent
	d.p.BorrowData = true // each event is read into upEvent before the next Feed
	return d
}

// Ended reports whether the run's terminal event was produced.
func (d *streamDecoder) Ended() bool { return d.b.Ended() }

// Feed decodes a chunk, appending the events it completes.
func (d *streamDecoder) Feed(chunk []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	if d.err != nil {
		return out, d.err
	}
	var err error
	d.evs, err = d.p.Feed(chunk, d.evs[:0])
	for _, ev := range d.evs {
		if d.b.Ended() {
			break
		}
		var derr error
		if out, derr = d.event(ev.Data, out); derr != nil {
			d.err = derr
			return out, derr
		}
	}
	if err != nil {
		d.err = canonical.Errorf(canonical.CodeResourceExhausted, "responses backend: an upstream event exceeds max_event_bytes (%d)", d.p.MaxEventBytes)
		return out, d.err
	}
	return out, nil
}

// End flushes the tail at the end of the body: a stream without a
// terminal event is UNAVAILABLE "upstream stream truncated".
func (d *streamDecoder) End(out []*canonical.Event) ([]*canonical.Event, error) {
	if d.err != nil {
		return out, d.err
	}
	var err error
	d.p.DispatchIncompleteAtEnd = true
	if d.evs, err = d.p.End(d.evs[:0]); err == nil {
		for _, ev := range d.evs {
			if d.b.Ended() {
				break
			}
			if out, err = d.event(ev.Data, out); err != nil {
				d.err = err
				return out, err
			}
		}
	}
	if !d.b.Ended() {
		return d.b.End(out, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "responses backend: upstream stream truncated")), nil
	}
	return out, nil
}

// Fail ends the run with err (a read error, a limit) unless it has ended.
func (d *streamDecoder) Fail(out []*canonical.Event, err error) []*canonical.Event {
	return d.b.End(out, canonical.StatusFailed, canonical.AsError(err))
}

// upEvent is an upstream event, read as one union.
type upEvent struct {
	Type           string          `json:"type"`
	SequenceNumber *int64          `json:"sequence_number"`
	Response       *upResponse     `json:"response"`
	Item           *item           `json:"item"`
	ItemID         string          `json:"item_id"`
	ContentIndex   int             `json:"content_index"`
	SummaryIndex   int             `json:"summary_index"`
	Part           *part           `json:"part"`
	Delta          string          `json:"delta"`
	Text           *string         `json:"text"`
	Refusal        *string         `json:"refusal"`
	Name           string          `json:"name"`
	Arguments      *string         `json:"arguments"`
	Code           *string         `json:"code"`
	Message        *string         `json:"message"`
	Status         int             `json:"status"`
	Error          *errorBodyError `json:"error"`
}

// upResponse is what the decoder reads of an upstream's Response object:
// the members it does not use are not decoded, so a server that sends one
// of them in another shape (instructions as items, as OpenAI echoes a
// prompt template's; a float created_at) is not refused for it.
type upResponse struct {
	Status            string             `json:"status"`
	Error             *responseError     `json:"error"`
	IncompleteDetails *incompleteDetails `json:"incomplete_details"`
	Output            []item             `json:"output"`
	Usage             *usage             `json:"usage"`
}

// upstreamJSON reads what an upstream writes as the SDKs' JSON.parse
// reads it: the last of duplicate members wins (servers differ in what
// they repeat), and invalid UTF-8 or a lone surrogate escape (Python's
// json.dumps writes one for whatever a str holds) is U+FFFD, not a failed
// run. Joined once, not per event.
var upstreamJSON = json.JoinOptions(json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

// event decodes one event's data.
func (d *streamDecoder) event(data []byte, out []*canonical.Event) ([]*canonical.Event, error) {
	if len(data) == 0 || string(data) == "[DONE]" {
		return out, nil
	}
	d.ev = upEvent{}
	ev := &d.ev
	if err := json.Unmarshal(data, ev, upstreamJSON); err != nil {
		// An event of a type read for its type alone (a newer server's,
		// unknown ones are ignored) is not refused for members of other
		// shapes than the union's.
		var head struct {
			Type           string `json:"type"`
			SequenceNumber *int64 `json:"sequence_number"`
		}
		if json.Unmarshal(data, &head, upstreamJSON) != nil || eventHandlers[head.Type] != nil {
			return out, canonical.Errorf(canonical.CodeInternal, "responses backend: an upstream event is not valid JSON: %s", jsonErrorText(err))
		}
		d.ev = upEvent{Type: head.Type, SequenceNumber: head.SequenceNumber}
	}
	if n := ev.SequenceNumber; n != nil {
		switch {
		case d.seq >= 0 && *n < d.seq:
			return out, nil // a repeat
		case d.seq >= 0 && *n > d.seq:
			return out, canonical.Errorf(canonical.CodeInternal, "responses backend: upstream skipped sequence numbers %d to %d", d.seq, *n-1)
		}
		d.seq = *n + 1
	}
	return d.dispatch(ev, out)
}

// eventHandler maps one event of a type the decoder reads more than the
// type of.
type eventHandler func(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error)

// eventHandlers are the decoder's event types; the others (created,
// in_progress, queued, keepalive, types added later) are skipped.
var eventHandlers = map[string]eventHandler{
	"response.output_item.added":             itemAddedEvent,
	"response.content_part.added":            partAddedEvent,
	"response.reasoning_summary_part.added":  partAddedEvent,
	"response.output_text.delta":             textDeltaEvent,
	"response.refusal.delta":                 textDeltaEvent,
	"response.reasoning_summary_text.delta":  reasoningDeltaEvent,
	"response.reasoning_text.delta":          reasoningDeltaEvent,
	"response.function_call_arguments.delta": argumentsDeltaEvent,
	"response.output_text.done":              textDoneEvent,
	"response.reasoning_summary_text.done":   textDoneEvent,
	"response.reasoning_text.done":           textDoneEvent,
	"response.refusal.done":                  refusalDoneEvent,
	"response.function_call_arguments.done":  argumentsDoneEvent,
	"response.output_item.done":              itemDoneEvent,
	"response.completed":                     terminalEvent,
	"response.incomplete":                    terminalEvent,
	"response.done":                          terminalEvent,
	"response.failed":                        failedEvent,
	"error":                                  errorEventOf,
}

// dispatch maps an event by type.
func (d *streamDecoder) dispatch(ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	if h := eventHandlers[ev.Type]; h != nil {
		return h(d, ev, out)
	}
	return out, nil
}

func itemAddedEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	if ev.Item == nil {
		return out, nil
	}
	return d.itemAdded(ev.Item, out)
}

func partAddedEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	if d.open && d.block != partKey(ev) {
		out = d.closeBlock(out)
	}
	return out, nil
}

func textDeltaEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	return d.delta(ev.ItemID, partKey(ev), "text", ev.Delta, out)
}

func reasoningDeltaEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	return d.delta(ev.ItemID, partKey(ev), "reasoning", ev.Delta, out)
}

func argumentsDeltaEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	return d.delta(ev.ItemID, callKey(ev.ItemID), "tool", ev.Delta, out)
}

func textDoneEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	return d.done(ev.ItemID, partKey(ev), ev.Text, out)
}

func refusalDoneEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	return d.done(ev.ItemID, partKey(ev), ev.Refusal, out)
}

func argumentsDoneEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	if !d.items[ev.ItemID] && !(d.open && d.block == callKey(ev.ItemID)) && ev.Arguments != nil && *ev.Arguments != "" {
		out = d.openTool(ev.ItemID, ev.ItemID, ev.Name, out) // arguments only in .done
	}
	return d.done(ev.ItemID, callKey(ev.ItemID), ev.Arguments, out)
}

func itemDoneEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	if ev.Item == nil {
		return out, nil
	}
	return d.itemDone(ev.Item, out)
}

func terminalEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	return d.terminal(ev.Response, out), nil
}

func failedEvent(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	return d.failed(ev.Response, out), nil
}

func errorEventOf(d *streamDecoder, ev *upEvent, out []*canonical.Event) ([]*canonical.Event, error) {
	return d.errorEvent(ev, out), nil
}

// blockKey is what a block renders: one of an item's content parts
// ('c') or reasoning summary parts ('s'), by index, or a function call's
// arguments ('f'). A struct rather than a string made of them: an
// event's key is compared with the open block's at every delta.
type blockKey struct {
	item  string
	part  byte
	index int
}

// callKey is the key of a function call item's arguments.
func callKey(itemID string) blockKey { return blockKey{item: itemID, part: 'f'} }

// partKey is the key of the part an event is of.
func partKey(ev *upEvent) blockKey {
	switch ev.Type {
	case "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done":
		return blockKey{ev.ItemID, 's', ev.SummaryIndex}
	}
	return blockKey{ev.ItemID, 'c', ev.ContentIndex}
}

// closeBlock finishes the open block.
func (d *streamDecoder) closeBlock(out []*canonical.Event) []*canonical.Event {
	if !d.open {
		return out
	}
	d.open, d.block, d.kind = false, blockKey{}, ""
	d.text.Reset()
	return d.b.FinishBlock(out)
}

// openTool opens a function call's block.
func (d *streamDecoder) openTool(itemID, callID, name string, out []*canonical.Event) []*canonical.Event {
	out = d.closeBlock(out)
	out = d.b.ToolCall(out, callID, name)
	d.open, d.block, d.kind, d.sawTools = true, callKey(itemID), "tool", true
	d.seen(itemID)
	return out
}

// seen records that an item's content was emitted.
func (d *streamDecoder) seen(itemID string) {
	d.emitted = true
	if d.items == nil {
		d.items = map[string]bool{}
	}
	d.items[itemID] = true
}

// itemAdded opens a function call's block at once (its name and call id
// are known now); other items open at their first delta.
func (d *streamDecoder) itemAdded(it *item, out []*canonical.Event) ([]*canonical.Event, error) {
	out = d.closeBlock(out)
	if it.Type != "function_call" {
		return out, nil
	}
	out = d.openTool(it.ID, it.CallID, it.Name, out)
	if it.Arguments != nil && *it.Arguments != "" {
		return d.delta(it.ID, callKey(it.ID), "tool", *it.Arguments, out)
	}
	return out, nil
}

// delta appends text to block key (of item itemID) of kind, opening it
// when it is not the open one.
func (d *streamDecoder) delta(itemID string, key blockKey, kind, s string, out []*canonical.Event) ([]*canonical.Event, error) {
	if !d.open || d.block != key {
		switch kind {
		case "tool": // arguments before any .added (Ollama): the call id is the item's
			out = d.openTool(itemID, itemID, "", out)
		case "reasoning":
			out = d.closeBlock(out)
			out = d.b.StartBlock(out, canonical.BlockReasoning, "", "", "", "")
		default:
			out = d.closeBlock(out)
			out = d.b.StartBlock(out, canonical.BlockText, "", "", "", "")
		}
		d.open, d.block, d.kind = true, key, kind
	}
	if s == "" {
		return out, nil
	}
	if d.held += len(s); d.held > d.maxText {
		return out, canonical.Errorf(canonical.CodeResourceExhausted, "responses backend: the upstream's output exceeds max_output_bytes (%d)", d.maxText)
	}
	d.seen(itemID)
	d.text.WriteString(s)
	switch kind {
	case "tool":
		return d.b.ToolArgs(out, s), nil
	case "reasoning":
		return d.b.Reasoning(out, s), nil
	}
	return d.b.Text(out, s), nil
}

// done adds what a .done payload of the open block has beyond its deltas
// (when they were a prefix of it; otherwise the deltas stand: what was
// sent cannot be taken back). A .done of a part that never streamed is
// left to output_item.done, which carries the whole item.
func (d *streamDecoder) done(itemID string, key blockKey, full *string, out []*canonical.Event) ([]*canonical.Event, error) {
	if full == nil || !d.open || d.block != key {
		return out, nil
	}
	if rest, ok := strings.CutPrefix(*full, d.text.String()); ok && rest != "" {
		return d.delta(itemID, key, d.kind, rest, out)
	}
	return out, nil
}

// itemDone closes the item's block, adding arguments only the .done item
// has; an item no delta rendered is rendered whole.
func (d *streamDecoder) itemDone(it *item, out []*canonical.Event) ([]*canonical.Event, error) {
	if d.items[it.ID] || (d.open && d.block == callKey(it.ID)) {
		if it.Type == "function_call" && it.Arguments != nil && d.open && d.block == callKey(it.ID) {
			var err error
			if out, err = d.done(it.ID, callKey(it.ID), it.Arguments, out); err != nil {
				return out, err
			}
		}
		return d.closeBlock(out), nil
	}
	return d.wholeItem(it, d.closeBlock(out))
}

// wholeItem renders an item that arrived whole.
func (d *streamDecoder) wholeItem(it *item, out []*canonical.Event) ([]*canonical.Event, error) {
	var err error
	switch it.Type {
	case "message":
		for i, p := range it.Content {
			s := p.Text
			if p.Type == "refusal" {
				s = p.Refusal
			}
			if s != nil && *s != "" {
				if out, err = d.delta(it.ID, blockKey{it.ID, 'c', i}, "text", *s, out); err != nil {
					return out, err
				}
			}
		}
	case "reasoning":
		all := it.Summary
		if len(all) == 0 {
			all = it.Content
		}
		for i, p := range all {
			if p.Text != nil && *p.Text != "" {
				if out, err = d.delta(it.ID, blockKey{it.ID, 's', i}, "reasoning", *p.Text, out); err != nil {
					return out, err
				}
			}
		}
	case "function_call":
		out = d.openTool(it.ID, it.CallID, it.Name, out)
		if it.Arguments != nil {
			if out, err = d.delta(it.ID, callKey(it.ID), "tool", *it.Arguments, out); err != nil {
				return out, err
			}
		}
	}
	return d.closeBlock(out), nil
}

// terminal ends the run from a completed or incomplete response: the
// finish reason from its status, usage from its usage; a response whose
// output never streamed is rendered from its output first.
func (d *streamDecoder) terminal(r *upResponse, out []*canonical.Event) []*canonical.Event {
	out = d.closeBlock(out)
	if r != nil && !d.emitted {
		for i := range r.Output {
			var err error
			if out, err = d.wholeItem(&r.Output[i], out); err != nil {
				return d.Fail(out, err)
			}
		}
	}
	reason := canonical.FinishStop
	if d.sawTools {
		reason = canonical.FinishToolCalls
	}
	var u *canonical.Usage
	if r != nil {
		if r.Status == "incomplete" {
			reason = canonical.FinishLength
			if r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "content_filter" {
				reason = canonical.FinishContentFilter
			}
		}
		u = canonicalUsage(r.Usage)
	}
	if !d.emitted { // an empty answer is still a message
		out = d.b.StartMessage(out, "", "")
	}
	out = d.b.FinishMessage(out, reason, u)
	return d.b.End(out, canonical.StatusCompleted, nil)
}

// canonicalUsage is the usage as canonical counts it; nil for none.
func canonicalUsage(u *usage) *canonical.Usage {
	if u == nil {
		return nil
	}
	return &canonical.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		ReasoningTokens: u.OutputTokensDetails.ReasoningTokens, CacheReadTokens: u.InputTokensDetails.CachedTokens}
}

// failed ends the run from response.failed.
func (d *streamDecoder) failed(r *upResponse, out []*canonical.Event) []*canonical.Event {
	code, msg := "", "the upstream response failed"
	switch {
	case r != nil && r.Error != nil:
		code, msg = r.Error.Code, r.Error.Message
	case r != nil && r.Status == "cancelled": // cancelled as asked: no error
		code, msg = canonical.CodeCanceled.String(), "the upstream response was cancelled"
	}
	return d.b.End(d.closeBlock(out), canonical.StatusFailed, canonical.WireError(codeOfFailure(code), msg))
}

// errorEvent ends the run from an error event, flat or nested.
func (d *streamDecoder) errorEvent(ev *upEvent, out []*canonical.Event) []*canonical.Event {
	code, msg := "", "the upstream reported an error"
	if ev.Code != nil {
		code = *ev.Code
	}
	if ev.Message != nil {
		msg = *ev.Message
	}
	c := codeOfFailure(code)
	if e := ev.Error; e != nil {
		msg = e.Message
		switch {
		case e.Code != nil:
			c = codeOfFailure(*e.Code)
		case ev.Status != 0:
			c = canonical.CodeOfHTTPStatus(ev.Status)
		}
		if ev.Status != 0 && e.Code != nil && c == canonical.CodeInternal {
			c = canonical.CodeOfHTTPStatus(ev.Status)
		}
	}
	return d.b.End(d.closeBlock(out), canonical.StatusFailed, canonical.WireError(c, msg))
}
