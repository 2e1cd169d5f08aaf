package agent

import (
	"errors"

	"github.com/interlingua-dev/interlingua/canonical"
)

// The agent protocol's error codes (CDDL ErrorCode), plus resume_gap, which
// the Python langgraph-api sends for subscription.reconnect and which we
// send only on that command's Python shape.
const (
	errInvalidArgument    = "invalid_argument"
	errUnknownCommand     = "unknown_command"
	errUnknownError       = "unknown_error"
	errNoSuchRun          = "no_such_run"
	errNoSuchSubscription = "no_such_subscription"
	errNoSuchNamespace    = "no_such_namespace"
	errNoSuchInterrupt    = "no_such_interrupt"
	errNoSuchCheckpoint   = "no_such_checkpoint"
	errPermissionDenied   = "permission_denied"
	errNotSupported       = "not_supported"
	errResumeGap          = "resume_gap"
)

// msgModelCallFailed is the message of a messages-channel error event
// that carries nothing more than "this message ended in error" (a message
// finished with reason error and no error event or failure after it): with
// code unknown, decoders read it as the message's finish reason only.
const msgModelCallFailed = "model call failed"

// wireCode is the agent protocol's error code for a canonical code. The wire
// has no codes for most canonical ones: the specific no_such_* codes are
// raised by the frontend where it knows which thing is missing (see
// protoError), and everything a client may fix by changing the command is
// invalid_argument, as the reference servers answer.
func wireCode(c canonical.Code) string {
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeNotFound, canonical.CodeAlreadyExists,
		canonical.CodeFailedPrecondition, canonical.CodeOutOfRange, canonical.CodeResourceExhausted:
		return errInvalidArgument
	case canonical.CodePermissionDenied, canonical.CodeUnauthenticated:
		return errPermissionDenied
	case canonical.CodeUnimplemented:
		return errNotSupported
	}
	return errUnknownError // ok, canceled, unknown, deadline_exceeded, aborted, internal, unavailable, data_loss
}

// canonicalCode is the canonical code for an agent protocol error code (the
// backend direction). It is not the inverse of wireCode: the no_such_* codes
// all become NotFound, and unknown strings Unknown.
func canonicalCode(s string) canonical.Code {
	switch s {
	case errInvalidArgument:
		return canonical.CodeInvalidArgument
	case errUnknownCommand, errNotSupported:
		return canonical.CodeUnimplemented
	case errNoSuchRun, errNoSuchSubscription, errNoSuchNamespace, errNoSuchInterrupt, errNoSuchCheckpoint:
		return canonical.CodeNotFound
	case errPermissionDenied:
		return canonical.CodePermissionDenied
	case errResumeGap:
		return canonical.CodeOutOfRange
	}
	return canonical.CodeUnknown // unknown_error and anything else
}

// protoError is an error in the agent protocol's own form: an ErrorResponse
// code and a message naming the field or rule.
type protoError struct {
	Code    string
	Message string
	// Extra holds additional keys for the error frame (since,
	// min_available_seq on a replay gap).
	Extra []extraField
}

type extraField struct {
	Key   string
	Value int64
}

func (e *protoError) Error() string { return e.Code + ": " + e.Message }

// perr returns a protoError.
func perr(code, msg string) *protoError { return &protoError{Code: code, Message: msg} }

// asProtoError converts any error to the wire form, mapping canonical codes
// through wireCode.
func asProtoError(err error) *protoError {
	var pe *protoError
	if errors.As(err, &pe) {
		return pe
	}
	ce := canonical.AsError(err)
	return &protoError{Code: wireCode(ce.Code), Message: ce.Message}
}

// httpStatus is the HTTP status of a transport-level failure (the only
// failures that do not answer 200 with an ErrorResponse, section 1.2).
func httpStatus(c canonical.Code) int {
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeFailedPrecondition, canonical.CodeOutOfRange:
		return 400
	case canonical.CodeResourceExhausted:
		return 413
	case canonical.CodeNotFound:
		return 404
	case canonical.CodePermissionDenied:
		return 403
	case canonical.CodeUnauthenticated:
		return 401
	case canonical.CodeUnavailable:
		return 503
	case canonical.CodeUnimplemented:
		return 501
	}
	return 500
}

// codeFromHTTP is the canonical code of an upstream's non-200 answer
// (backend direction; not the inverse of httpStatus).
func codeFromHTTP(status int) canonical.Code {
	switch {
	case status == 400 || status == 413 || status == 422:
		return canonical.CodeInvalidArgument
	case status == 401:
		return canonical.CodeUnauthenticated
	case status == 403:
		return canonical.CodePermissionDenied
	case status == 404:
		return canonical.CodeNotFound
	case status == 408 || status == 504:
		return canonical.CodeDeadlineExceeded
	case status == 409:
		return canonical.CodeAborted
	case status == 429:
		return canonical.CodeResourceExhausted
	case status == 501:
		return canonical.CodeUnimplemented
	case status >= 500:
		return canonical.CodeUnavailable
	}
	return canonical.CodeUnknown
}
