package triton

import (
	"net/http"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// statusOf is the HTTP status the frontend answers a canonical code with:
// Triton's HttpCodeFromError applied to the Triton error code nearest to
// the canonical one. Triton's codes are INTERNAL (500), NOT_FOUND (404),
// UNAVAILABLE (503), UNSUPPORTED (501) and UNKNOWN, INVALID_ARG,
// ALREADY_EXISTS, CANCELLED (400); its restricted-API refusal is 403.
//
// An unknown model is not NOT_FOUND on this wire: Triton reports it as
// INVALID_ARG, 400 — the frontend raises it with CodeInvalidArgument. Our
// own limits (CodeResourceExhausted) answer 400, as Triton's
// --http-max-input-size breaches do.
func statusOf(c canonical.Code) int {
	switch c {
	case canonical.CodeOK:
		return http.StatusOK
	case canonical.CodeNotFound:
		return http.StatusNotFound
	case canonical.CodeUnavailable, canonical.CodeDeadlineExceeded:
		return http.StatusServiceUnavailable
	case canonical.CodeUnimplemented:
		return http.StatusNotImplemented
	case canonical.CodePermissionDenied, canonical.CodeUnauthenticated:
		return http.StatusForbidden
	case canonical.CodeUnknown, canonical.CodeInvalidArgument, canonical.CodeAlreadyExists,
		canonical.CodeCanceled, canonical.CodeResourceExhausted, canonical.CodeFailedPrecondition,
		canonical.CodeOutOfRange:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError // internal, aborted, data_loss
}

// unknownModelPrefix starts Triton's unknown-model messages, which come
// with status 400 (unknown name) or 404 (unknown version).
const unknownModelPrefix = "Request for unknown model:"

// codeOf is the canonical code of an upstream Triton error: its HTTP
// status, and its message where the status is ambiguous. It is not the
// inverse of statusOf: Triton's 400 covers INVALID_ARG, UNKNOWN,
// ALREADY_EXISTS and CANCELLED, read as InvalidArgument unless the message
// names an unknown model.
func codeOf(status int, msg string) canonical.Code {
	if status == http.StatusBadRequest && strings.HasPrefix(msg, unknownModelPrefix) {
		return canonical.CodeNotFound
	}
	return canonical.CodeOfHTTPStatus(status)
}

// errorBody is Triton's error object {"error":"<msg>"}.
type errorBody struct {
	Error string `json:"error"`
}

// appendError appends Triton's error object.
func appendError(b []byte, msg string) []byte {
	out, err := json.Marshal(errorBody{Error: msg}, writeOptions)
	if err != nil {
		out = []byte(`{"error":"internal error"}`)
	}
	return append(b, out...)
}

// writeError answers with Triton's error object and status, as
// application/json.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(appendError(nil, msg))
}
