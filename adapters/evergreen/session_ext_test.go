package evergreen_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/adapters/evergreen"
	"github.com/interlingua-dev/interlingua/adapters/scripted"
	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
	"github.com/interlingua-dev/interlingua/internal/json"
)

const startSession = "/evergreen.v2.EvergreenService/StartSession"

// h2c is an HTTP client speaking HTTP/2 without TLS (prior knowledge).
func h2c() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// client is a connect-go Evergreen client; opts pick the protocol (gRPC by
// default).
func client(t *testing.T, url string, opts ...connect.ClientOption) evergreenv2connect.EvergreenServiceClient {
	hc := h2c()
	t.Cleanup(hc.CloseIdleConnections)
	if len(opts) == 0 {
		opts = []connect.ClientOption{connect.WithGRPC()}
	}
	return evergreenv2connect.NewEvergreenServiceClient(hc, url, opts...)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// exchange sends msgs, half-closes, and reads until the server ends the
// stream: the messages received and the final status (nil for OK).
func exchange(t *testing.T, c evergreenv2connect.EvergreenServiceClient, msgs ...*ev.SessionMessage) ([]*ev.SessionMessage, error) {
	t.Helper()
	s := c.StartSession(testCtx(t))
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			break // the server ended the stream; Receive has the status
		}
	}
	_ = s.CloseRequest()
	var got []*ev.SessionMessage
	for {
		m, err := s.Receive()
		if errors.Is(err, io.EOF) {
			return got, s.CloseResponse()
		}
		if err != nil {
			_ = s.CloseResponse()
			return got, err
		}
		got = append(got, m)
	}
}

// Message constructors.

func generate(target, input string, outputs ...string) *ev.SessionMessage {
	a := &ev.Action{Name: "GENERATE", TargetSpec: &ev.TargetSpec{Id: target}, Inputs: []*ev.NamedParameter{{Name: "prompt", Id: input}}}
	for _, o := range outputs {
		name, id, _ := strings.Cut(o, "=")
		a.Outputs = append(a.Outputs, &ev.NamedParameter{Name: name, Id: id})
	}
	return &ev.SessionMessage{Actions: []*ev.Action{a}}
}

func withParams(m *ev.SessionMessage, params map[string]any) *ev.SessionMessage {
	st, _ := structpb.NewStruct(params)
	a, _ := anypb.New(st)
	m.Actions[0].Configs = append(m.Actions[0].Configs, a)
	return m
}

func textNode(id, text string, role ...string) *ev.NodeFragment {
	md := &ev.ChunkMetadata{Mimetype: "text/plain"}
	if len(role) > 0 {
		md.Role = role[0]
	}
	return &ev.NodeFragment{Id: id, ChunkFragment: &ev.Chunk{Metadata: md, Payload: &ev.Chunk_Data{Data: []byte(text)}}}
}

func parent(id string, kids ...string) *ev.NodeFragment {
	return &ev.NodeFragment{Id: id, ChildIds: kids}
}

func frags(f ...*ev.NodeFragment) *ev.SessionMessage { return &ev.SessionMessage{NodeFragments: f} }

// reassembly is a client-side reading of the server's fragments: leaf
// bytes in seq order, children in order; it checks the rules a strict
// receiver checks (no seq after final, metadata only on seq 0 in gRPC).
type reassembly struct {
	t     *testing.T
	frags map[string]map[int32]*ev.NodeFragment
	final map[string]int32
}

func reassemble(t *testing.T, msgs []*ev.SessionMessage, strictMeta bool) *reassembly {
	r := &reassembly{t: t, frags: map[string]map[int32]*ev.NodeFragment{}, final: map[string]int32{}}
	for _, m := range msgs {
		if len(m.GetActions()) > 0 {
			t.Errorf("server sent an action")
		}
		for _, f := range m.GetNodeFragments() {
			if r.frags[f.GetId()] == nil {
				r.frags[f.GetId()] = map[int32]*ev.NodeFragment{}
			}
			if _, dup := r.frags[f.GetId()][f.GetSeq()]; dup {
				t.Errorf("node %q: seq %d sent twice", f.GetId(), f.GetSeq())
			}
			if fin, ok := r.final[f.GetId()]; ok {
				t.Errorf("node %q: seq %d after final %d", f.GetId(), f.GetSeq(), fin)
			}
			if strictMeta && f.GetSeq() > 0 && f.GetChunkFragment().GetMetadata() != nil {
				t.Errorf("node %q: metadata on seq %d", f.GetId(), f.GetSeq())
			}
			r.frags[f.GetId()][f.GetSeq()] = f
			if !f.GetContinued() {
				r.final[f.GetId()] = f.GetSeq()
			}
		}
	}
	return r
}

