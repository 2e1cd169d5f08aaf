package responses

import (
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// encoder renders one run's canonical events as the Responses stream and
// keeps the response object they describe (the snapshot every lifecycle
// event carries, and what is stored). It is deterministic: the same events
// give the same stream, ids and sequence numbers included, so a replay
// from the bridge's log reproduces what the client was sent. One per
// response; not safe for concurrent use.
type encoder struct {
	r         *response
	seq       int64
	summary   bool // reasoning as summary parts (the client set reasoning.summary)
	emit      func(*streamEvent) error
	maxOutput int
	held      int // bytes of text and arguments held in the snapshot

	open    int    // index of the open item in r.Output, -1 for none
	msgOpen bool   // the open item is a message taking more text parts
	block   string // the open block's kind: text, reasoning, tool, skip; "" for none
	// clientTools names the tools the request declared (its response's
	// tools): a call of another is not rendered.
	clientTools map[string]echoedTool // by name
	text        strings.Builder
	reason      canonical.FinishReason
	usage       *canonical.Usage
	started     bool
	done        bool
	lastError   *canonical.Error
	// completedAt, when set, is the completed_at of the terminal response
	// (a replay renders the stored one).
	completedAt *int64
	delta       deltaEvent
}

// deltaEvent is the encoder's one delta event and the values its pointers
// point at: a delta allocated five of them (the event, two indexes, the
// text and the logprobs).
type deltaEvent struct {
	ev                     streamEvent
	outputIndex, partIndex int
	text                   string
}

// noLogprobs is the logprobs of every output_text event, always empty:
// emit only reads it.
var noLogprobs = []int{}

// newEncoder returns an encoder of r (status in_progress, no output yet)
// writing events to emit (nil: none).
func newEncoder(r *response, summary bool, maxOutput int, emit func(*streamEvent) error) *encoder {
	if emit == nil {
		emit = func(*streamEvent) error { return nil }
	}
	r.Output = []item{}
	tools := make(map[string]echoedTool, len(r.Tools))
	for _, t := range r.Tools {
		if _, ok := tools[t.Name]; !ok {
			tools[t.Name] = t
		}
	}
	return &encoder{r: r, summary: summary, maxOutput: maxOutput, emit: emit, open: -1, clientTools: tools}
}

// streamEventsPerEvent bounds the stream events one canonical event
// renders (a block's start after an unfinished one renders about six).
const streamEventsPerEvent = 16

// send numbers ev and hands it on.
func (e *encoder) send(ev *streamEvent) error {
	ev.SequenceNumber = e.seq
	e.seq++
	return e.emit(ev)
}

// start writes response.created and response.in_progress (response.queued
// first for a background response).
func (e *encoder) start() error {
	if e.started {
		return nil
	}
	e.started = true
	if err := e.send(&streamEvent{Type: "response.created", Response: e.r}); err != nil {
		return err
	}
	if e.r.Status == "queued" {
		if err := e.send(&streamEvent{Type: "response.queued", Response: e.r}); err != nil {
			return err
		}
		e.r.Status = "in_progress"
	}
	return e.send(&streamEvent{Type: "response.in_progress", Response: e.r})
}

// itemID is the id of item n of a response's output (in: of its input):
// its prefix, the response id's random part, and where the item stands,
// so that it is unique in the response, as unguessable as the response
// id, the same when a replay renders the run again, and an
// item_reference names the stored response it is read from
// (referencedResponse).
func itemID(prefix, respID string, in bool, n int) string {
	where := "_o"
	if in {
		where = "_i"
	}
	return prefix + strings.TrimPrefix(respID, "resp_") + where + strconv.Itoa(n)
}

// referencedResponse is the id of the response whose item id names (an
// itemID), "" when id is not one.
func referencedResponse(id string) string {
	for _, prefix := range []string{"msg_", "fc_", "fco_", "ctc_", "ctco_", "rs_"} {
		if rest, ok := strings.CutPrefix(id, prefix); ok {
			if x, _, ok := strings.Cut(rest, "_"); ok && validID("resp_"+x) {
				return "resp_" + x
			}
		}
	}
	return ""
}

// derivedCallID is the call id of the response's tool call n when the
// backend gave none: call_ and 24 characters that only the response id
// (unguessable itself) determines, so a replay renders the same.
func derivedCallID(respID string, n int) string {
	h := sha256.Sum256([]byte(respID + "/call_" + strconv.Itoa(n)))
	return "call_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:15]))
}

// event renders one canonical event. An error is the client's (a write
// failed) or the output limit's; the run should then end.
func (e *encoder) event(ev *canonical.Event) error {
	if e.done || len(ev.GetNamespace()) != 0 {
		return nil // nested runs' content is not the response's
	}
	if ev.SkippedAfter != nil && e.started {
		// The run's owner died, and its own clients may have had stream
		// events of the skipped seqs (canonical.Follows), which the log
		// never got: numbers past them, so that a client resuming from
		// the last it read (starting_after) still reads the end.
		e.seq += int64(ev.GetSeq()-1-ev.GetSkippedAfter()) * streamEventsPerEvent
	}
	switch k := ev.GetKind().(type) {
	case *canonical.KindBlockStart:
		return e.blockStart(k.BlockStart)
	case *canonical.KindBlockDelta:
		return e.blockDelta(k.BlockDelta.GetText())
	case *canonical.KindBlockFinish:
		return e.blockFinish()
	case *canonical.KindMessageFinish:
		return e.messageFinish(k.MessageFinish)
	case *canonical.KindLifecycle:
		if status, ok := canonical.TerminalOf(ev); ok {
			at := time.Now()
			if ev.GetTimeUnixNano() != 0 {
				at = time.Unix(0, ev.GetTimeUnixNano())
			}
			return e.end(status, canonical.FromProto(k.Lifecycle.GetError()), at)
		}
	}
	return nil
}

func (e *encoder) cur() *item { return &e.r.Output[e.open] }

// addItem appends it to the output and writes output_item.added.
func (e *encoder) addItem(it item) error {
	e.r.Output = append(e.r.Output, it)
	e.open = len(e.r.Output) - 1
	return e.send(&streamEvent{Type: "response.output_item.added", OutputIndex: ptr(e.open), Item: e.cur()})
}

// closeItem writes output_item.done for the open item with status.
func (e *encoder) closeItem(status string) error {
	if e.open < 0 {
		return nil
	}
	it := e.cur()
	if it.Type != "reasoning" {
		it.Status = status
	}
	idx := e.open
	e.open, e.msgOpen = -1, false
	return e.send(&streamEvent{Type: "response.output_item.done", OutputIndex: ptr(idx), Item: it})
}

// blockStart opens an item (or a part of the open message) for a block.
func (e *encoder) blockStart(bs *canonical.BlockStart) error {
	if e.block != "" {
		if err := e.blockFinish(); err != nil {
			return err
		}
	}
	e.text.Reset()
	n := len(e.r.Output)
	switch bs.GetType() {
	case canonical.BlockText:
		e.block = "text"
		if !e.msgOpen {
			if err := e.closeItem("completed"); err != nil {
				return err
			}
			if err := e.addItem(item{Type: "message", ID: itemID("msg_", e.r.ID, false, n), Status: "in_progress", Role: "assistant", Content: parts{}}); err != nil {
				return err
			}
			e.msgOpen = true
		}
		it := e.cur()
		it.Content = append(it.Content, part{Type: "output_text", Text: ptr(""), Annotations: []json.Value{}, Logprobs: []json.Value{}})
		ci := len(it.Content) - 1
		return e.send(&streamEvent{Type: "response.content_part.added", ItemID: it.ID, OutputIndex: ptr(e.open), ContentIndex: ptr(ci), Part: &it.Content[ci]})
	case canonical.BlockReasoning:
		e.block = "reasoning"
		return e.reasoningStart(n)
	case canonical.BlockToolCall:
		t, declared := e.clientTools[bs.GetName()]
		if !declared {
			// A call of a tool the request did not declare is one the
			// bridge runs (an agent's, an XML route's action): as a
			// function_call the client would be asked to run it.
			e.block = "skip"
			return nil
		}
		e.block = "tool"
		if err := e.closeItem("completed"); err != nil {
			return err
		}
		callID := bs.GetId()
		if callID == "" {
			callID = derivedCallID(e.r.ID, n)
		}
		if t.Type == "custom" {
			e.block = "custom"
			return e.addItem(item{Type: "custom_tool_call", ID: itemID("ctc_", e.r.ID, false, n), Status: "in_progress", CallID: callID, Name: bs.GetName(), Namespace: t.Namespace, Input: ptr("")})
		}
		return e.addItem(item{Type: "function_call", ID: itemID("fc_", e.r.ID, false, n), Status: "in_progress", CallID: callID, Name: bs.GetName(), Namespace: t.Namespace, Arguments: ptr("")})
	}
	e.block = "skip" // data and ref blocks: this wire's output has no place for them
	return nil
}

// reasoningStart opens a reasoning item and its one part: a summary part,
// or a reasoning_text content part.
func (e *encoder) reasoningStart(n int) error {
	if err := e.closeItem("completed"); err != nil {
		return err
	}
	if err := e.addItem(item{Type: "reasoning", ID: itemID("rs_", e.r.ID, false, n), Summary: []part{}}); err != nil {
		return err
	}
	it := e.cur()
	if e.summary {
		it.Summary = append(it.Summary, part{Type: "summary_text", Text: ptr("")})
		return e.send(&streamEvent{Type: "response.reasoning_summary_part.added", ItemID: it.ID, OutputIndex: ptr(e.open), SummaryIndex: ptr(0), Part: &it.Summary[0]})
	}
	it.Content = parts{{Type: "reasoning_text", Text: ptr("")}}
	return e.send(&streamEvent{Type: "response.content_part.added", ItemID: it.ID, OutputIndex: ptr(e.open), ContentIndex: ptr(0), Part: &it.Content[0]})
}

// blockDelta writes a delta of the open block.
func (e *encoder) blockDelta(d string) error {
	if e.block == "" || e.block == "skip" || d == "" {
		return nil
	}
	if e.held += len(d); e.held > e.maxOutput {
		return canonical.Errorf(canonical.CodeResourceExhausted, "the response's output exceeds max_output_bytes (%d)", e.maxOutput)
	}
	e.text.WriteString(d)
	if e.block == "custom" {
		return nil // its input is read out of the whole arguments (blockFinish)
	}
	it := e.cur()
	// The event and what its pointers point at are the encoder's, reused:
	// emit is done with an event when it returns.
	dl := &e.delta
	dl.outputIndex, dl.partIndex, dl.text = e.open, 0, d
	ev := &dl.ev
	*ev = streamEvent{ItemID: it.ID, OutputIndex: &dl.outputIndex, Delta: &dl.text}
	switch {
	case e.block == "text":
		dl.partIndex = len(it.Content) - 1
		ev.Type, ev.ContentIndex, ev.Logprobs = "response.output_text.delta", &dl.partIndex, &noLogprobs
	case e.block == "tool":
		ev.Type = "response.function_call_arguments.delta"
	case e.summary:
		ev.Type, ev.SummaryIndex = "response.reasoning_summary_text.delta", &dl.partIndex
	default:
		ev.Type, ev.ContentIndex = "response.reasoning_text.delta", &dl.partIndex
	}
	return e.send(ev)
}

// blockFinish writes the open block's .done events (and its item's, but
// for a message, which may take more parts).
func (e *encoder) blockFinish() error {
	kind := e.block
	e.block = ""
	if kind == "" || kind == "skip" {
		return nil
	}
	text := e.text.String()
	it := e.cur()
	switch {
	case kind == "text":
		ci := len(it.Content) - 1
		it.Content[ci].Text = &text
		if err := e.send(&streamEvent{Type: "response.output_text.done", ItemID: it.ID, OutputIndex: ptr(e.open), ContentIndex: ptr(ci), Text: &text, Logprobs: &noLogprobs}); err != nil {
			return err
		}
		return e.send(&streamEvent{Type: "response.content_part.done", ItemID: it.ID, OutputIndex: ptr(e.open), ContentIndex: ptr(ci), Part: &it.Content[ci]})
	case kind == "tool":
		it.Arguments = &text
		if err := e.send(&streamEvent{Type: "response.function_call_arguments.done", ItemID: it.ID, OutputIndex: ptr(e.open), Name: it.Name, Arguments: &text}); err != nil {
			return err
		}
	case kind == "custom":
		input := customInput(text)
		it.Input = &input
		if err := e.send(&streamEvent{Type: "response.custom_tool_call_input.delta", ItemID: it.ID, OutputIndex: ptr(e.open), Delta: &input}); err != nil {
			return err
		}
		if err := e.send(&streamEvent{Type: "response.custom_tool_call_input.done", ItemID: it.ID, OutputIndex: ptr(e.open), Input: &input}); err != nil {
			return err
		}
	case e.summary:
		it.Summary[0].Text = &text
		if err := e.send(&streamEvent{Type: "response.reasoning_summary_text.done", ItemID: it.ID, OutputIndex: ptr(e.open), SummaryIndex: ptr(0), Text: &text}); err != nil {
			return err
		}
		if err := e.send(&streamEvent{Type: "response.reasoning_summary_part.done", ItemID: it.ID, OutputIndex: ptr(e.open), SummaryIndex: ptr(0), Part: &it.Summary[0]}); err != nil {
			return err
		}
	default:
		it.Content[0].Text = &text
		if err := e.send(&streamEvent{Type: "response.reasoning_text.done", ItemID: it.ID, OutputIndex: ptr(e.open), ContentIndex: ptr(0), Text: &text}); err != nil {
			return err
		}
		if err := e.send(&streamEvent{Type: "response.content_part.done", ItemID: it.ID, OutputIndex: ptr(e.open), ContentIndex: ptr(0), Part: &it.Content[0]}); err != nil {
			return err
		}
	}
	return e.closeItem("completed")
}

// customArguments is a custom tool's input as the arguments of its call
// as a function (decode.go customSpec); customInput reads it back.
func customArguments(input string) string {
	a, _ := json.Marshal(customArgs{Input: input})
	return string(a)
}

// customInput is a custom tool's input out of the arguments of its call
// as a function (decode.go customSpec): their input member, or the
// arguments as they are when the model wrote something else.
func customInput(args string) string {
	var a struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &a) == nil && a.Input != nil {
		return *a.Input
	}
	return args
}

