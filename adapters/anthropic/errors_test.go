package anthropic

import (
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

// TestErrorTables: every code has a type and status before the stream and
// a type after it; a type read back gives a code whose type is the same
// (the tables agree, though they are not inverses).
func TestErrorTables(t *testing.T) {
	for _, c := range canonical.AllCodes {
		typ, status := errorTypeOf(c)
		if typ == "" || status < 400 {
			t.Errorf("%s: %q %d", c, typ, status)
		}
		if back, _ := errorTypeOf(codeOf(status, typ)); back != typ {
			t.Errorf("%s: %s reads back as %s", c, typ, back)
		}
		switch s := streamErrorTypeOf(c); s {
		case errOverloaded, errRateLimit, errTimeout, errAPI:
		default:
			t.Errorf("%s: stream type %q", c, s)
		}
	}
	for status, want := range map[int]canonical.Code{400: canonical.CodeInvalidArgument, 401: canonical.CodeUnauthenticated,
		402: canonical.CodeFailedPrecondition, 403: canonical.CodePermissionDenied, 404: canonical.CodeNotFound,
		413: canonical.CodeInvalidArgument, 429: canonical.CodeResourceExhausted, 500: canonical.CodeInternal,
		504: canonical.CodeDeadlineExceeded, 529: canonical.CodeUnavailable, 502: canonical.CodeUnavailable, 418: canonical.CodeInvalidArgument} {
		if got := codeOf(status, ""); got != want {
			t.Errorf("status %d: %s, want %s", status, got, want)
		}
	}
	// An upstream's request_too_large is the request's fault: a frontend
	// answers it as invalid (400), never as a rate limit SDKs retry (429).
	if got := codeOf(413, errTooLarge); got != canonical.CodeInvalidArgument {
		t.Errorf("request_too_large: %s, want invalid_argument", got)
	}
}