// text is the flattened text of node id ("" and false if incomplete).
func (r *reassembly) text(id string) (string, bool) {
	fin, ok := r.final[id]
	if !ok {
		return "", false
	}
	var sb strings.Builder
	for s := int32(0); s <= fin; s++ {
		f := r.frags[id][s]
		if f == nil {
			return "", false
		}
		sb.Write(f.GetChunkFragment().GetData())
		for _, c := range f.GetChildIds() {
			ct, ok := r.text(c)
			if !ok {
				return "", false
			}
			sb.WriteString(ct)
		}
	}
	return sb.String(), true
}

func (r *reassembly) mustText(id string) string {
	r.t.Helper()
	s, ok := r.text(id)
	if !ok {
		r.t.Fatalf("output %q incomplete", id)
	}
	return s
}

// normalize renders messages as compact JSON lines with server-minted ids
// renamed by first appearance, so two runs compare byte for byte.
func normalize(t *testing.T, msgs []*ev.SessionMessage, keep ...string) string {
	t.Helper()
	names := map[string]string{}
	for _, k := range keep {
		names[k] = k
	}
	uuid := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)
	var sb strings.Builder
	for _, m := range msgs {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		v := json.Value(b)
		_ = v.Compact()
		line := uuid.ReplaceAllStringFunc(string(v), func(id string) string {
			if names[id] == "" {
				names[id] = fmt.Sprintf("minted-%d", len(names)+1)
			}
			return names[id]
		})
		sb.WriteString(line + "\n")
	}
	return sb.String()
}

// TestGRPCEcho: a GENERATE on echo over gRPC (connect-go client) streams
// one text leaf, a fragment per word, closed by an empty final fragment,
// then the stream ends OK after the client's half-close.
func TestGRPCEcho(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	for _, proto := range []struct {
		name string
		opts []connect.ClientOption
	}{
		{"grpc", []connect.ClientOption{connect.WithGRPC()}},
		{"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}},
		{"connect", []connect.ClientOption{connect.WithProtoJSON()}},
	} {
		t.Run(proto.name, func(t *testing.T) {
			msgs, err := exchange(t, client(t, inst.URL, proto.opts...),
				generate("echo", "p1", "response=r1"),
				frags(parent("p1", "p1_text", "p1_eot"), textNode("p1_text", "Hello, world", "user"),
					&ev.NodeFragment{Id: "p1_eot", ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: evergreen.MimeEndOfTurn}}}))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "session-echo.golden", normalize(t, msgs, "r1"))
			if got := reassemble(t, msgs, true).mustText("r1"); got != "Hello, world" {
				t.Errorf("response %q", got)
			}
		})
	}
}

