package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	openaipeer "github.com/interlingua-dev/interlingua/conformance/peers/openai"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// responsesDaemons starts a nats-server, the reference OpenAI peer (an
// echo model, recording what reaches it) and two daemons on them with API
// keys alice and bob and target gpt-test routed to the peer; it returns
// the daemons' arguments too, to start more.
func responsesDaemons(t *testing.T) (bin string, n *bridgetest.NATSProcess, p *openaipeer.Peer, args []string, a, b *daemon) {
	t.Helper()
	bin = buildBinary(t)
	n = bridgetest.StartNATSProcess(t)
	p = openaipeer.New("", openaipeer.Model{Name: "gpt-test", Echo: true})
	up := httptest.NewServer(p)
	t.Cleanup(up.Close)
	cfg := filepath.Join(t.TempDir(), "responses.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`auth:
  keys:
    - {name: alice, hash: "%s"}
    - {name: bob, hash: "%s"}
backends:
  scripted: {type: scripted}
  up: {type: openai, options: {base_url: "%s/v1"}}
routes:
  - {target: echo, backend: scripted}
  - {target: gpt-test, backend: up}
  - {target: hanging, backend: scripted, model: echo, parameters: {hang: true}}
`, bridge.KeyDigest("key-a"), bridge.KeyDigest("key-b"), up.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	args = []string{"--config", cfg}
	return bin, n, p, args, startDaemon(t, bin, n.URL(), args...), startDaemon(t, bin, n.URL(), args...)
}

var respIDPattern = regexp.MustCompile(`"id":"(resp_[a-z2-7]+)"`)

// created posts a request that must succeed (JSON or a whole stream) and
// returns the response's id.
func created(t *testing.T, base, body string) string {
	t.Helper()
	status, out := bridgetest.Call(t, base, "key-a", "POST", "/v1/responses", body)
	m := respIDPattern.FindStringSubmatch(out)
	if status != 200 || m == nil {
		t.Fatalf("POST %s: %d %s", body, status, out)
	}
	if strings.Contains(out, "event: ") && !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("POST %s: the stream did not end: %s", body, out)
	}
	return m[1]
}

// sameJSON fails unless a and b are the same JSON document.
func sameJSON(t *testing.T, what, a, b string) {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v: %s", what, err, a)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v: %s", what, err, b)
	}
	if d := cmp.Diff(x, y); d != "" {
		t.Fatalf("%s differs (-before +after):\n%s", what, d)
	}
}

// Stored responses outlive kill -9 of the instance that made them: what
// instance A acknowledged (a response answered whole, one streamed to its
// [DONE], a background one polled to completed, each continuing the one
// before) is read the same, with its input items, on instance B and on A
// restarted, still refused to another key, and continued by
// previous_response_id with the whole conversation reaching the upstream.
func TestResponsesStoredSurviveKill9(t *testing.T) {
	bin, n, p, args, a, b := responsesDaemons(t)
	r1 := created(t, a.base, `{"model":"gpt-test","input":"one","instructions":"be brief"}`)
	r2 := created(t, a.base, `{"model":"gpt-test","input":"two","stream":true,"previous_response_id":"`+r1+`"}`)
	r3 := created(t, a.base, `{"model":"gpt-test","input":"three","background":true,"previous_response_id":"`+r2+`"}`)
	acked := map[string]string{}
	for _, id := range []string{r1, r2, r3} {
		acked[id] = pollStatus(t, a.base, id, "completed")
		_, acked[id+"/input_items"] = bridgetest.Call(t, a.base, "key-a", "GET", "/v1/responses/"+id+"/input_items", "")
	}
	a.kill9()

	check := func(base string) {
		t.Helper()
		for _, id := range []string{r1, r2, r3} {
			for _, path := range []string{id, id + "/input_items"} {
				status, got := bridgetest.Call(t, base, "key-a", "GET", "/v1/responses/"+path, "")
				if status != 200 {
					t.Fatalf("GET %s after kill -9: %d %s", path, status, got)
				}
				sameJSON(t, "GET "+path+" after kill -9", acked[path], got)
			}
			if status, got := bridgetest.Call(t, base, "key-b", "GET", "/v1/responses/"+id, ""); status != 404 {
				t.Fatalf("bob's GET of alice's %s after kill -9: %d %s", id, status, got)
			}
		}
	}
	check(b.base)
	r4 := created(t, b.base, `{"model":"gpt-test","input":"four","previous_response_id":"`+r3+`"}`)
	reqs := p.Requests()
	var last struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &last); err != nil {
		t.Fatal(err)
	}
	var conv []string
	for _, m := range last.Messages {
		conv = append(conv, m.Role+": "+m.Content)
	}
	// Instructions are not inherited (they were r1's own); every turn is.
	want := []string{"user: one", "assistant: one", "user: two", "assistant: two", "user: three", "assistant: three", "user: four"}
	if d := cmp.Diff(want, conv); d != "" {
		t.Fatalf("the conversation continued on B after kill -9 of A (-want +got):\n%s", d)
	}
	if status, got := bridgetest.Call(t, b.base, "key-b", "POST", "/v1/responses", `{"model":"gpt-test","input":"x","previous_response_id":"`+r3+`"}`); status != 400 {
		t.Fatalf("bob continuing alice's response on B: %d %s", status, got)
	}

	restarted := startDaemon(t, bin, n.URL(), args...)
	check(restarted.base)
	pollStatus(t, restarted.base, r4, "completed")
}

// pollStatus GETs a response as alice until it has status and returns it.
func pollStatus(t *testing.T, base, id, status string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := bridgetest.Call(t, base, "key-a", "GET", "/v1/responses/"+id, "")
		if code == 200 && strings.Contains(body, `"status":"`+status+`"`) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %s: %d %s", id, status, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLogged waits up to 20 s for thread's first event to reach base's
// native observer, which reads the replay log.
func waitLogged(t *testing.T, base, thread string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/threads/"+thread+"/events?since=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer key-a")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() { // one canonical event per line (NDJSON, as it is asked for no SSE)
		if strings.Contains(sc.Text(), `"seq":`) {
			return
		}
	}
	t.Fatalf("%s: no event in the replay log (%d): %v", thread, resp.StatusCode, sc.Err())
}

// Responses in flight when instance A is killed (one streaming to its
// client, one in the background) are not left in_progress and queued for
// ever: instance B, reading them, ends them from the replay log (their run
// failed: its owner is gone), so polling ends and previous_response_id
// continues them.
func TestResponsesInFlightEndedAfterKill9(t *testing.T) {
	_, _, _, _, a, b := responsesDaemons(t)
	req, err := http.NewRequest("POST", a.base+"/v1/responses", strings.NewReader(`{"model":"hanging","input":"wait for me","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer key-a")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var first []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(first, []byte("event: response.output_text.delta")) { // the run is under way
		k, err := resp.Body.Read(buf)
		first = append(first, buf[:k]...)
		if err != nil {
			t.Fatalf("%v after %s", err, first)
		}
	}
	streamed := string(respIDPattern.FindSubmatch(first)[1])
	background := created(t, a.base, `{"model":"hanging","input":"in the background","background":true}`)
	pollStatus(t, a.base, background, "queued")
	// Both runs are in the replay log before A dies: a run killed before
	// its first event is stored leaves nothing for B to end it from (the
	// record stays as A wrote it; stated in adapters/responses/settle.go).
	waitLogged(t, b.base, streamed)
	waitLogged(t, b.base, background)
	a.kill9()

	for _, id := range []string{streamed, background} {
		got := pollStatus(t, b.base, id, "failed")
		var r struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(got), &r); err != nil || r.Error.Code != "unavailable" || !strings.Contains(r.Error.Message, "run owner") {
			t.Fatalf("%s after kill -9 of its instance: %s", id, got)
		}
		if status, out := bridgetest.Call(t, b.base, "key-a", "POST", "/v1/responses", `{"model":"echo","input":"go on","previous_response_id":"`+id+`"}`); status != 200 {
			t.Fatalf("continuing %s: %d %s", id, status, out)
		}
	}
}

// A background response is cancelled through whichever instance the
// cancel reaches (a load balancer picks): B asks the bridge to cancel the
// response's thread, A, running it, ends it cancelled and records that,
// and B answers the cancelled response. Another key's cancel is not found
// and stops nothing.
func TestResponsesCancelOnOtherInstance(t *testing.T) {
	_, _, _, _, a, b := responsesDaemons(t)
	id := created(t, a.base, `{"model":"hanging","input":"wait","background":true}`)
	waitLogged(t, a.base, id)
	if code, body := bridgetest.Call(t, b.base, "key-b", "POST", "/v1/responses/"+id+"/cancel", ""); code != 404 {
		t.Fatalf("bob's cancel: %d %s", code, body)
	}
	code, body := bridgetest.Call(t, b.base, "key-a", "POST", "/v1/responses/"+id+"/cancel", "")
	if code != 200 || !strings.Contains(body, `"status":"cancelled"`) {
		t.Fatalf("cancel on B: %d %s", code, body)
	}
	sameJSON(t, "the record on A", pollStatus(t, a.base, id, "cancelled"), body)
}
