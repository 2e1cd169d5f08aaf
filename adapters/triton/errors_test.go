package triton

import (
	"net/http/httptest"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

func TestStatusOfEveryCode(t *testing.T) {
	want := map[canonical.Code]int{
		canonical.CodeOK:                 200,
		canonical.CodeCanceled:           400, // CANCELLED
		canonical.CodeUnknown:            400, // UNKNOWN
		canonical.CodeInvalidArgument:    400, // INVALID_ARG
		canonical.CodeDeadlineExceeded:   503,
		canonical.CodeNotFound:           404, // NOT_FOUND
		canonical.CodeAlreadyExists:      400, // ALREADY_EXISTS
		canonical.CodePermissionDenied:   403, // restricted API
		canonical.CodeResourceExhausted:  400, // --http-max-input-size breaches
		canonical.CodeFailedPrecondition: 400,
		canonical.CodeAborted:            500,
		canonical.CodeOutOfRange:         400,
		canonical.CodeUnimplemented:      501, // UNSUPPORTED
		canonical.CodeInternal:           500, // INTERNAL
		canonical.CodeUnavailable:        503, // UNAVAILABLE
		canonical.CodeDataLoss:           500,
		canonical.CodeUnauthenticated:    403,
	}
	for _, c := range canonical.AllCodes {
		w, ok := want[c]
		if !ok {
			t.Fatalf("no expectation for %v", c)
		}
		if got := statusOf(c); got != w {
			t.Errorf("statusOf(%v) = %d, want %d", c, got, w)
		}
		// Reading our own status back lands on a code of the same status.
		if back := codeOf(statusOf(c), ""); c != canonical.CodeOK && statusOf(back) != statusOf(c) {
			t.Errorf("codeOf(statusOf(%v)) = %v, whose status is %d, not %d", c, back, statusOf(back), statusOf(c))
		}
	}
}

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		status int
		msg    string
		want   canonical.Code
	}{
		{200, "", canonical.CodeOK},
		{400, "bad", canonical.CodeInvalidArgument},
		{400, "Request for unknown model: 'x' is not found", canonical.CodeNotFound},
		{401, "", canonical.CodeUnauthenticated},
		{403, "", canonical.CodePermissionDenied},
		{404, "Request for unknown model: 'x' version 3 is not found", canonical.CodeNotFound},
		{405, "", canonical.CodeUnimplemented},
		{408, "", canonical.CodeDeadlineExceeded},
		{413, "", canonical.CodeInvalidArgument},
		{418, "", canonical.CodeInvalidArgument},
		{429, "", canonical.CodeResourceExhausted},
		{499, "", canonical.CodeCanceled},
		{500, "", canonical.CodeInternal},
		{501, "", canonical.CodeUnimplemented},
		{502, "", canonical.CodeUnavailable},
		{503, "", canonical.CodeUnavailable},
		{504, "", canonical.CodeDeadlineExceeded},
		{599, "", canonical.CodeUnknown},
		{302, "", canonical.CodeUnknown},
	} {
		if got := codeOf(tc.status, tc.msg); got != tc.want {
			t.Errorf("codeOf(%d, %q) = %v, want %v", tc.status, tc.msg, got, tc.want)
		}
	}
}

func TestWriteError(t *testing.T) {
	rec := httptest.NewRecorder()
	writeError(rec, 400, "a \"quoted\"\nmessage")
	if rec.Code != 400 || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != `{"error":"a \"quoted\"\nmessage"}` {
		t.Fatalf("%d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}