// TestStatuses: aborts end the stream with the reference's table.
func TestStatuses(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	c := client(t, inst.URL)
	prompt := frags(textNode("p", "one two three"))
	cases := []struct {
		name string
		msgs []*ev.SessionMessage
		code connect.Code
		msg  string
	}{
		{"unknown target", []*ev.SessionMessage{generate("gpt-9", "p", "response=r"), prompt}, connect.CodeNotFound, `target_spec.id "gpt-9": unknown target`},
		{"empty target without a default route", []*ev.SessionMessage{generate("", "p", "response=r"), prompt}, connect.CodeNotFound, `target_spec.id "": unknown target`},
		{"protocol violation", []*ev.SessionMessage{frags(textNode("a", "x"), &ev.NodeFragment{Id: "a", Seq: 1})}, connect.CodeInvalidArgument, `node "a": fragment seq 1 arrived after the final fragment seq 0`},
		{"unknown parameter", []*ev.SessionMessage{generate("echo", "p", "answer=r"), prompt}, connect.CodeInvalidArgument, `unknown output name "answer"`},
		{"upstream unavailable", []*ev.SessionMessage{withParams(generate("stream", "p", "response=r"), map[string]any{"fail_after": 1, "fail_code": "unavailable", "fail_message": "model server down"}), prompt},
			connect.CodeUnavailable, `action GENERATE (output "r", target "stream"): model server down`},
		{"upstream failure", []*ev.SessionMessage{withParams(generate("stream", "p", "response=r"), map[string]any{"fail_after": 0, "fail_code": "data_loss"}), prompt},
			connect.CodeInternal, `injected failure after 0 deltas`},
		{"half-close with incomplete input", []*ev.SessionMessage{generate("echo", "p", "response=r"), frags(parent("p", "a", "b"), textNode("a", "x"))},
			connect.CodeFailedPrecondition, `node "b" is incomplete`},
		{"interrupt", []*ev.SessionMessage{generate("demo-approval", "p", "response=r"), prompt},
			connect.CodeFailedPrecondition, "cannot answer an interrupt"},
		{"unsupported action", []*ev.SessionMessage{{Actions: []*ev.Action{{Name: "DROP"}}}}, connect.CodeUnimplemented, `action "DROP" is not supported`},
		{"file ref", []*ev.SessionMessage{generate("echo", "p", "response=r"),
			frags(&ev.NodeFragment{Id: "p", ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "video/mp4"}, Payload: &ev.Chunk_Ref{Ref: "file://path/to/file/part1"}}})},
			connect.CodeInvalidArgument, "the bridge never reads local files"},
		{"message too big", []*ev.SessionMessage{frags(textNode("big", strings.Repeat("x", 5<<20)))}, connect.CodeResourceExhausted, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := exchange(t, c, tc.msgs...)
			if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %s containing %q", err, tc.code, tc.msg)
			}
		})
	}
	// The instance keeps serving.
	if _, err := exchange(t, c, generate("echo", "p", "response=r"), prompt); err != nil {
		t.Fatal(err)
	}
}

// recorder is a Runner over the scripted backend that records requests.
type recorder struct {
	be   *scripted.Backend
	mu   sync.Mutex
	reqs []*canonical.Request
}

func (r *recorder) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, proto.Clone(req).(*canonical.Request))
	r.mu.Unlock()
	if req.Target == "default" { // as a route {target: default, model: echo} would
		req.Target = "echo"
	}
	return r.be.Start(ctx, req)
}

func (r *recorder) Target(name string) (canonical.TargetInfo, bool) {
	if name == "default" {
		name = "echo"
	}
	return canonical.TargetInfo{Name: name, Backend: "scripted"}, r.be.Knows(name)
}

func (r *recorder) Targets() []canonical.TargetInfo { return nil }

func (r *recorder) requests() []*canonical.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*canonical.Request(nil), r.reqs...)
}

// standalone serves a Frontend over a recorder on an h2c test server.
func standalone(t *testing.T, cfg evergreen.FrontendConfig) (*httptest.Server, *recorder) {
	t.Helper()
	srv, rec, _ := standaloneFrontend(t, cfg)
	return srv, rec
}

func standaloneFrontend(t *testing.T, cfg evergreen.FrontendConfig) (*httptest.Server, *recorder, *evergreen.Frontend) {
	t.Helper()
	rec := &recorder{be: scripted.New(scripted.Config{})}
	if cfg.Runner == nil {
		cfg.Runner = rec
	}
	fe, err := evergreen.NewFrontend(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	fe.Mount(mux)
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, rec, fe
}

// specTurn1 and specTurn2 are the README's conversation (section 4.2 of
// the reference), with https refs standing in for its file refs.
func specTurn1() []*ev.SessionMessage {
	return []*ev.SessionMessage{
		generate("", "prompt_1", "response=response_1"),
		frags(parent("prompt_1", "question_1", "video_1"),
			textNode("question_1", "Write a summary of this video: "),
			&ev.NodeFragment{Id: "video_1", Seq: 0, Continued: true, ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "video/mp4"}, Payload: &ev.Chunk_Ref{Ref: "https://example.com/part1"}}},
			&ev.NodeFragment{Id: "video_1", Seq: 1, ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "video/mp4"}, Payload: &ev.Chunk_Ref{Ref: "https://example.com/part2"}}}),
	}
}

