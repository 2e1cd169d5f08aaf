package canonical

import (
	"time"

	v1 "github.com/interlingua-dev/interlingua/gen/interlingua/v1"
)

// The canonical model's types, aliased from the generated protobuf package so
// adapters need import only this one.
type (
	Event          = v1.Event
	EventBatch     = v1.EventBatch
	BatchDelta     = v1.BatchDelta
	Request        = v1.Request
	Node           = v1.Node
	NamedNode      = v1.NamedNode
	ToolSpec       = v1.ToolSpec
	ErrorProto     = v1.Error
	Lifecycle      = v1.Lifecycle
	Cause          = v1.Cause
	RunStatus      = v1.RunStatus
	MessageStart   = v1.MessageStart
	MessageFinish  = v1.MessageFinish
	FinishReason   = v1.FinishReason
	Usage          = v1.Usage
	BlockType      = v1.BlockType
	BlockStart     = v1.BlockStart
	BlockDelta     = v1.BlockDelta
	BlockFinish    = v1.BlockFinish
	ToolStarted    = v1.ToolStarted
	ToolOutput     = v1.ToolOutput
	ToolFinished   = v1.ToolFinished
	ToolFailed     = v1.ToolFailed
	InputRequested = v1.InputRequested
	InputAnswered  = v1.InputAnswered
	StateSnapshot  = v1.StateSnapshot
	StateUpdate    = v1.StateUpdate
	Checkpoint     = v1.Checkpoint
	Task           = v1.Task
	Custom         = v1.Custom
)

// Event kinds (the oneof wrappers), aliased for type switches.
type (
	KindLifecycle      = v1.Event_Lifecycle
	KindMessageStart   = v1.Event_MessageStart
	KindMessageFinish  = v1.Event_MessageFinish
	KindBlockStart     = v1.Event_BlockStart
	KindBlockDelta     = v1.Event_BlockDelta
	KindBlockFinish    = v1.Event_BlockFinish
	KindToolStarted    = v1.Event_ToolStarted
	KindToolOutput     = v1.Event_ToolOutput
	KindToolFinished   = v1.Event_ToolFinished
	KindToolFailed     = v1.Event_ToolFailed
	KindInputRequested = v1.Event_InputRequested
	KindInputAnswered  = v1.Event_InputAnswered
	KindStateSnapshot  = v1.Event_StateSnapshot
	KindStateUpdate    = v1.Event_StateUpdate
	KindCheckpoint     = v1.Event_Checkpoint
	KindTask           = v1.Event_Task
	KindCustom         = v1.Event_Custom
	KindError          = v1.Event_Error
)

// Run statuses.
const (
	StatusStarted     = v1.RunStatus_RUN_STATUS_STARTED
	StatusRunning     = v1.RunStatus_RUN_STATUS_RUNNING
	StatusCompleted   = v1.RunStatus_RUN_STATUS_COMPLETED
	StatusFailed      = v1.RunStatus_RUN_STATUS_FAILED
	StatusInterrupted = v1.RunStatus_RUN_STATUS_INTERRUPTED
	StatusCancelled   = v1.RunStatus_RUN_STATUS_CANCELLED
)

// Block types.
const (
	BlockText      = v1.BlockType_BLOCK_TYPE_TEXT
	BlockReasoning = v1.BlockType_BLOCK_TYPE_REASONING
	BlockToolCall  = v1.BlockType_BLOCK_TYPE_TOOL_CALL
	BlockData      = v1.BlockType_BLOCK_TYPE_DATA
	BlockRef       = v1.BlockType_BLOCK_TYPE_REF
)

// Finish reasons.
const (
	FinishStop          = v1.FinishReason_FINISH_REASON_STOP
	FinishLength        = v1.FinishReason_FINISH_REASON_LENGTH
	FinishToolCalls     = v1.FinishReason_FINISH_REASON_TOOL_CALLS
	FinishContentFilter = v1.FinishReason_FINISH_REASON_CONTENT_FILTER
	FinishError         = v1.FinishReason_FINISH_REASON_ERROR
	FinishOther         = v1.FinishReason_FINISH_REASON_OTHER
)

// IsTerminal reports whether status ends a run when it is on the root
// namespace.
func IsTerminal(s RunStatus) bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusInterrupted, StatusCancelled:
		return true
	}
	return false
}

// TerminalOf returns the event's lifecycle status if the event ends its run
// (a terminal status on the root namespace), and false otherwise.
func TerminalOf(ev *Event) (RunStatus, bool) {
	lc := ev.GetLifecycle()
	if lc == nil || len(ev.GetNamespace()) != 0 || !IsTerminal(lc.GetStatus()) {
		return 0, false
	}
	return lc.GetStatus(), true
}

// Follows reports whether ev comes right after the thread's seq prev, so
// that a reader that has the thread's events up to prev misses none
// reading ev next: ev's seq is prev's next, or ev says that no event has
// the seqs between them (Event.skipped_after at or before prev: the end
// of a run whose owner died, numbered after the seqs the owner may have
// given its clients before the replay log stored them).
func Follows(ev *Event, prev uint64) bool {
	seq := ev.GetSeq()
	if seq == prev+1 {
		return true
	}
	return seq > prev && ev.SkippedAfter != nil && *ev.SkippedAfter <= prev
}

// Stamp sets the event's time to now if it is unset.
func Stamp(ev *Event, now time.Time) {
	if ev.TimeUnixNano == 0 {
		ev.TimeUnixNano = now.UnixNano()
	}
}

// Node payloads.
type v1Data = v1.Node_Data

// DataPayload returns a Node payload of inline bytes.
func DataPayload(b []byte) *v1.Node_Data { return &v1.Node_Data{Data: b} }

// RefPayload returns a Node payload referencing uri.
func RefPayload(uri string) *v1.Node_Ref { return &v1.Node_Ref{Ref: uri} }
