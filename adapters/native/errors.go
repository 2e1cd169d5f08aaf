package native

import "github.com/interlingua-dev/interlingua/canonical"

// httpStatus is the HTTP status for a canonical code, as Connect's protocol
// maps them (connect-go protocol_connect.go connectCodeToHTTP).
func httpStatus(c canonical.Code) int {
	switch c {
	case canonical.CodeOK:
		return 200
	case canonical.CodeCanceled:
		return 499
	case canonical.CodeInvalidArgument, canonical.CodeOutOfRange:
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
	case canonical.CodeFailedPrecondition:
		return 400
	case canonical.CodeUnimplemented:
		return 501
	case canonical.CodeUnavailable:
		return 503
	case canonical.CodeUnauthenticated:
		return 401
	}
	return 500 // unknown, internal, data_loss
}
