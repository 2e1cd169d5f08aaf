package inspect_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/inspect"
)

// Only admin keys use the inspector: the key that ran a captured run and
// any other key are refused listing and opening it (403, the canonical
// error form), no key is 401, and an unknown run is 404 for an admin.
func TestTenancy(t *testing.T) {
	d := startDaemon(t, inspect.Config{}, true)
	runTriton(t, d, userKey, "demo-agent", true, nil)
	var list apiList
	if st := apiDo(t, d, http.MethodGet, "/v1/inspect/runs", adminKey, "", &list); st != 200 || len(list.Runs) != 1 {
		t.Fatalf("admin list: %d %+v", st, list)
	}
	id := list.Runs[0].ID
	for _, key := range []string{userKey, otherKey} {
		for _, c := range []struct{ method, path string }{
			{http.MethodGet, "/v1/inspect/runs"},
			{http.MethodGet, "/v1/inspect/runs/" + id},
			{http.MethodGet, "/v1/inspect/runs/" + id + "/stream"},
			{http.MethodPost, "/v1/inspect/runs/" + id + "/replay?as=openai"},
			{http.MethodPost, "/v1/inspect/capture"},
		} {
			var e apiError
			if st := apiDo(t, d, c.method, c.path, key, "", &e); st != http.StatusForbidden || e.Code != "permission_denied" || !strings.Contains(e.Message, "admin") {
				t.Errorf("%s %s as %s: %d %+v", c.method, c.path, key[:5], st, e)
			}
		}
	}
	var e apiError
	if st := apiDo(t, d, http.MethodGet, "/v1/inspect/runs/"+id, "", "", &e); st != http.StatusUnauthorized || e.Code != "unauthenticated" {
		t.Errorf("no key: %d %+v", st, e)
	}
	if st := apiDo(t, d, http.MethodGet, "/v1/inspect/runs/run-nope", adminKey, "", &e); st != http.StatusNotFound || e.Code != "not_found" {
		t.Errorf("unknown run: %d %+v", st, e)
	}
	// The page itself carries no data and loads without a key.
	resp, err := http.Get(d.URL + "/inspect/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /inspect/: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// A run that does not ask for capture, on a target nobody armed, is not
// captured; arming its target captures the next one.
func TestCaptureOptIn(t *testing.T) {
	d := startDaemon(t, inspect.Config{}, true)
	runTriton(t, d, userKey, "stream", false, nil)
	var list apiList
	if apiDo(t, d, http.MethodGet, "/v1/inspect/runs", adminKey, "", &list); len(list.Runs) != 0 {
		t.Fatalf("a run without opt-in was captured: %+v", list.Runs)
	}
	var armed struct {
		Target string `json:"target"`
	}
	if st := apiDo(t, d, http.MethodPost, "/v1/inspect/capture", adminKey, `{"target":"str*","for":"1m"}`, &armed); st != 200 || armed.Target != "str*" {
		t.Fatalf("arm: %d %+v", st, armed)
	}
	runTriton(t, d, userKey, "stream", false, nil)
	if apiDo(t, d, http.MethodGet, "/v1/inspect/runs", adminKey, "", &list); len(list.Runs) != 1 || list.Runs[0].Target != "stream" {
		t.Fatalf("armed target not captured: %+v", list.Runs)
	}
	var e apiError
	if st := apiDo(t, d, http.MethodPost, "/v1/inspect/capture", adminKey, `{"target":"[","for":"1m"}`, &e); st != 400 || e.Code != "invalid_argument" {
		t.Errorf("bad glob: %d %+v", st, e)
	}
}