// itemStatus is the status of an item a message with reason ends.
func itemStatus(reason canonical.FinishReason) string {
	if reason == canonical.FinishLength || reason == canonical.FinishContentFilter || reason == canonical.FinishError {
		return "incomplete"
	}
	return "completed"
}

// messageFinish closes the message's items and counts its usage.
func (e *encoder) messageFinish(mf *canonical.MessageFinish) error {
	if e.block != "" {
		if err := e.blockFinish(); err != nil {
			return err
		}
	}
	if r := mf.GetFinishReason(); r != canonical.FinishReason(0) {
		e.reason = r
	}
	if u := mf.GetUsage(); u != nil {
		if e.usage == nil {
			e.usage = &canonical.Usage{}
		}
		e.usage.InputTokens += u.GetInputTokens()
		e.usage.OutputTokens += u.GetOutputTokens()
		e.usage.TotalTokens += u.GetTotalTokens()
		e.usage.ReasoningTokens += u.GetReasoningTokens()
		e.usage.CacheReadTokens += u.GetCacheReadTokens()
	}
	return e.closeItem(itemStatus(e.reason))
}

// wireUsage is the response's usage: zeros where the backend reported
// none (usage is always present on a finished response).
func wireUsage(u *canonical.Usage) *usage {
	out := &usage{}
	if u == nil {
		return out
	}
	out.InputTokens, out.OutputTokens = u.GetInputTokens(), u.GetOutputTokens()
	out.InputTokensDetails.CachedTokens = u.GetCacheReadTokens()
	out.OutputTokensDetails.ReasoningTokens = u.GetReasoningTokens()
	out.TotalTokens = u.GetTotalTokens()
	if out.TotalTokens == 0 {
		out.TotalTokens = out.InputTokens + out.OutputTokens
	}
	return out
}

