package evergreen

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// wireCode is the reference's abort table (section 3.9), keyed by the
// canonical code of whatever ended the session: our own rule checks raise
// exactly the table's codes (INVALID_ARGUMENT, NOT_FOUND,
// RESOURCE_EXHAUSTED, FAILED_PRECONDITION, UNIMPLEMENTED), and an action
// whose run failed aborts with UNAVAILABLE when the upstream was
// unreachable and INTERNAL otherwise. Cancellation and deadlines of the
// session itself keep their codes.
func wireCode(c canonical.Code) connect.Code {
	switch c {
	case canonical.CodeInvalidArgument, canonical.CodeOutOfRange:
		return connect.CodeInvalidArgument
	case canonical.CodeNotFound:
		return connect.CodeNotFound
	case canonical.CodeResourceExhausted:
		return connect.CodeResourceExhausted
	case canonical.CodeFailedPrecondition:
		return connect.CodeFailedPrecondition
	case canonical.CodeUnimplemented:
		return connect.CodeUnimplemented
	case canonical.CodeUnavailable:
		return connect.CodeUnavailable
	case canonical.CodeCanceled:
		return connect.CodeCanceled
	case canonical.CodeDeadlineExceeded:
		return connect.CodeDeadlineExceeded
	}
	return connect.CodeInternal // unknown, internal, data_loss, aborted, already_exists, permission_denied, unauthenticated
}

// closeCode is the WebSocket form of wireCode: close code 4000 + the gRPC
// code (section 3.9).
func closeCode(c canonical.Code) int { return wsconn.AppCode(uint32(wireCode(c))) }

// connectError is the gRPC/Connect status that ends an aborted session.
func connectError(e *canonical.Error) *connect.Error {
	return connect.NewError(wireCode(e.Code), errors.New(e.Message))
}

// fromWire turns an upstream's status into a canonical error: gRPC and
// Connect codes are the canonical numbering, so the code is kept (the
// frontend that serves the client applies its own table). io.EOF is an
// upstream that ended the session without a status; context errors keep
// their codes.
func fromWire(err error) *canonical.Error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return canonical.AsError(err)
	}
	if errors.Is(err, io.EOF) {
		return canonical.Errorf(canonical.CodeUnavailable, "evergreen upstream ended the session without a status")
	}
	var ce *connect.Error
	if errors.As(err, &ce) && !connect.IsWireError(ce) && ce.Code() == connect.CodeUnavailable {
		return canonical.Unreachable("evergreen", err) // the transport's: its message names the address
	}
	if errors.As(err, &ce) {
		code := canonical.Code(ce.Code())
		if int(code) >= len(canonical.AllCodes) || code == canonical.CodeOK {
			code = canonical.CodeUnknown
		}
		return canonical.WireError(code, "evergreen upstream: "+ce.Message())
	}
	return canonical.Unreachable("evergreen", err)
}
