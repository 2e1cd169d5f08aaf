package canonical

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Code is a canonical error code. The numbering is gRPC's (google.rpc.Code),
// which connect.Code shares, so conversion to gRPC and Connect is a cast.
type Code uint32

// The canonical codes.
const (
	CodeOK                 Code = 0
	CodeCanceled           Code = 1
	CodeUnknown            Code = 2
	CodeInvalidArgument    Code = 3
	CodeDeadlineExceeded   Code = 4
	CodeNotFound           Code = 5
	CodeAlreadyExists      Code = 6
	CodePermissionDenied   Code = 7
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeAborted            Code = 10
	CodeOutOfRange         Code = 11
	CodeUnimplemented      Code = 12
	CodeInternal           Code = 13
	CodeUnavailable        Code = 14
	CodeDataLoss           Code = 15
	CodeUnauthenticated    Code = 16
)

// AllCodes lists every code, OK included, for tests that must cover each.
var AllCodes = []Code{
	CodeOK, CodeCanceled, CodeUnknown, CodeInvalidArgument, CodeDeadlineExceeded,
	CodeNotFound, CodeAlreadyExists, CodePermissionDenied, CodeResourceExhausted,
	CodeFailedPrecondition, CodeAborted, CodeOutOfRange, CodeUnimplemented,
	CodeInternal, CodeUnavailable, CodeDataLoss, CodeUnauthenticated,
}

var codeNames = [...]string{
	"ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded",
	"not_found", "already_exists", "permission_denied", "resource_exhausted",
	"failed_precondition", "aborted", "out_of_range", "unimplemented",
	"internal", "unavailable", "data_loss", "unauthenticated",
}

// String returns the code's snake_case name, as Connect spells it.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "code_" + strconv.FormatUint(uint64(c), 10)
}

// ParseCode is the inverse of Code.String.
func ParseCode(s string) (Code, bool) {
	for i, n := range codeNames {
		if n == s {
			return Code(i), true
		}
	}
	return CodeUnknown, false
}

// Error is an error with a canonical code. Wire is true when a peer sent the
// error (it crossed a wire into us) rather than our own code raising it.
type Error struct {
	Code    Code
	Message string
	Wire    bool
	Cause   error
}

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unreachable is the error of an upstream that did not answer: the client
// is told which backend failed, never where our upstreams are; cause (the
// address, the dial error) is kept for the run-end log line.
func Unreachable(backend string, cause error) *Error {
	return &Error{Code: CodeUnavailable, Message: backend + " backend: the upstream did not answer", Cause: cause}
}

// CodeOfHTTPStatus is the canonical code of an upstream's HTTP error
// status, for the HTTP backends (Triton, OpenAI, Responses, Anthropic),
// whose own tables read their protocol's error types and messages first
// and fall back to it. It is not the inverse of any frontend's status
// table: 400 covers every invalid request. A 2xx is OK; another status
// without a meaning of its own is InvalidArgument (4xx) or Unknown.
func CodeOfHTTPStatus(status int) Code {
	switch status {
	// A request too large for the upstream is not retried as a rate limit
	// is (a frontend answers resource_exhausted with 429, which SDKs
	// retry): it is the request's fault.
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge:
		return CodeInvalidArgument
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusPaymentRequired: // a bill to pay (Anthropic's billing_error)
		return CodeFailedPrecondition
	case http.StatusForbidden:
		return CodePermissionDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return CodeUnimplemented
	case http.StatusConflict:
		return CodeAborted
	case http.StatusTooManyRequests:
		return CodeResourceExhausted
	case 499: // client closed request (nginx)
		return CodeCanceled
	case http.StatusInternalServerError:
		return CodeInternal
	case http.StatusBadGateway, http.StatusServiceUnavailable, 529: // 529: Anthropic's overloaded
		return CodeUnavailable
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return CodeDeadlineExceeded
	}
	switch {
	case status >= 200 && status < 300:
		return CodeOK
	case status >= 400 && status < 500:
		return CodeInvalidArgument
	}
	return CodeUnknown
}

// WireError returns an *Error that a peer sent.
func WireError(code Code, msg string) *Error {
	return &Error{Code: code, Message: msg, Wire: true}
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Proto returns the error as a canonical Error message.
func (e *Error) Proto() *ErrorProto { return &ErrorProto{Code: uint32(e.Code), Message: e.Message} }

// CodeOf returns the canonical code of err: its *Error code, Canceled or
// DeadlineExceeded for context errors, Unknown otherwise, OK for nil.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return CodeDeadlineExceeded
	}
	return CodeUnknown
}

// AsError converts any error to an *Error, keeping an existing one and
// wrapping context errors with their codes (as connect-go's
// wrapIfContextError does). It returns a literal nil for nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	return &Error{Code: CodeOf(err), Message: err.Error(), Cause: err}
}

// FromProto converts a canonical Error message to an *Error (nil for nil).
func FromProto(p *ErrorProto) *Error {
	if p == nil {
		return nil
	}
	return &Error{Code: Code(p.GetCode()), Message: p.GetMessage(), Wire: true}
}
