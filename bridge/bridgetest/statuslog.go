package bridgetest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// StatusLog is a reverse proxy in front of an instance that notes each
// request's method and path and the status answered: a real client that
// retries a refused request in a reduced mode (Claude Code, Codex) hides
// the refusal from its own output.
type StatusLog struct {
	URL string // the proxy's base URL

	mu  sync.Mutex
	got []string
}

// NewStatusLog starts a StatusLog in front of target until t ends.
func NewStatusLog(t testing.TB, target string) *StatusLog {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l := &StatusLog{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.got = append(l.got, resp.Request.Method+" "+resp.Request.URL.Path+" "+resp.Status)
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	l.URL = srv.URL
	return l
}

// Take returns the requests noted since the last Take, as "METHOD /path
// 200 OK".
func (l *StatusLog) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got = nil
	return got
}
