package responses

import (
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

// TestErrorTables runs every canonical code through the frontend's status
// and failure-code tables and back through the backend's: what our
// backend reads from our frontend is the code sent, or the stated nearest
// one.
func TestErrorTables(t *testing.T) {
	for c := canonical.CodeOK + 1; c <= canonical.CodeUnauthenticated; c++ {
		status := statusOf(c)
		if status < 400 || status > 599 {
			t.Errorf("%s: status %d", c, status)
		}
		viaStatus := canonical.CodeOfHTTPStatus(status)
		viaFailure := codeOfFailure(failureCode(c))
		switch c {
		case canonical.CodeFailedPrecondition, canonical.CodeOutOfRange, canonical.CodeCanceled:
			if viaStatus != canonical.CodeInvalidArgument {
				t.Errorf("%s: %d reads back as %s, want invalid_argument", c, status, viaStatus)
			}
		case canonical.CodeAlreadyExists:
			if viaStatus != canonical.CodeAborted {
				t.Errorf("%s: %d reads back as %s, want aborted", c, status, viaStatus)
			}
		case canonical.CodeUnknown, canonical.CodeDataLoss:
			if viaStatus != canonical.CodeInternal {
				t.Errorf("%s: %d reads back as %s, want internal", c, status, viaStatus)
			}
		default:
			if viaStatus != c {
				t.Errorf("%s: %d reads back as %s", c, status, viaStatus)
			}
		}
		want := c
		if c == canonical.CodeUnknown || c == canonical.CodeDataLoss {
			want = canonical.CodeInternal
		}
		if viaFailure != want {
			t.Errorf("%s: failure code %q reads back as %s", c, failureCode(c), viaFailure)
		}
	}
	for status, typ := range map[int]string{400: "invalid_request_error", 404: "invalid_request_error", 429: "requests", 500: "server_error", 503: "server_error"} {
		if got := errorType(status); got != typ {
			t.Errorf("type of %d: %s, want %s", status, got, typ)
		}
	}
}
