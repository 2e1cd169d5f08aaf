package anthropic

import (
	"net/http"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Anthropic's error types (anthropic-sdk-typescript src/resources/shared.ts
// ErrorType; platform.claude.com/docs/en/api/errors).
const (
	errInvalidRequest = "invalid_request_error"
	errAuthentication = "authentication_error"
	errBilling        = "billing_error"
	errPermission     = "permission_error"
	errNotFound       = "not_found_error"
	errTooLarge       = "request_too_large"
	errRateLimit      = "rate_limit_error"
	errAPI            = "api_error"
	errTimeout        = "timeout_error"
	errOverloaded     = "overloaded_error"
)

// errorTypeOf is the error type and HTTP status the frontend answers a
// canonical code with before the stream (the errors doc's table).
func errorTypeOf(c canonical.Code) (string, int) {
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeFailedPrecondition, canonical.CodeOutOfRange,
		canonical.CodeAlreadyExists, canonical.CodeAborted, canonical.CodeUnimplemented:
		return errInvalidRequest, http.StatusBadRequest
	case canonical.CodeUnauthenticated:
		return errAuthentication, http.StatusUnauthorized
	case canonical.CodePermissionDenied:
		return errPermission, http.StatusForbidden
	case canonical.CodeNotFound:
		return errNotFound, http.StatusNotFound
	case canonical.CodeResourceExhausted:
		return errRateLimit, http.StatusTooManyRequests
	case canonical.CodeDeadlineExceeded:
		return errTimeout, http.StatusGatewayTimeout
	case canonical.CodeUnavailable:
		return errOverloaded, 529
	}
	return errAPI, http.StatusInternalServerError // internal, unknown, data_loss, canceled
}

// streamErrorTypeOf is the error type of an event: error written after the
// 200 (reference 11.1): unavailable and resource_exhausted keep their
// retryable types, a deadline is timeout_error, anything else api_error.
func streamErrorTypeOf(c canonical.Code) string {
	switch c {
	case canonical.CodeUnavailable:
		return errOverloaded
	case canonical.CodeResourceExhausted:
		return errRateLimit
	case canonical.CodeDeadlineExceeded:
		return errTimeout
	}
	return errAPI
}

// codeOf is the canonical code of an upstream error: its error type when
// it has a known one, else its HTTP status (0 for an error event). It is
// not the inverse of errorTypeOf: invalid_request_error covers several
// codes, and billing_error has no code of its own.
func codeOf(status int, errType string) canonical.Code {
	switch errType {
	case errInvalidRequest, errTooLarge: // too large: not retried as a rate limit
		return canonical.CodeInvalidArgument
	case errAuthentication:
		return canonical.CodeUnauthenticated
	case errBilling:
		return canonical.CodeFailedPrecondition
	case errPermission:
		return canonical.CodePermissionDenied
	case errNotFound:
		return canonical.CodeNotFound
	case errRateLimit:
		return canonical.CodeResourceExhausted
	case errAPI:
		return canonical.CodeInternal
	case errTimeout:
		return canonical.CodeDeadlineExceeded
	case errOverloaded:
		return canonical.CodeUnavailable
	}
	return canonical.CodeOfHTTPStatus(status)
}

// appendError appends Anthropic's error object.
func appendError(b []byte, errType, msg, requestID string) []byte {
	out, err := json.Marshal(errorBody{Type: "error", Error: errorDetail{Type: errType, Message: msg}, RequestID: requestID})
	if err != nil {
		out = []byte(`{"type":"error","error":{"type":"api_error","message":"internal error"}}`)
	}
	return append(b, out...)
}

// writeError answers with Anthropic's error object, as application/json.
func writeError(w http.ResponseWriter, status int, errType, msg, requestID string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if requestID != "" {
		h.Set("Request-Id", requestID)
	}
	if status == 529 || status == http.StatusTooManyRequests {
		h.Set("X-Should-Retry", "true")
	}
	w.WriteHeader(status)
	_, _ = w.Write(appendError(nil, errType, msg, requestID))
}

// writeCanonicalError answers e with the type and status of its code.
func writeCanonicalError(w http.ResponseWriter, e *canonical.Error, requestID string) {
	t, status := errorTypeOf(e.Code)
	writeError(w, status, t, e.Message, requestID)
}