// end closes what is open and writes the terminal events: completed,
// incomplete (length or content filter), or an error event then failed
// (a cancelled run's response has status cancelled).
func (e *encoder) end(status canonical.RunStatus, rerr *canonical.Error, at time.Time) error {
	if e.done {
		return nil
	}
	if e.block != "" {
		if err := e.blockFinish(); err != nil {
			return err
		}
	}
	if err := e.closeItem(itemStatus(e.reason)); err != nil {
		return err
	}
	e.done = true
	r := e.r
	r.Usage = wireUsage(e.usage)
	switch status {
	case canonical.StatusCompleted, canonical.StatusInterrupted:
		r.CompletedAt = ptr(at.Unix())
		if e.completedAt != nil {
			r.CompletedAt = e.completedAt
		}
		switch e.reason {
		case canonical.FinishLength:
			r.Status, r.IncompleteDetails = "incomplete", &incompleteDetails{Reason: "max_output_tokens"}
			return e.send(&streamEvent{Type: "response.incomplete", Response: r})
		case canonical.FinishContentFilter:
			r.Status, r.IncompleteDetails = "incomplete", &incompleteDetails{Reason: "content_filter"}
			return e.send(&streamEvent{Type: "response.incomplete", Response: r})
		}
		r.Status = "completed"
		return e.send(&streamEvent{Type: "response.completed", Response: r})
	}
	if rerr == nil {
		rerr = canonical.Errorf(canonical.CodeUnknown, "run failed")
	}
	e.lastError = rerr
	if status == canonical.StatusCancelled || rerr.Code == canonical.CodeCanceled {
		// Cancelled, as asked: no error (the SDKs throw on an error event,
		// and ResponseError's codes have none for it), status cancelled.
		r.Status = "cancelled"
		return e.send(&streamEvent{Type: "response.failed", Response: r})
	}
	code := failureCode(rerr.Code)
	r.Status, r.Error = "failed", &responseError{Code: code, Message: rerr.Message}
	if err := e.send(&streamEvent{Type: "error", Code: &code, Message: &rerr.Message, Param: json.Value("null")}); err != nil {
		return err
	}
	return e.send(&streamEvent{Type: "response.failed", Response: r})
}

// fail ends the response with err (the run broke off, or the output
// limit): what is open is closed, then the error and response.failed.
func (e *encoder) fail(err *canonical.Error) error {
	return e.end(canonical.StatusFailed, err, time.Now())
}