func specTurn2() []*ev.SessionMessage {
	return []*ev.SessionMessage{
		generate("", "prompt_2", "response=response_2"),
		frags(parent("prompt_2", "prompt_1", "response_1", "question_2"), textNode("question_2", "Who's winning?")),
	}
}

// TestMultiTurn runs the spec's two-turn example on one session: turn 2
// reuses prompt_1 and response_1 without re-sending them, and the run it
// starts sees the first answer. Turn 2 is sent only after turn 1's answer
// arrived, on a stream that stays open between turns.
func TestMultiTurn(t *testing.T) {
	srv, rec := standalone(t, evergreen.FrontendConfig{})
	s := client(t, srv.URL).StartSession(testCtx(t))
	send := func(ms []*ev.SessionMessage) {
		for _, m := range ms {
			if err := s.Send(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	readUntilFinal := func(id string) []*ev.SessionMessage {
		var got []*ev.SessionMessage
		for {
			m, err := s.Receive()
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			got = append(got, m)
			for _, f := range m.GetNodeFragments() {
				if f.GetId() == id && !f.GetContinued() {
					return got
				}
			}
		}
	}
	send(specTurn1())
	first := reassemble(t, readUntilFinal("response_1"), true).mustText("response_1")
	if first != "Write a summary of this video: " {
		t.Errorf("turn 1 answer %q", first)
	}
	send(specTurn2())
	second := reassemble(t, readUntilFinal("response_2"), true).mustText("response_2")
	if second != "Who's winning?" {
		t.Errorf("turn 2 answer %q", second)
	}
	if err := s.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(); !errors.Is(err, io.EOF) {
		t.Fatalf("after half-close: %v, want EOF (OK)", err)
	}
	_ = s.CloseResponse()

	reqs := rec.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d runs, want 2", len(reqs))
	}
	got := describe(reqs[1].GetInputs()[0].GetNode())
	want := "user text/plain Write a summary of this video:  | user video/mp4 @https://example.com/part1 | user video/mp4 @https://example.com/part2 | " +
		"assistant text/plain Write a summary of this video:  | user text/plain Who's winning?"
	if got != want {
		t.Errorf("turn 2 input\n got %s\nwant %s", got, want)
	}
	if reqs[0].GetThreadId() == "" || reqs[0].GetThreadId() != reqs[1].GetThreadId() {
		t.Errorf("turns on threads %q and %q, want one", reqs[0].GetThreadId(), reqs[1].GetThreadId())
	}
	// The first run is the new thread's own (the bridge then skips asking
	// the replay log for its history); the second is the thread's next.
	if reqs[0].GetRunId() != reqs[0].GetThreadId() || reqs[1].GetRunId() == reqs[1].GetThreadId() {
		t.Errorf("run ids %q then %q on thread %q, want the thread's own then another", reqs[0].GetRunId(), reqs[1].GetRunId(), reqs[0].GetThreadId())
	}
}

// TestPipelinedTurns sends both turns and half-closes at once: turn 2
// waits for turn 1's answer (its input), then runs; the stream ends OK.
func TestPipelinedTurns(t *testing.T) {
	srv, rec := standalone(t, evergreen.FrontendConfig{})
	msgs, err := exchange(t, client(t, srv.URL), append(specTurn2(), specTurn1()...)...)
	if err != nil {
		t.Fatal(err)
	}
	r := reassemble(t, msgs, true)
	if a, b := r.mustText("response_1"), r.mustText("response_2"); a != "Write a summary of this video: " || b != "Who's winning?" {
		t.Errorf("answers %q, %q", a, b)
	}
	if n := len(rec.requests()); n != 2 {
		t.Errorf("%d runs", n)
	}
}

// describe renders a canonical node's leaves as "role mime payload".
func describe(n *canonical.Node) string {
	var parts []string
	for _, l := range canonical.Leaves(nil, n) {
		p := l.GetRole() + " " + l.GetMime() + " "
		if l.GetRef() != "" {
			p += "@" + l.GetRef()
		} else {
			p += string(l.GetData())
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " | ")
}

// TestRoundTrip: Evergreen client -> bridge A -> Evergreen backend ->
// bridge B (scripted). The client sees exactly what it sees talking to B
// directly, reasoning and tool activity included.
func TestRoundTrip(t *testing.T) {
	b := bridgetest.Start(t, nil)
	var opts yaml.Node
	if err := yaml.Unmarshal([]byte(fmt.Sprintf("url: %s\noutputs: [response, reasoning, tool_calls]\nprotocol: grpc\nmax_nodes: 100000\nmax_depth: 64\nfragment_bytes: 65536\n", b.URL)), &opts); err != nil {
		t.Fatal(err)
	}
	cfg := bridge.Config{
		Backends: map[string]bridge.BackendConfig{"upstream": {Type: "evergreen", Options: *opts.Content[0]}},
		Routes:   []bridge.Route{{Target: "*", Backend: "upstream"}},
	}
	a := bridgetest.Start(t, &cfg)
	prompt := frags(parent("p", "t", "e"), textNode("t", "Ünïcode round trip 🙂", "user"),
		&ev.NodeFragment{Id: "e", ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: evergreen.MimeEndOfTurn}}})
	for _, tc := range []struct {
		name string
		msgs []*ev.SessionMessage
	}{
		{"echo", []*ev.SessionMessage{generate("echo", "p", "response=r"), prompt}},
		{"echo-aliases", []*ev.SessionMessage{generate("echo", "p", "response=r", "text=r2"), prompt}},
		{"demo-agent", []*ev.SessionMessage{generate("demo-agent", "p", "response=r", "reasoning=th", "tool_calls=tc"), prompt}},
		{"stream-params", []*ev.SessionMessage{withParams(generate("stream", "p", "response=r"), map[string]any{"deltas": 5, "delta_text": "ab"}), prompt}},
		{"failure", []*ev.SessionMessage{withParams(generate("stream", "p", "response=r"), map[string]any{"fail_after": 2, "fail_code": "unavailable", "fail_message": "gpu on fire"}), prompt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct, derr := exchange(t, client(t, b.URL), tc.msgs...)
			via, verr := exchange(t, client(t, a.URL), tc.msgs...)
			if connect.CodeOf(derr) != connect.CodeOf(verr) {
				t.Fatalf("status direct %v, via A %v", derr, verr)
			}
			if derr != nil && !strings.Contains(verr.Error(), "gpu on fire") {
				t.Errorf("via A: %v does not name the cause", verr)
			}
			d, v := normalize(t, direct, "r", "r2", "th", "tc"), normalize(t, via, "r", "r2", "th", "tc")
			if d != v {
				t.Errorf("via A differs from direct\n--- direct\n%s--- via A\n%s", d, v)
			}
			if len(direct) == 0 {
				t.Error("no output")
			}
		})
	}
}

// TestChainedActions: an action whose input is another action's output
// starts when that output is complete.
func TestChainedActions(t *testing.T) {
	srv, rec := standalone(t, evergreen.FrontendConfig{})
	msgs, err := exchange(t, client(t, srv.URL),
		generate("echo", "p2", "response=r2"),
		frags(parent("p2", "r1", "q")),
		generate("echo", "p1", "response=r1"),
		frags(textNode("p1", "first"), textNode("q", " second")))
	if err != nil {
		t.Fatal(err)
	}
	r := reassemble(t, msgs, true)
	if a, b := r.mustText("r1"), r.mustText("r2"); a != "first" || b != " second" {
		t.Errorf("answers %q %q", a, b)
	}
	reqs := rec.requests()
	if len(reqs) != 2 || describe(reqs[1].GetInputs()[0].GetNode()) != "assistant text/plain first | user text/plain  second" {
		t.Errorf("requests %v", reqs)
	}
}

// TestRetransmittedAction: an identical action is a retransmission and
// runs once.
func TestRetransmittedAction(t *testing.T) {
	srv, rec := standalone(t, evergreen.FrontendConfig{})
	act := generate("echo", "p", "response=r")
	if _, err := exchange(t, client(t, srv.URL), act, frags(textNode("p", "x")), act); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.requests()); n != 1 {
		t.Errorf("%d runs", n)
	}
}

