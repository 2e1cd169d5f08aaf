package sse

import (
	"strconv"

	"github.com/interlingua-dev/interlingua/canonical"
)

// errEnded is returned by Feed and End after End.
var errEnded = canonical.Errorf(canonical.CodeFailedPrecondition, "sse: parser used after End")

// LimitError reports that a stream needed more than Parser.MaxEventBytes.
// Its cause (see Unwrap) is a canonical ResourceExhausted error, so
// canonical.CodeOf reports that code.
type LimitError struct {
	// Limit is the MaxEventBytes in force.
	Limit int
	// What names what exceeded it: "line" when one line alone is longer
	// than Limit, "event" when the line fits but not beside the pending
	// event's data, event type and the last event ID. Like Size, it can
	// depend on chunking.
	What string
	// Size is the number of bytes that would have been held. A line cut by
	// a chunk's end is counted as far as it had arrived, so Size (unlike
	// whether there is an error) can depend on chunking.
	Size int
}

// Error returns a message naming the limit. It leaves out What and Size,
// which can depend on where the stream was cut into chunks: the same
// stream gets the same message however it arrives.
func (e *LimitError) Error() string {
	return "sse: an event exceeds MaxEventBytes (" + strconv.Itoa(e.Limit) + " bytes)"
}

// Unwrap returns the error as a canonical ResourceExhausted *canonical.Error.
func (e *LimitError) Unwrap() error {
	return &canonical.Error{Code: canonical.CodeResourceExhausted, Message: e.Error()}
}
