package triton_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/interlingua-dev/interlingua/adapters/triton"
	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// exchange is one HTTP request of a golden transcript.
type exchange struct {
	name   string
	method string // default POST
	path   string
	body   string
	header map[string]string
}

// runID matches the run ids the bridge makes.
var runID = regexp.MustCompile(`run-[a-z2-7]{26}`) // canonical.NewID

// client is a test HTTP client without idle connections left behind.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}

// transcript performs x against base and renders request and response:
//
//	POST /path
//	Header: value            (request headers set by the case, sorted)
//	<request body>
//
//	HTTP <status>
//	Content-Type: <type>
//
//	<response body, byte for byte>
//
// Triton's wire carries no ids or times; the one variable thing, a run id
// the bridge made (NUID, in a demo-approval interrupt id), is replaced by
// "run-<id>".
func transcript(t *testing.T, base string, x exchange) []byte {
	t.Helper()
	method := x.method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if x.body != "" {
		body = strings.NewReader(x.body)
	}
	req, err := http.NewRequest(method, base+x.path, body)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(x.header))
	for k, v := range x.header {
		req.Header.Set(k, v)
		keys = append(keys, k)
	}
	sort.Strings(keys)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\n", method, x.path)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, x.header[k])
	}
	if x.body != "" {
		b.WriteString(x.body + "\n")
	}
	fmt.Fprintf(&b, "\nHTTP %d\nContent-Type: %s\n\n", resp.StatusCode, resp.Header.Get("Content-Type"))
	b.Write(runID.ReplaceAll(got, []byte("run-<id>")))
	return b.Bytes()
}

// golden compares got with testdata/<dir>/<name>.golden, or rewrites it
// under -update.
func golden(t *testing.T, dir, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", dir, name+".golden")
	if triton.Update() {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (-want +got):\n%s", file, cmp.Diff(string(want), string(got)))
	}
}

