package glide

import (
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Glide's error names (pkg/api/schemas/errors.go at 0.1.0-rc.1).
const (
	namePayloadParse         = "payload_parse_error"
	nameRouterNotFound       = "router_not_found"
	nameRouteNotFound        = "route_not_found"
	nameUnsupportedMedia     = "unsupported_media_type"
	nameNoModelConfigured    = "no_model_configured"
	nameModelUnavailable     = "model_unavailable"
	nameAllModelsUnavailable = "all_models_unavailable"
	nameUnknown              = "unknown_error"
)

// errorName is the Glide error name for a canonical code. It is not the
// inverse of codeOf: several codes share a name, and errorMessage then
// prefixes the message with the code so that codeOf can recover it.
func errorName(c canonical.Code) string {
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeOutOfRange, canonical.CodeAlreadyExists:
		return namePayloadParse // a bad or duplicate request frame
	case canonical.CodeNotFound:
		return nameRouterNotFound
	case canonical.CodeUnimplemented:
		return nameNoModelConfigured // no model can stream for the router
	case canonical.CodeUnavailable:
		return nameAllModelsUnavailable
	}
	// canceled, unknown, deadline_exceeded, permission_denied,
	// resource_exhausted, failed_precondition, aborted, internal,
	// data_loss, unauthenticated (and ok, which is never an error).
	return nameUnknown
}

// codeOfName is the canonical code a Glide error name stands for when its
// message carries no code prefix.
func codeOfName(name string) canonical.Code {
	switch name {
	case namePayloadParse, nameUnsupportedMedia:
		return canonical.CodeInvalidArgument
	case nameRouterNotFound, nameRouteNotFound:
		return canonical.CodeNotFound
	case nameNoModelConfigured:
		return canonical.CodeUnimplemented
	case nameModelUnavailable, nameAllModelsUnavailable:
		return canonical.CodeUnavailable
	}
	return canonical.CodeUnknown // unknown_error and names we do not know
}

// errorMessage is the wire message for err under name: the message itself
// when name already determines the code, else "<code>: <message>" (the
// form canonical.Error.Error uses), so codeOf recovers the code.
func errorMessage(name string, code canonical.Code, msg string) string {
	if codeOfName(name) == code {
		return msg
	}
	return code.String() + ": " + msg
}

// codeOf is the canonical code and message of a Glide error frame: a
// "<code>: " prefix written by errorMessage wins when that code maps to
// name (any code, for the non-terminal model_unavailable); upstream
// Glide's unknown_error carries a bare context error ("context canceled",
// "context deadline exceeded"); otherwise the name's code.
func codeOf(name, msg string) (canonical.Code, string) {
	if i := strings.Index(msg, ": "); i > 0 {
		c, ok := canonical.ParseCode(msg[:i])
		if ok && c != canonical.CodeOK && c != codeOfName(name) && (errorName(c) == name || name == nameModelUnavailable) {
			return c, msg[i+2:]
		}
	}
	if name == nameUnknown {
		switch {
		case strings.HasPrefix(msg, "context canceled"):
			return canonical.CodeCanceled, msg
		case strings.HasPrefix(msg, "context deadline exceeded"):
			return canonical.CodeDeadlineExceeded, msg
		}
	}
	return codeOfName(name), msg
}

// finishName is Glide's finish_reason for a canonical finish reason
// (pkg/api/schemas/chat_stream.go; Glide has no tool calls).
func finishName(r canonical.FinishReason) string {
	switch r {
	case canonical.FinishStop:
		return "complete"
	case canonical.FinishLength:
		return "max_tokens"
	case canonical.FinishContentFilter:
		return "content_filtered"
	case canonical.FinishError:
		return "error"
	}
	return "other" // tool_calls, other, unspecified
}

// finishReason is the canonical finish reason for a Glide finish_reason.
func finishReason(s string) canonical.FinishReason {
	switch s {
	case "complete":
		return canonical.FinishStop
	case "max_tokens":
		return canonical.FinishLength
	case "content_filtered":
		return canonical.FinishContentFilter
	case "error":
		return canonical.FinishError
	}
	return canonical.FinishOther
}
