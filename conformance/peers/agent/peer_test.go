package agentpeer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestPlaysScriptOverSSE runs research-agent and reads it back with since.
func TestPlaysScriptOverSSE(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(p.Handler())
	defer ts.Close()
	defer p.Close()
	resp := post(t, ts.URL+"/threads/t/commands", `{"id":1,"method":"run.start","params":{"assistant_id":"research-agent","input":{}}}`)
	var res struct {
		Type   string
		Result struct {
			RunID string `json:"run_id"`
		}
		Meta struct {
			AppliedThroughSeq uint64 `json:"applied_through_seq"`
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if res.Type != "success" || res.Result.RunID == "" || res.Meta.AppliedThroughSeq != 0 {
		t.Fatalf("run.start: %+v", res)
	}
	stream := post(t, ts.URL+"/threads/t/stream/events", `{"channels":["lifecycle","input"],"since":0}`)
	defer stream.Body.Close()
	sc := bufio.NewScanner(stream.Body)
	var got []string
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		var ev struct {
			Method string
			Params struct{ Data struct{ Event string } }
		}
		_ = json.Unmarshal(line[6:], &ev)
		got = append(got, ev.Method+":"+ev.Params.Data.Event)
		if ev.Params.Data.Event == "interrupted" {
			break
		}
	}
	want := "lifecycle:running lifecycle:started lifecycle:completed input.requested: lifecycle:interrupted"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %v", got)
	}
	if len(p.Script("research-agent")) != 38 {
		t.Fatalf("script has %d events", len(p.Script("research-agent")))
	}
	bad := post(t, ts.URL+"/threads/t/commands", `{"method":"run.start"}`)
	bad.Body.Close()
	if bad.StatusCode != 400 {
		t.Fatalf("missing id: %d", bad.StatusCode)
	}
}
