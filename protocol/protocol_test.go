package protocol

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

func TestFor(t *testing.T) {
	all := []Protocol{
		{Name: "wide", Paths: []string{"/v1/"}},
		{Name: "narrow", Paths: []string{"/v1/narrow/"}},
		{Name: "framed", Paths: []string{"/svc."}, ContentTypes: []string{"application/grpc"}},
	}
	for _, tt := range []struct{ path, contentType, want string }{
		{"/v1/runs", "", "wide"},
		{"/v1/narrow/x", "", "narrow"}, // the longest prefix, whatever the order
		{"/svc.Service/Method", "application/json", "framed"},
		{"/v1/runs", "application/grpc+proto", "framed"}, // the framing claims any path
		{"/other", "", ""},
	} {
		r := httptest.NewRequest("POST", tt.path, nil)
		r.Header.Set("Content-Type", tt.contentType)
		got := ""
		if p := For(all, r); p != nil {
			got = p.Name
		}
		if got != tt.want {
			t.Errorf("For(%s, %q) = %q, want %q", tt.path, tt.contentType, got, tt.want)
		}
	}
}

func TestWriteCanonicalRefusal(t *testing.T) {
	for _, tt := range []struct {
		ref       Refusal
		challenge string
		body      string
	}{
		{Refusal{http.StatusUnauthorized, canonical.CodeUnauthenticated, "no key"}, `Bearer realm="interlingua"`,
			`{"code":"unauthenticated","message":"no key"}` + "\n"},
		{Refusal{http.StatusForbidden, canonical.CodePermissionDenied, "cross-origin"}, "",
			`{"code":"permission_denied","message":"cross-origin"}` + "\n"},
	} {
		w := httptest.NewRecorder()
		WriteCanonicalRefusal(w, httptest.NewRequest("GET", "/", nil), tt.ref)
		if w.Code != tt.ref.Status || w.Header().Get("WWW-Authenticate") != tt.challenge ||
			w.Header().Get("Content-Type") != "application/json" || w.Body.String() != tt.body {
			t.Errorf("%v: %d %q %q %q", tt.ref, w.Code, w.Header().Get("WWW-Authenticate"), w.Header().Get("Content-Type"), w.Body.String())
		}
	}
}

// UpstreamURL takes an http(s) URL with a host and names the option, and
// what it should be, in what it refuses.
func TestUpstreamURL(t *testing.T) {
	if u, err := UpstreamURL("url", "https://h:8000/v1", "x"); err != nil || u.Host != "h:8000" || u.Path != "/v1" {
		t.Fatalf("good URL: %v %v", u, err)
	}
	for raw, want := range map[string]string{
		"":               "url: required (the server)",
		"ws://h/v1":      `url: "ws://h/v1" is not an http(s) URL with a host`,
		"http:///v1":     `url: "http:///v1" is not an http(s) URL with a host`,
		"http://[::1":    `url: "http://[::1" is not an http(s) URL with a host`,
		"localhost:8000": `url: "localhost:8000" is not an http(s) URL with a host`,
	} {
		if _, err := UpstreamURL("url", raw, "the server"); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", raw, err, want)
		}
	}
	if _, err := UpstreamURL("url", "", ""); err == nil || err.Error() != "url: required" {
		t.Errorf("without what: %v", err)
	}
}
