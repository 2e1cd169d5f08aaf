package evergreen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/interlingua-dev/interlingua/canonical"
)

// TestWireCode checks the abort table (reference section 3.9) over every
// canonical code, and its WebSocket form.
func TestWireCode(t *testing.T) {
	want := map[canonical.Code]connect.Code{
		canonical.CodeOK:                 connect.CodeInternal,
		canonical.CodeCanceled:           connect.CodeCanceled,
		canonical.CodeUnknown:            connect.CodeInternal,
		canonical.CodeInvalidArgument:    connect.CodeInvalidArgument,
		canonical.CodeDeadlineExceeded:   connect.CodeDeadlineExceeded,
		canonical.CodeNotFound:           connect.CodeNotFound,
		canonical.CodeAlreadyExists:      connect.CodeInternal,
		canonical.CodePermissionDenied:   connect.CodeInternal,
		canonical.CodeResourceExhausted:  connect.CodeResourceExhausted,
		canonical.CodeFailedPrecondition: connect.CodeFailedPrecondition,
		canonical.CodeAborted:            connect.CodeInternal,
		canonical.CodeOutOfRange:         connect.CodeInvalidArgument,
		canonical.CodeUnimplemented:      connect.CodeUnimplemented,
		canonical.CodeInternal:           connect.CodeInternal,
		canonical.CodeUnavailable:        connect.CodeUnavailable,
		canonical.CodeDataLoss:           connect.CodeInternal,
		canonical.CodeUnauthenticated:    connect.CodeInternal,
	}
	for _, c := range canonical.AllCodes {
		w, ok := want[c]
		if !ok {
			t.Fatalf("no expectation for %s", c)
		}
		if got := wireCode(c); got != w {
			t.Errorf("wireCode(%s) = %s, want %s", c, got, w)
		}
		if got := closeCode(c); got != 4000+int(w) {
			t.Errorf("closeCode(%s) = %d, want %d", c, got, 4000+int(w))
		}
		e := connectError(canonical.Errorf(c, "rule %d", c))
		if e.Code() != w || e.Message() != fmt.Sprintf("rule %d", c) {
			t.Errorf("connectError(%s) = %v", c, e)
		}
	}
}

// TestFromWire checks the backend's reading of an upstream status over
// every code: gRPC codes are canonical codes, marked as from the wire.
func TestFromWire(t *testing.T) {
	for _, c := range canonical.AllCodes {
		if c == canonical.CodeOK {
			continue
		}
		got := fromWire(connect.NewWireError(connect.Code(c), errors.New("boom")))
		if got.Code != c || !got.Wire || got.Message != "evergreen upstream: boom" {
			t.Errorf("fromWire(%s) = %+v", c, got)
		}
	}
	if fromWire(nil) != nil {
		t.Error("fromWire(nil) is not nil")
	}
	// connect-go's own unavailable (the dial failed) names the upstream's
	// address: the client is told the upstream did not answer, the log
	// gets the cause (issue 32 #9).
	dial := connect.NewError(connect.CodeUnavailable, errors.New("dial tcp 10.0.0.7:8080: connect: connection refused"))
	if got := fromWire(dial); got.Code != canonical.CodeUnavailable || got.Wire ||
		got.Message != "evergreen backend: the upstream did not answer" || got.Cause == nil || !strings.Contains(got.Cause.Error(), "10.0.0.7") {
		t.Errorf("fromWire(dial error) = %+v", got)
	}
	for _, tc := range []struct {
		err  error
		code canonical.Code
	}{
		{io.EOF, canonical.CodeUnavailable},
		{context.Canceled, canonical.CodeCanceled},
		{context.DeadlineExceeded, canonical.CodeDeadlineExceeded},
		{errors.New("dial tcp: refused"), canonical.CodeUnavailable},
		{connect.NewError(connect.Code(99), errors.New("odd")), canonical.CodeUnknown},
	} {
		if got := canonical.CodeOf(fromWire(tc.err)); got != tc.code {
			t.Errorf("fromWire(%v) code %s, want %s", tc.err, got, tc.code)
		}
	}
}
