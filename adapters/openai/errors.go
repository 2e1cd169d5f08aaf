package openai

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// statusOf is the HTTP status the frontend answers a canonical code with
// before the stream, among OpenAI's (400, 401, 403, 404, 409, 429, 500,
// 503). Our own limits (ResourceExhausted) answer 429 as a rate limit does.
func statusOf(c canonical.Code) int {
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeFailedPrecondition, canonical.CodeOutOfRange:
		return http.StatusBadRequest
	case canonical.CodeUnauthenticated:
		return http.StatusUnauthorized
	case canonical.CodePermissionDenied:
		return http.StatusForbidden
	case canonical.CodeNotFound:
		return http.StatusNotFound
	case canonical.CodeAlreadyExists, canonical.CodeAborted:
		return http.StatusConflict
	case canonical.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case canonical.CodeCanceled:
		return 499 // the client left; nobody reads it
	case canonical.CodeUnimplemented:
		return http.StatusNotImplemented
	case canonical.CodeUnavailable:
		return http.StatusServiceUnavailable
	case canonical.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError // internal, unknown, data_loss
}

// errorType is the error object's type for a status: OpenAI writes
// invalid_request_error for every 4xx (401 and 404 included) but 429,
// which is rate_limit_exceeded's "requests", and server_error for 5xx.
func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "requests"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// codeOfWire is the canonical code of an error object's code (a string:
// our frontend's canonical code names, or OpenAI's codes; an integer: the
// HTTP status, as vLLM writes it), falling back to status (0 when the
// error came inside a stream: internal).
func codeOfWire(code json.Value, typ string, status int) canonical.Code {
	switch code.Kind() {
	case '"':
		var s string
		if json.Unmarshal(code, &s) == nil {
			if c, ok := codeOfName(s); ok {
				return c
			}
		}
	case '0':
		if n, err := strconv.Atoi(string(code)); err == nil && n >= 400 {
			return canonical.CodeOfHTTPStatus(n)
		}
	}
	if status != 0 { // the status says more than a generic type
		return canonical.CodeOfHTTPStatus(status)
	}
	if c, ok := codeOfName(typ); ok {
		return c
	}
	return canonical.CodeInternal
}

// codeOfName reads a code or type string: a canonical code name, or one
// of OpenAI's (and vLLM's exception names).
func codeOfName(s string) (canonical.Code, bool) {
	switch s {
	case "model_not_found", "NotFoundError", "not_found_error":
		return canonical.CodeNotFound, true
	case "invalid_api_key", "AuthenticationError":
		return canonical.CodeUnauthenticated, true
	case "rate_limit_exceeded", "insufficient_quota", "RateLimitError":
		return canonical.CodeResourceExhausted, true
	case "context_length_exceeded", "unsupported_parameter", "invalid_value", "invalid_type",
		"missing_required_parameter", "BadRequestError":
		return canonical.CodeInvalidArgument, true
	case "server_error", "InternalServerError", "api_error":
		return canonical.CodeInternal, true
	case "ServiceUnavailableError", "overloaded_error":
		return canonical.CodeUnavailable, true
	}
	if c, ok := canonical.ParseCode(s); ok && c != canonical.CodeOK {
		return c, true
	}
	return 0, false
}

// apiError is an error the frontend answers before the stream, in
// OpenAI's form.
type apiError struct {
	status int
	msg    string
	param  string // "" for null
	code   string // "" for null
}

// invalid is a 400 naming param, with OpenAI's code for the rule broken
// (missing_required_parameter, invalid_type, invalid_value,
// unsupported_parameter).
func invalid(param, code, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: msg, param: param, code: code}
}

// fromCanonical is the apiError of a canonical error: its code's status,
// and the code's name as the error code, so a client of ours reads the
// code back exactly.
func fromCanonical(e *canonical.Error) *apiError {
	return &apiError{status: statusOf(e.Code), msg: e.Message, code: e.Code.String()}
}

// modelNotFound is OpenAI's answer for a model that is not routed (or
// that the caller's key may not use).
func modelNotFound(name string) *apiError {
	return &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found",
		msg: "The model `" + name + "` does not exist or you do not have access to it."}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// body is the error's JSON.
func (e *apiError) body() []byte {
	return errorJSON(errorObject{Message: e.msg, Type: errorType(e.status), Param: nullable(e.param), Code: nullable(e.code)})
}

// errorJSON marshals an error object inside {"error":...}.
func errorJSON(o errorObject) []byte {
	out, err := json.Marshal(errorBody{Error: o})
	if err != nil {
		return []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":null}}`)
	}
	return out
}

// streamError is the data of the error chunk written after the stream
// started (reference 10.1): type server_error, code the canonical code's
// name.
func streamError(e *canonical.Error) []byte {
	code := e.Code.String()
	return errorJSON(errorObject{Message: e.Message, Type: "server_error", Code: &code})
}

// write answers with the error.
func (e *apiError) write(w http.ResponseWriter) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="interlingua"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(append(e.body(), '\n'))
}

// trimMessage bounds an upstream's error text kept in a message.
func trimMessage(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > 512 {
		s = strings.ToValidUTF8(s[:512], "")
	}
	return s
}
