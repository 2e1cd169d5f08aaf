package xmlaction

import (
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

func TestHTTPStatusEveryCode(t *testing.T) {
	want := map[canonical.Code]int{
		canonical.CodeOK: 200, canonical.CodeCanceled: 499, canonical.CodeUnknown: 500,
		canonical.CodeInvalidArgument: 400, canonical.CodeDeadlineExceeded: 504, canonical.CodeNotFound: 404,
		canonical.CodeAlreadyExists: 409, canonical.CodePermissionDenied: 403, canonical.CodeResourceExhausted: 429,
		canonical.CodeFailedPrecondition: 400, canonical.CodeAborted: 409, canonical.CodeOutOfRange: 400,
		canonical.CodeUnimplemented: 501, canonical.CodeInternal: 500, canonical.CodeUnavailable: 503,
		canonical.CodeDataLoss: 500, canonical.CodeUnauthenticated: 401,
	}
	for _, c := range canonical.AllCodes {
		w, ok := want[c]
		if !ok {
			t.Fatalf("no expectation for %s", c)
		}
		if got := httpStatus(c); got != w {
			t.Errorf("httpStatus(%s) = %d, want %d", c, got, w)
		}
	}
}

func TestWireCodeEveryCode(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range canonical.AllCodes {
		w := wireCode(c)
		if seen[w] {
			t.Errorf("%s: name %q used twice", c, w)
		}
		seen[w] = true
		if back, ok := canonical.ParseCode(w); !ok || back != c {
			t.Errorf("wireCode(%s) = %q does not parse back (%v %v)", c, w, back, ok)
		}
	}
}

func TestKindCodes(t *testing.T) {
	for kind, want := range map[string]canonical.Code{
		kindEmptyBody: canonical.CodeInvalidArgument, kindInvalidJSON: canonical.CodeInvalidArgument,
		kindNotAnObject: canonical.CodeInvalidArgument, kindMissingName: canonical.CodeInvalidArgument,
		kindInvalidField: canonical.CodeInvalidArgument, kindInvalidAttribute: canonical.CodeInvalidArgument,
		kindDuplicateID:  canonical.CodeInvalidArgument,
		kindUnterminated: canonical.CodeInvalidArgument, kindBodyTooLarge: canonical.CodeResourceExhausted,
		kindTooManyActions: canonical.CodeResourceExhausted, kindUnknownDependency: canonical.CodeFailedPrecondition,
		kindDependencyCycle: canonical.CodeFailedPrecondition, kindDependencyFailed: canonical.CodeFailedPrecondition,
		kindNotRun: canonical.CodeAborted, "something_else": canonical.CodeUnknown,
	} {
		if got := kindCode(kind); got != want {
			t.Errorf("kindCode(%s) = %s, want %s", kind, got, want)
		}
	}
}
