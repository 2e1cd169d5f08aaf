package openai

import (
	"crypto/rand"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
)

// handler receives a run as what Chat Completions can say of it: one
// choice's role, text, reasoning and tool calls, then its end. The stream
// writer and the non-streaming collector implement it.
type handler interface {
	begin() error
	text(s string) error
	reasoning(s string) error
	toolStart(index int, id, name string) error
	toolArgs(index int, s string) error
	finish(reason string, u *canonical.Usage) error
	fail(e *canonical.Error) error
}

// reader turns a run's canonical events into handler calls. Only the root
// namespace is read (the frontend hands it canonical.AnswerStream's view:
// an agent's answer is moved onto the root); every assistant message of the
// run is one choice.
// Tool activity, a call of a tool the request did not declare (one the
// bridge runs: an agent's, an XML route's action; the client, asked to
// run it, would fail or loop), data and ref blocks, state and custom
// events have no place on this wire and are dropped.
type reader struct {
	h           handler
	clientTools map[string]bool // the tools the request declared
	begun       bool
	block       canonical.BlockType // the open root block's type; 0: none
	call        int                 // wire index of the open tool call
	calls       int                 // tool calls sent
	ran         int                 // of them, calls the bridge ran (a tool result came)
	ids         map[string]bool
	reason      canonical.FinishReason
	usage       *canonical.Usage
}

func newReader(h handler, clientTools map[string]bool) *reader {
	return &reader{h: h, clientTools: clientTools, ids: map[string]bool{}}
}

// event reads one event; done reports the run's end (after which the
// handler has been told finish or fail).
func (r *reader) event(ev *canonical.Event) (done bool, err error) {
	if len(ev.GetNamespace()) != 0 {
		return false, nil
	}
	switch k := ev.GetKind().(type) {
	case *canonical.KindMessageStart:
		return false, r.ensureBegun()
	case *canonical.KindBlockStart:
		return false, r.blockStart(k.BlockStart)
	case *canonical.KindBlockDelta:
		return false, r.delta(k.BlockDelta.GetText())
	case *canonical.KindBlockFinish:
		r.block = 0
	case *canonical.KindMessageFinish:
		r.messageFinish(k.MessageFinish)
	case *canonical.KindToolFinished:
		r.toolRan(k.ToolFinished.GetToolCallId())
	case *canonical.KindToolFailed:
		r.toolRan(k.ToolFailed.GetToolCallId())
	case *canonical.KindLifecycle:
		return r.lifecycle(k.Lifecycle)
	}
	return false, nil
}

func (r *reader) ensureBegun() error {
	if r.begun {
		return nil
	}
	r.begun = true
	return r.h.begin()
}

func (r *reader) blockStart(bs *canonical.BlockStart) error {
	r.block = bs.GetType()
	if r.block != canonical.BlockToolCall {
		return nil
	}
	if !r.clientTools[bs.GetName()] {
		r.block = 0 // the bridge's call: its deltas are dropped too
		return nil
	}
	if err := r.ensureBegun(); err != nil {
		return err
	}
	id := bs.GetId()
	if id == "" || len(id) > 40 || r.ids[id] {
		id = newID("call_")
	}
	r.ids[id] = true
	r.call = r.calls
	r.calls++
	return r.h.toolStart(r.call, id, bs.GetName())
}

func (r *reader) delta(s string) error {
	if s == "" {
		return nil
	}
	switch r.block {
	case canonical.BlockText:
		if err := r.ensureBegun(); err != nil {
			return err
		}
		return r.h.text(s)
	case canonical.BlockReasoning:
		if err := r.ensureBegun(); err != nil {
			return err
		}
		return r.h.reasoning(s)
	case canonical.BlockToolCall:
		return r.h.toolArgs(r.call, s)
	}
	return nil
}

// messageFinish keeps the last message's reason and sums the usage.
func (r *reader) messageFinish(mf *canonical.MessageFinish) {
	r.reason = mf.GetFinishReason()
	u := mf.GetUsage()
	if u == nil {
		return
	}
	if r.usage == nil {
		r.usage = &canonical.Usage{}
	}
	r.usage.InputTokens += u.GetInputTokens()
	r.usage.OutputTokens += u.GetOutputTokens()
	r.usage.TotalTokens += u.GetTotalTokens()
	r.usage.ReasoningTokens += u.GetReasoningTokens()
	r.usage.CacheReadTokens += u.GetCacheReadTokens()
	r.usage.CacheCreationTokens += u.GetCacheCreationTokens()
}

// toolRan counts a tool call the bridge ran: its result is already in
// the run, so the client is not asked to run it (finish_reason).
func (r *reader) toolRan(id string) {
	if r.ids[id] {
		r.ran++
	}
}

func (r *reader) lifecycle(lc *canonical.Lifecycle) (bool, error) {
	switch lc.GetStatus() {
	case canonical.StatusCompleted, canonical.StatusInterrupted:
		if err := r.ensureBegun(); err != nil {
			return true, err
		}
		return true, r.h.finish(r.finishReason(), r.usage)
	case canonical.StatusFailed, canonical.StatusCancelled:
		e := canonical.FromProto(lc.GetError())
		if e == nil {
			e = canonical.Errorf(canonical.CodeUnknown, "run %s", strings.ToLower(strings.TrimPrefix(lc.GetStatus().String(), "RUN_STATUS_")))
		}
		return true, r.h.fail(e)
	}
	return false, nil
}

// finishReason is the canonical finish on this wire (reference 10.1):
// tool_calls when a call the client must run was sent and the model
// stopped normally.
func (r *reader) finishReason() string {
	pending := r.calls > r.ran
	switch r.reason {
	case canonical.FinishLength:
		return "length"
	case canonical.FinishContentFilter:
		return "content_filter"
	case canonical.FinishToolCalls:
		if pending {
			return "tool_calls"
		}
	case canonical.FinishStop, 0:
		if pending {
			return "tool_calls"
		}
	}
	return "stop"
}

// wireUsageOf is CompletionUsage of a canonical usage (zeros when none
// was reported): the prompt count includes cached tokens, the
// completion count reasoning tokens, as canonical counts them.
func wireUsageOf(u *canonical.Usage) *wireUsage {
	w := &wireUsage{}
	if u == nil {
		return w
	}
	w.PromptTokens, w.CompletionTokens = u.GetInputTokens(), u.GetOutputTokens()
	w.TotalTokens = u.GetTotalTokens()
	if w.TotalTokens == 0 {
		w.TotalTokens = w.PromptTokens + w.CompletionTokens
	}
	w.PromptTokensDetails.CachedTokens = u.GetCacheReadTokens()
	w.CompletionTokensDetails.ReasoningTokens = u.GetReasoningTokens()
	return w
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newID is prefix and 24 random letters and digits (call_…, chatcmpl-…).
func newID(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b[:])
}