// TestSessionLimits: limits abort with RESOURCE_EXHAUSTED naming them.
func TestSessionLimits(t *testing.T) {
	srv, _ := standalone(t, evergreen.FrontendConfig{Limits: evergreen.Limits{MaxNodes: 4, MaxDepth: 2, MaxBytes: 1 << 10}, MaxActions: 1})
	c := client(t, srv.URL)
	for _, tc := range []struct {
		msgs []*ev.SessionMessage
		code connect.Code
		msg  string
	}{
		{[]*ev.SessionMessage{frags(parent("a", "b", "c", "d", "e"))}, connect.CodeResourceExhausted, "(max_nodes)"},
		{[]*ev.SessionMessage{frags(textNode("a", strings.Repeat("x", 2000)))}, connect.CodeResourceExhausted, "(max_bytes)"},
		{[]*ev.SessionMessage{frags(parent("a", "b"), parent("b", "c"), parent("c", "d"))}, connect.CodeResourceExhausted, "(max_depth)"},
		{[]*ev.SessionMessage{generate("echo", "p", "response=r"), generate("echo", "p", "response=r2")}, connect.CodeResourceExhausted, "(MaxActions)"},
	} {
		_, err := exchange(t, c, tc.msgs...)
		if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("got %v, want %s containing %q", err, tc.code, tc.msg)
		}
	}
}

