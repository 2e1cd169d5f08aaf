package glide

import (
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

// TestErrorTableRoundTrip sends every canonical code through the frontend's
// table and back through the backend's: terminal errors and the
// non-terminal model_unavailable both keep the code and the message.
func TestErrorTableRoundTrip(t *testing.T) {
	for _, c := range canonical.AllCodes {
		if c == canonical.CodeOK {
			continue
		}
		const msg = "something: went wrong"
		name := errorName(c)
		got, gotMsg := codeOf(name, errorMessage(name, c, msg))
		if got != c || gotMsg != msg {
			t.Errorf("terminal %v -> %s -> (%v, %q), want (%v, %q)", c, name, got, gotMsg, c, msg)
		}
		got, gotMsg = codeOf(nameModelUnavailable, errorMessage(nameModelUnavailable, c, msg))
		if got != c || gotMsg != msg {
			t.Errorf("model_unavailable %v -> (%v, %q), want (%v, %q)", c, got, gotMsg, c, msg)
		}
	}
}

// TestErrorNames pins the table to the names the reference lists.
func TestErrorNames(t *testing.T) {
	want := map[canonical.Code]string{
		canonical.CodeCanceled:           nameUnknown,
		canonical.CodeUnknown:            nameUnknown,
		canonical.CodeInvalidArgument:    namePayloadParse,
		canonical.CodeDeadlineExceeded:   nameUnknown,
		canonical.CodeNotFound:           nameRouterNotFound,
		canonical.CodeAlreadyExists:      namePayloadParse,
		canonical.CodePermissionDenied:   nameUnknown,
		canonical.CodeResourceExhausted:  nameUnknown,
		canonical.CodeFailedPrecondition: nameUnknown,
		canonical.CodeAborted:            nameUnknown,
		canonical.CodeOutOfRange:         namePayloadParse,
		canonical.CodeUnimplemented:      nameNoModelConfigured,
		canonical.CodeInternal:           nameUnknown,
		canonical.CodeUnavailable:        nameAllModelsUnavailable,
		canonical.CodeDataLoss:           nameUnknown,
		canonical.CodeUnauthenticated:    nameUnknown,
	}
	for _, c := range canonical.AllCodes {
		if c == canonical.CodeOK {
			continue
		}
		if got := errorName(c); got != want[c] {
			t.Errorf("errorName(%v) = %q, want %q", c, got, want[c])
		}
	}
}

// TestCodeOfUpstream reads what a real Glide router sends.
func TestCodeOfUpstream(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		code      canonical.Code
		wantMsg   string
	}{
		{nameModelUnavailable, "provider is not available", canonical.CodeUnavailable, "provider is not available"},
		{nameModelUnavailable, "rate limit reached, please wait 1m0s", canonical.CodeUnavailable, "rate limit reached, please wait 1m0s"},
		{nameAllModelsUnavailable, "all providers are unavailable", canonical.CodeUnavailable, "all providers are unavailable"},
		{nameNoModelConfigured, "no models configured for router", canonical.CodeUnimplemented, "no models configured for router"},
		{nameUnknown, "context canceled", canonical.CodeCanceled, "context canceled"},
		{nameUnknown, "context deadline exceeded", canonical.CodeDeadlineExceeded, "context deadline exceeded"},
		{nameUnknown, "boom: it broke", canonical.CodeUnknown, "boom: it broke"},
		{namePayloadParse, "unexpected end of JSON input", canonical.CodeInvalidArgument, "unexpected end of JSON input"},
		{nameRouterNotFound, "router is not found", canonical.CodeNotFound, "router is not found"},
		{"some_new_name", "x", canonical.CodeUnknown, "x"},
		// A prefix naming a code that maps to another name is message text.
		{nameAllModelsUnavailable, "internal: x", canonical.CodeUnavailable, "internal: x"},
	} {
		code, msg := codeOf(tc.name, tc.msg)
		if code != tc.code || msg != tc.wantMsg {
			t.Errorf("codeOf(%q, %q) = (%v, %q), want (%v, %q)", tc.name, tc.msg, code, msg, tc.code, tc.wantMsg)
		}
	}
}

func TestFinishReasons(t *testing.T) {
	for _, r := range []canonical.FinishReason{canonical.FinishStop, canonical.FinishLength, canonical.FinishContentFilter, canonical.FinishError, canonical.FinishOther} {
		if got := finishReason(finishName(r)); got != r {
			t.Errorf("finish %v -> %q -> %v", r, finishName(r), got)
		}
	}
	if got := finishName(canonical.FinishToolCalls); got != "other" {
		t.Errorf("tool_calls -> %q, want other", got)
	}
	if got := finishReason("stop_sequence"); got != canonical.FinishOther {
		t.Errorf("unknown finish_reason -> %v, want other", got)
	}
}
