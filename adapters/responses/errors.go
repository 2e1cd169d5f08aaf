package responses

import (
	"fmt"
	"net/http"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// statusOf is the HTTP status the frontend answers a canonical code with,
// before the stream (OpenAI's statuses: 400 invalid request, 401 bad key,
// 403, 404 unknown model or response, 409, 429 rate limit, 500 server
// error, 503 overloaded). Our own limits (ResourceExhausted) answer 429 as
// a rate limit does; a body over the size limit is refused by the frontend
// with 413 itself.
func statusOf(c canonical.Code) int {
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeFailedPrecondition, canonical.CodeOutOfRange, canonical.CodeCanceled:
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
	case canonical.CodeUnimplemented:
		return http.StatusNotImplemented
	case canonical.CodeUnavailable:
		return http.StatusServiceUnavailable
	case canonical.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError // internal, unknown, data_loss
}

// errorType is the error object's type for a status: OpenAI's
// invalid_request_error for 4xx, requests for 429, server_error for 5xx.
func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "requests"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// failureCode is the code of a failed response's error (and of the error
// event before it) for a canonical code: OpenAI's ResponseError codes where
// one fits, the canonical code's name otherwise (a client reads it as a
// string).
func failureCode(c canonical.Code) string {
	switch c {
	case canonical.CodeInternal, canonical.CodeUnknown, canonical.CodeDataLoss:
		return "server_error"
	case canonical.CodeResourceExhausted:
		return "rate_limit_exceeded"
	case canonical.CodeInvalidArgument:
		return "invalid_prompt"
	}
	return c.String()
}

// codeOfFailure is the inverse of failureCode for an upstream's failure
// code; an unknown one is internal.
func codeOfFailure(code string) canonical.Code {
	switch code {
	case "server_error", "":
		return canonical.CodeInternal
	case "rate_limit_exceeded":
		return canonical.CodeResourceExhausted
	case "invalid_prompt", "invalid_request_error", "previous_response_not_found", "invalid_image", "invalid_image_format",
		"invalid_base64_image", "invalid_image_url", "image_too_large", "image_too_small", "image_parse_error",
		"invalid_image_mode", "unsupported_image_media_type", "empty_image_file", "context_length_exceeded":
		return canonical.CodeInvalidArgument
	case "vector_store_timeout":
		return canonical.CodeDeadlineExceeded
	}
	if c, ok := canonical.ParseCode(code); ok && c != canonical.CodeOK {
		return c
	}
	return canonical.CodeInternal
}

// apiError is an error answered before the stream, in OpenAI's form.
type apiError struct {
	status int
	code   string // "" for null
	param  string // "" for null
	msg    string
	typ    string // "" for the status's type
}

// fromCanonical is the apiError of a canonical error.
func fromCanonical(e *canonical.Error) *apiError {
	return &apiError{status: statusOf(e.Code), msg: e.Message}
}

// invalid is a 400 naming param.
func invalid(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, param: param, msg: msg}
}

// object is the error object of the error's JSON.
func (e *apiError) object() errorBodyError {
	o := errorBodyError{Message: e.msg, Type: e.typ}
	if o.Type == "" {
		o.Type = errorType(e.status)
	}
	if e.param != "" {
		o.Param = &e.param
	}
	if e.code != "" {
		o.Code = &e.code
	}
	return o
}

// body is the error's JSON.
func (e *apiError) body() []byte {
	out, err := json.Marshal(errorBody{Error: e.object()})
	if err != nil {
		return []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":null}}`)
	}
	return out
}

// socketMessage is the error as a WebSocket's error message: the HTTP
// error's object, with the status it would have been answered with.
func (e *apiError) socketMessage() []byte {
	out, err := json.Marshal(wsError{Type: "error", Status: e.status, Error: e.object()})
	if err != nil {
		return []byte(`{"type":"error","status":500,"error":{"message":"internal error","type":"server_error","param":null,"code":null}}`)
	}
	return out
}

// modelNotFound is OpenAI's answer for a model the caller cannot use.
func modelNotFound(model string) *apiError {
	return &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found",
		msg: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)}
}

// write answers with the error.
func (e *apiError) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(append(e.body(), '\n'))
}