// frontendCases run against the embedded default (the scripted targets).
var frontendCases = []exchange{
	// Streams and aggregates.
	{name: "stream_plain", path: "/v2/models/echo/generate_stream", body: `{"text_input":"hello world","stream":true}`},
	{name: "stream_one_event", path: "/v2/models/echo/generate_stream", body: `{"text_input":"hello world"}`},
	{name: "stream_genai_perf", path: "/v2/models/echo/generate_stream", body: `{"text_input":["the quick brown fox"],"stream":true,"max_tokens":16,"temperature":0.7}`},
	{name: "stream_trtllm_body", path: "/v2/models/echo/generate_stream", body: `{"text_input":"hello world","max_tokens":16,"bad_words":"","stop_words":"","stream":true}`},
	{name: "stream_split_rune", path: "/v2/models/echo/generate_stream", body: `{"text_input":"hi","stream":true,"split_rune":true}`},
	{name: "stream_empty", path: "/v2/models/echo/generate_stream", body: `{"text_input":"","stream":true}`},
	{name: "generate_aggregate", path: "/v2/models/echo/generate", body: `{"text_input":"hello world"}`},
	{name: "generate_documented", path: "/v2/models/echo/generate", body: `{"id":"42","text_input":"client input","parameters":{"stream":false,"temperature":0}}`},
	{name: "generate_echo_prompt", path: "/v2/models/echo/generate", body: `{"text_input":"hi there","exclude_input_in_output":false}`},
	{name: "generate_versioned", path: "/v2/models/echo/versions/1/generate", body: `{"text_input":"v1"}`},
	{name: "generate_ignores_stream", path: "/v2/models/echo/generate", body: `{"text_input":"a b c","stream":true}`},
	{name: "generate_identity_encoding", path: "/v2/models/echo/generate", body: `{"text_input":"x"}`, header: map[string]string{"Content-Encoding": "identity"}},
	// Richer backends.
	{name: "agent_stream", path: "/v2/models/demo-agent/generate_stream", body: `{"text_input":"what is 6 * 7?","stream":true}`},
	{name: "agent_stream_reasoning", path: "/v2/models/demo-agent/generate_stream", body: `{"text_input":"what is 6 * 7?","stream":true,"parameters":{"include_reasoning":true}}`},
	{name: "agent_generate", path: "/v2/models/demo-agent/generate", body: `{"id":"r1","text_input":"what is 6 * 7?"}`},
	{name: "approval_stream", path: "/v2/models/demo-approval/generate_stream", body: `{"text_input":"compute","stream":true}`},
	// Errors before the first response.
	{name: "unknown_model", path: "/v2/models/nope/generate_stream", body: `{"text_input":"x","stream":true}`},
	{name: "unknown_version", path: "/v2/models/echo/versions/2/generate", body: `{"text_input":"x"}`},
	{name: "version_overflow", path: "/v2/models/echo/versions/99999999999999999999/generate", body: `{"text_input":"x"}`},
	{name: "wrong_method", method: "GET", path: "/v2/models/echo/generate_stream"},
	{name: "content_encoding", path: "/v2/models/echo/generate", body: `{"text_input":"x"}`, header: map[string]string{"Content-Encoding": "gzip"}},
	{name: "empty_body", path: "/v2/models/echo/generate"},
	{name: "invalid_json", path: "/v2/models/echo/generate", body: `{"text_input": "x",}`},
	{name: "bad_id", path: "/v2/models/echo/generate", body: `{"id":42,"text_input":"x"}`},
	{name: "bad_parameters", path: "/v2/models/echo/generate", body: `{"text_input":"x","parameters":"stream"}`},
	{name: "bad_param_object", path: "/v2/models/echo/generate_stream", body: `{"text_input":"x","parameters":{"params":{"a":1}}}`},
	{name: "bad_param_array", path: "/v2/models/echo/generate_stream", body: `{"text_input":"x","stop":["\n"]}`},
	{name: "bad_param_null", path: "/v2/models/echo/generate_stream", body: `{"text_input":"x","top_n":null}`},
	{name: "bad_text_input", path: "/v2/models/echo/generate_stream", body: `{"text_input":5}`},
	{name: "bad_stream", path: "/v2/models/echo/generate_stream", body: `{"text_input":"x","stream":"true"}`},
	{name: "bad_max_tokens", path: "/v2/models/echo/generate_stream", body: `{"text_input":"x","max_tokens":"16"}`},
	{name: "two_prompts", path: "/v2/models/echo/generate", body: `{"text_input":["a","b"]}`},
	{name: "duplicate_input", path: "/v2/models/echo/generate", body: `{"text_input":"a","text_input":"b"}`},
	{name: "missing_text_input", path: "/v2/models/echo/generate", body: `{"prompt":"x","stream":false}`},
	{name: "scripted_refusal", path: "/v2/models/stream/generate", body: `{"text_input":"x","deltas":-1}`},
	// Errors from the run.
	{name: "error_before_first", path: "/v2/models/echo/generate_stream", body: `{"text_input":"a b c","stream":true,"fail_after":0,"fail_code":"unavailable","fail_message":"upstream overloaded"}`},
	{name: "error_mid_stream", path: "/v2/models/echo/generate_stream", body: `{"text_input":"a b c","stream":true,"fail_after":2,"fail_message":"model crashed"}`},
	{name: "error_generate", path: "/v2/models/echo/generate", body: `{"text_input":"a b c","fail_after":1,"fail_message":"model crashed"}`},
	{name: "error_stream_aggregate", path: "/v2/models/echo/generate_stream", body: `{"text_input":"a b c","fail_after":1,"fail_code":"invalid_argument","fail_message":"bad sampling"}`},
	// KServe v2 endpoints.
	{name: "health_live", method: "GET", path: "/v2/health/live"},
	{name: "health_ready", method: "GET", path: "/v2/health/ready"},
	{name: "health_wrong_method", path: "/v2/health/live"},
	{name: "server_metadata", method: "GET", path: "/v2"},
	{name: "model_metadata", method: "GET", path: "/v2/models/echo"},
	{name: "model_metadata_versioned", method: "GET", path: "/v2/models/echo/versions/1"},
	{name: "model_metadata_unknown", method: "GET", path: "/v2/models/nope"},
	{name: "model_metadata_unknown_version", method: "GET", path: "/v2/models/echo/versions/3"},
	{name: "model_ready", method: "GET", path: "/v2/models/echo/ready"},
	{name: "model_ready_unknown", method: "GET", path: "/v2/models/nope/ready"},
	{name: "model_ready_unknown_version", method: "GET", path: "/v2/models/echo/versions/2/ready"},
	{name: "model_ready_wrong_method", method: "DELETE", path: "/v2/models/echo/ready"},
	{name: "infer_unsupported", path: "/v2/models/echo/infer", body: `{"inputs":[]}`},
	{name: "not_found", method: "GET", path: "/v2/repository/index"},
	{name: "bad_version_path", method: "GET", path: "/v2/models/echo/versions/x/ready"},
}

// TestFrontendGolden drives every case against a whole instance with the
// embedded default config and compares the wire transcripts.
func TestFrontendGolden(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	for _, x := range frontendCases {
		t.Run(x.name, func(t *testing.T) {
			golden(t, "frontend", x.name, transcript(t, inst.URL, x))
		})
	}
}