// TestFetchRefs: refs from allowlisted origins are fetched and inlined;
// others pass as refs, never fetched.
func TestFetchRefs(t *testing.T) {
	var mu sync.Mutex
	var hits []string
	media := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, r.URL.Path)
		mu.Unlock()
		_, _ = w.Write([]byte("fetched words"))
	}))
	defer media.Close()
	srv, rec := standalone(t, evergreen.FrontendConfig{FetchRefs: []string{media.URL}})
	ref := func(id, uri string) *ev.NodeFragment {
		return &ev.NodeFragment{Id: id, ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain"}, Payload: &ev.Chunk_Ref{Ref: uri}}}
	}
	_, err := exchange(t, client(t, srv.URL), generate("echo", "p", "response=r"),
		frags(parent("p", "a", "b"), ref("a", media.URL+"/doc.txt"), ref("b", "https://elsewhere.example.com/x.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(rec.requests()[0].GetInputs()[0].GetNode()); got != "user text/plain fetched words | user text/plain @https://elsewhere.example.com/x.txt" {
		t.Errorf("input %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Strings(hits)
	if len(hits) != 1 || hits[0] != "/doc.txt" {
		t.Errorf("fetched %v", hits)
	}
}

var golden = evergreen.Golden

// TestShutdown: at shutdown an idle session ends with UNAVAILABLE (gRPC)
// or close 1001 (WebSocket), and new sessions are refused.
func TestShutdown(t *testing.T) {
	srv, _, fe := standaloneFrontend(t, evergreen.FrontendConfig{})
	s := client(t, srv.URL).StartSession(testCtx(t))
	for _, m := range []*ev.SessionMessage{generate("echo", "p", "response=r"), frags(textNode("p", "before shutdown"))} {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	for done := false; !done; { // the answer, up to its final fragment
		m, err := s.Receive()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.GetNodeFragments() {
			done = done || (f.GetId() == "r" && !f.GetContinued())
		}
	}
	ws := wsDial(t, srv.URL, "")
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	fe.Shutdown()
	if _, err := s.Receive(); connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("gRPC session at shutdown: %v", err)
	}
	_ = s.CloseResponse()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Errorf("WebSocket session at shutdown: %v", err)
	}
	if _, err := exchange(t, client(t, srv.URL), generate("echo", "p", "response=r")); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("new session after shutdown: %v", err)
	}
}
