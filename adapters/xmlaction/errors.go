package xmlaction

import (
	"fmt"

	"github.com/interlingua-dev/interlingua/canonical"
)

// httpStatus is the HTTP status of an error the frontend reports before the
// stream starts, keyed by canonical code (Connect's table, connect-go
// protocol_connect.go connectCodeToHTTP). Once the stream has started an
// error travels in band as an <error> element.
func httpStatus(c canonical.Code) int {
	switch c {
	case canonical.CodeOK:
		return 200
	case canonical.CodeCanceled:
		return 499
	case canonical.CodeInvalidArgument, canonical.CodeOutOfRange, canonical.CodeFailedPrecondition:
		return 400
	case canonical.CodeDeadlineExceeded:
		return 504
	case canonical.CodeNotFound:
		return 404
	case canonical.CodeAlreadyExists, canonical.CodeAborted:
		return 409
	case canonical.CodePermissionDenied:
		return 403
	case canonical.CodeResourceExhausted:
		return 429
	case canonical.CodeUnimplemented:
		return 501
	case canonical.CodeUnavailable:
		return 503
	case canonical.CodeUnauthenticated:
		return 401
	}
	return 500 // unknown, internal, data_loss
}

// wireCode is the code attribute of the <error> and <observation> elements
// the renderer writes: the canonical code's snake_case name.
func wireCode(c canonical.Code) string { return c.String() }

// The action error kinds: what the decoder and the executor report when an
// action cannot run. The kind leads the tool error's message and travels in
// the tool_failed event's "xml.error" extension for decoder errors.
const (
	kindEmptyBody         = "empty_body"
	kindInvalidJSON       = "invalid_json"
	kindNotAnObject       = "not_an_object"
	kindMissingName       = "missing_name"
	kindInvalidField      = "invalid_field"
	kindInvalidAttribute  = "invalid_attribute"
	kindDuplicateID       = "duplicate_id"
	kindUnterminated      = "unterminated_action"
	kindBodyTooLarge      = "body_too_large"
	kindTooManyActions    = "too_many_actions"
	kindUnknownDependency = "unknown_dependency"
	kindDependencyCycle   = "dependency_cycle"
	kindDependencyFailed  = "dependency_failed"
	kindNotRun            = "not_run"
)

// kindCode maps an action error kind (the XML wire's error form) to its
// canonical code: the other direction's one table.
func kindCode(kind string) canonical.Code {
	switch kind {
	case kindEmptyBody, kindInvalidJSON, kindNotAnObject, kindMissingName,
		kindInvalidField, kindInvalidAttribute, kindDuplicateID,
		kindUnterminated:
		return canonical.CodeInvalidArgument
	case kindBodyTooLarge, kindTooManyActions:
		return canonical.CodeResourceExhausted
	case kindUnknownDependency, kindDependencyCycle, kindDependencyFailed:
		return canonical.CodeFailedPrecondition
	case kindNotRun:
		return canonical.CodeAborted
	}
	return canonical.CodeUnknown
}

// actionError is why an action cannot run.
type actionError struct {
	kind   string
	detail string
}

// toCanonical is the tool error reported for action id.
func (e *actionError) toCanonical(id string) *canonical.Error {
	return canonical.Errorf(kindCode(e.kind), "action %q: %s: %s", id, e.kind, e.detail)
}

func actionErrf(kind, format string, args ...any) *actionError {
	return &actionError{kind: kind, detail: fmt.Sprintf(format, args...)}
}