// TestFrontendKeepsServing: a refused request leaves the instance serving
// the next ones on the same connection.
func TestFrontendKeepsServing(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	for i, body := range []string{`{`, `{"text_input":"a","stream":true}`, `{"text_input":5}`, `{"text_input":"b","stream":true}`} {
		resp, err := c.Post(inst.URL+"/v2/models/echo/generate_stream", "", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ok := resp.StatusCode == 200; ok != (i%2 == 1) {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, data)
		}
	}
}

// watchRuns subscribes to the instance's run events.
func watchRuns(t *testing.T, inst *bridgetest.Instance) *nats.Subscription {
	t.Helper()
	sub, err := inst.Fabric().Conn().SubscribeSync(inst.Fabric().Prefix() + ".events.>")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := inst.Fabric().Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// waitTerminal returns the next run's terminal status seen on sub.
func waitTerminal(t *testing.T, sub *nats.Subscription) (canonical.RunStatus, *canonical.ErrorProto) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("no terminal event: %v", err)
		}
		evs, err := bridge.DecodeEvents(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if st, ok := canonical.TerminalOf(ev); ok {
				return st, ev.GetLifecycle().GetError()
			}
		}
	}
}

// TestClientDisconnectBeforeFirstResponse: a client that leaves while the
// run has produced nothing cancels the run.
func TestClientDisconnectBeforeFirstResponse(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	sub := watchRuns(t, inst)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, inst.URL+"/v2/models/echo/generate_stream", strings.NewReader(`{"text_input":"","stream":true,"hang":true}`)) // no content: it hangs before any response
	done := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// The run has started once its first event is published.
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("request finished before the client left")
	}
	st, e := waitTerminal(t, sub)
	if st != canonical.StatusCancelled || canonical.Code(e.GetCode()) != canonical.CodeCanceled {
		t.Fatalf("run ended %v %v, want cancelled", st, e)
	}
}

// TestFrontendLimits: a body over MaxInputBytes and a response over
// MaxOutputBytes are refused with Triton's error form.
func TestFrontendLimits(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	f := triton.NewFrontend(triton.FrontendConfig{Runner: inst.Bridge(), MaxInputBytes: 64, MaxOutputBytes: 8})
	mux := http.NewServeMux()
	f.Mount(mux)
	for _, tc := range []struct {
		path, body string
		chunked    bool
		status     int
		want       string
	}{
		{"/v2/models/echo/generate", `{"text_input":"` + strings.Repeat("x", 100) + `"}`, false, 400,
			`{"error":"request JSON size of 117 bytes exceeds the maximum allowed input size of 64 bytes. Use --http-max-input-size to increase the limit."}`},
		{"/v2/models/echo/generate", `{"text_input":"` + strings.Repeat("x", 100) + `"}`, true, 400,
			`{"error":"request JSON size of 65 bytes exceeds the maximum allowed input size of 64 bytes. Use --http-max-input-size to increase the limit."}`},
		{"/v2/models/echo/generate", `{"text_input":"one two three"}`, false, 400,
			`{"error":"response exceeds max_output_bytes (8 bytes of text and tool arguments)"}`},
		{"/v2/models/echo/generate_stream", `{"text_input":"one two three","stream":true}`, false, 200,
			"data: {\"model_name\":\"echo\",\"model_version\":\"1\",\"text_output\":\"one\"}\n\n" +
				"data: {\"model_name\":\"echo\",\"model_version\":\"1\",\"text_output\":\" two\"}\n\n" +
				"data: {\"model_name\":\"echo\",\"model_version\":\"1\",\"text_output\":\" three\"}\n\n"},
	} {
		var body io.Reader = strings.NewReader(tc.body)
		if tc.chunked {
			body = io.MultiReader(body) // unknown length: sent chunked
		}
		req := newRequest(t, tc.path, body)
		rec := &recorder{header: http.Header{}}
		mux.ServeHTTP(rec, req)
		if rec.status != tc.status || rec.body.String() != tc.want {
			t.Errorf("%s %s: %d %s\nwant %d %s", tc.path, tc.body, rec.status, rec.body.String(), tc.status, tc.want)
		}
	}
}

func newRequest(t *testing.T, path string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://bridge"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := body.(*strings.Reader); !ok {
		req.ContentLength = -1
	}
	return req
}

// recorder is a flushing ResponseWriter that records.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(200)
	return r.body.Write(p)
}
func (r *recorder) Flush() {}
