package inspect

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// A WebSocket client's key in the query (?key=) is redacted from the
// request line a capture records, as Authorization is from its headers;
// the other parameters stay.
func TestRequestHeadRedactsQueryKey(t *testing.T) {
	r := httptest.NewRequest("GET", "/v1/language/echo/chatStream?since=3&key=key-b", nil)
	r.Header.Set("Authorization", "Bearer key-c")
	got := string(requestHead(r))
	want := "GET /v1/language/echo/chatStream?key=%5Bredacted%5D&since=3 HTTP/1.1\r\nAuthorization: [redacted]\r\n\r\n"
	if got != want || strings.Contains(got, "key-b") {
		t.Fatalf("request head %q, want %q", got, want)
	}
	r = httptest.NewRequest("GET", "/threads/t/stream?since=3", nil)
	if got := string(requestHead(r)); !strings.HasPrefix(got, "GET /threads/t/stream?since=3 HTTP/1.1\r\n") {
		t.Fatalf("request head without a key %q", got)
	}
}
