package agent_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/adapters/scripted"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// seenBackend is the scripted backend, keeping each request's input as
// the backend got it.
type seenBackend struct {
	be     canonical.Backend
	mu     sync.Mutex
	inputs [][]string // per run: each leaf as role: text
}

func (b *seenBackend) Start(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	var leaves []string
	for _, in := range req.GetInputs() {
		for _, l := range canonical.Leaves(nil, in.GetNode()) {
			leaves = append(leaves, l.GetRole()+": "+string(l.GetData()))
		}
	}
	b.mu.Lock()
	b.inputs = append(b.inputs, leaves)
	b.mu.Unlock()
	return b.be.Start(ctx, req)
}

func (b *seenBackend) last() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inputs[len(b.inputs)-1]
}

// runtimeRun runs target on thread through rt with the text as the user's
// message, as the bridge would (the run id set), and returns its events.
func runtimeRun(t *testing.T, rt canonical.Runtime, be canonical.Backend, thread, run, target, text string, ext map[string]*structpb.Value) []*canonical.Event {
	t.Helper()
	req := &canonical.Request{RunId: run, ThreadId: thread, Target: target, Runtime: "agent", Extensions: ext,
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", text)}}}
	s, err := rt.Start(context.Background(), req, be)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := canonical.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// shape is an event's kind, and for the runtime's own events what they
// say: a values event's messages (type: content), an update's node, a
// checkpoint's source.
func shape(ev *canonical.Event) string {
	switch k := ev.GetKind().(type) {
	case *canonical.KindStateSnapshot:
		var msgs []string
		for _, m := range k.StateSnapshot.GetValues().GetStructValue().GetFields()["messages"].GetListValue().GetValues() {
			f := m.GetStructValue().GetFields()
			msgs = append(msgs, f["type"].GetStringValue()+": "+f["content"].GetStringValue())
		}
		ref := ev.GetExtensions()["agent.checkpoint"].GetStringValue()
		if k.StateSnapshot.GetValues() == nil {
			return "values @" + ref
		}
		return "values @" + ref + " [" + strings.Join(msgs, " | ") + "]"
	case *canonical.KindStateUpdate:
		return "updates " + k.StateUpdate.GetNode()
	case *canonical.KindCheckpoint:
		return fmt.Sprintf("checkpoint %s<-%s %s", k.Checkpoint.GetId(), k.Checkpoint.GetParentId(), k.Checkpoint.GetSource())
	case *canonical.KindLifecycle:
		return "lifecycle " + k.Lifecycle.GetStatus().String()
	case *canonical.KindBlockDelta:
		return "delta " + k.BlockDelta.GetText()
	}
	return fmt.Sprintf("%T", ev.GetKind())
}

func shapes(evs []*canonical.Event) string {
	var out []string
	for _, ev := range evs {
		out = append(out, shape(ev))
	}
	return strings.Join(out, "\n")
}

// The runtime keeps a plain model's conversation: a run adds its input as
// a step before the model's first event and the model's message as a
// step after it, each an update, the whole state and a checkpoint; the
// next run is sent the conversation; and a runtime started afresh on the
// same store (another instance, a restart) continues it.
func TestRuntimeKeepsTheConversation(t *testing.T) {
	store := startStore(t)
	be := &seenBackend{be: scripted.New(scripted.Config{})}
	rt := agent.NewRuntime(store, nil, agent.RuntimeConfig{})
	first := runtimeRun(t, rt, be, "t-conv", "run-1", "echo", "hello there", nil)
	want := strings.Join([]string{
		"lifecycle RUN_STATUS_RUNNING",
		"values @ckpt-1 [human: hello there]",
		"checkpoint ckpt-1<- input",
		"*interlinguav1.Event_MessageStart",
		"*interlinguav1.Event_BlockStart",
		"delta hello",
		"delta  there",
		"*interlinguav1.Event_BlockFinish",
		"*interlinguav1.Event_MessageFinish",
		"updates model",
		"values @ckpt-2 [human: hello there | ai: hello there]",
		"checkpoint ckpt-2<-ckpt-1 loop",
		"lifecycle RUN_STATUS_COMPLETED",
	}, "\n")
	if got := shapes(first); got != want {
		t.Fatalf("first run:\n%s\nwant\n%s", got, want)
	}
	if got := be.last(); strings.Join(got, "\n") != "user: hello there" {
		t.Fatalf("first run's input: %q", got)
	}

	again := agent.NewRuntime(store, nil, agent.RuntimeConfig{}) // read back from the store
	second := runtimeRun(t, again, be, "t-conv", "run-2", "echo", "and again", nil)
	if got, want := be.last(), []string{"user: hello there", "assistant: hello there", "user: and again"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("second run's input: %q, want %q", got, want)
	}
	last := second[len(second)-2]
	if got, want := shape(last), "checkpoint ckpt-4<-ckpt-3 loop"; got != want {
		t.Fatalf("second run's last step: %s, want %s", got, want)
	}
	if got, want := shape(second[len(second)-3]), "values @ckpt-4 [human: hello there | ai: hello there | human: and again | ai: and again]"; got != want {
		t.Fatalf("second run's state: %s, want %s", got, want)
	}
}

// A state past InlineValues is not in its values event, which names its
// checkpoint instead: the checkpoint's record is in the store by the time
// the event is received, and holds the state.
func TestRuntimeLargeValuesNameTheirCheckpoint(t *testing.T) {
	store := startStore(t)
	rt := agent.NewRuntime(store, nil, agent.RuntimeConfig{InlineValues: 64})
	be := scripted.New(scripted.Config{})
	req := &canonical.Request{RunId: "run-big", ThreadId: "t-big", Target: "echo", Runtime: "agent",
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", strings.Repeat("word ", 40))}}}
	s, err := rt.Start(context.Background(), req, be)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checked := 0
	for {
		ev, err := s.Recv()
		if err != nil {
			break
		}
		snap := ev.GetStateSnapshot()
		if snap == nil {
			continue
		}
		if snap.GetValues() != nil {
			t.Fatalf("a state of over 64 bytes is in its values event: %v", ev)
		}
		id := ev.GetExtensions()["agent.checkpoint"].GetStringValue()
		b, _, err := store.Get(context.Background(), "t-big", "agent.ckpt."+id)
		if err != nil {
			t.Fatalf("values event names %q, whose record is not stored: %v", id, err)
		}
		if !strings.Contains(string(b), strings.Repeat("word ", 40)) {
			t.Fatalf("checkpoint %s's record lacks the message: %.200s", id, b)
		}
		checked++
	}
	if checked != 2 {
		t.Fatalf("%d values events checked, want 2", checked)
	}
}

// A state of 64 KiB or more is written once a save: in its checkpoint's
// record, which the head names (values_at) in place of holding it. A
// runtime started afresh on the store reads it whole from there.
func TestRuntimeLargeStateIsWrittenOnce(t *testing.T) {
	store := startStore(t)
	be := &seenBackend{be: scripted.New(scripted.Config{})}
	long := strings.Repeat("x", 70<<10) // no space: one delta
	runtimeRun(t, agent.NewRuntime(store, nil, agent.RuntimeConfig{}), be, "t-once", "run-1", "echo", long, nil)
	head, _, err := store.Get(context.Background(), "t-once", "agent")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Version  int              `json:"v"`
		Values   json.Value       `json:"values"`
		ValuesAt string           `json:"values_at"`
		Index    []map[string]any `json:"checkpoint_index"`
	}
	if err := json.Unmarshal(head, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Version != 3 || rec.ValuesAt != "ckpt-2" || string(rec.Values) != "null" || len(rec.Index) != 2 || len(head) > 2048 {
		t.Fatalf("head record (%d bytes): %.600s", len(head), head)
	}
	if rec.Index[1]["id"] != "ckpt-2" || rec.Index[1]["parent_id"] != "ckpt-1" || rec.Index[1]["source"] != "loop" || rec.Index[1]["values"] != nil {
		t.Fatalf("head lists checkpoint %v", rec.Index[1])
	}
	runtimeRun(t, agent.NewRuntime(store, nil, agent.RuntimeConfig{}), be, "t-once", "run-2", "echo", "short", nil)
	if got, want := be.last(), []string{"user: " + long, "assistant: " + long, "user: short"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("second run's input: %d leaves, want the conversation whole", len(got))
	}
}

// A head whose values' checkpoint expired (records expire a while after
// their last write) reads as a thread expired: the next run starts
// afresh, and its save replaces the head.
func TestRuntimeValuesCheckpointExpired(t *testing.T) {
	store := startStore(t)
	be := &seenBackend{be: scripted.New(scripted.Config{})}
	runtimeRun(t, agent.NewRuntime(store, nil, agent.RuntimeConfig{}), be, "t-exp", "run-1", "echo", strings.Repeat("y", 70<<10), nil)
	if err := store.Delete(context.Background(), "t-exp", "agent.ckpt.ckpt-2"); err != nil {
		t.Fatal(err)
	}
	evs := runtimeRun(t, agent.NewRuntime(store, nil, agent.RuntimeConfig{}), be, "t-exp", "run-2", "echo", "fresh", nil)
	if got := be.last(); strings.Join(got, "\n") != "user: fresh" {
		t.Fatalf("input after the state expired: %d leaves, want the new message only", len(got))
	}
	if got, want := shape(evs[len(evs)-1]), "lifecycle RUN_STATUS_COMPLETED"; got != want {
		t.Fatalf("run ended %s, want %s", got, want)
	}
	head, _, err := store.Get(context.Background(), "t-exp", "agent")
	if err != nil || !strings.Contains(string(head), `"last_run":"run-2"`) {
		t.Fatalf("head after the run: %.300s (%v)", head, err)
	}
}

// A thread saved by an earlier version (its head, version 2, holding the
// values and listing the checkpoints by id) is read as it was saved.
func TestRuntimeReadsVersion2Records(t *testing.T) {
	store := startStore(t)
	ctx := context.Background()
	state := `{"messages":[{"type":"human","content":"old question","id":"m1"},{"type":"ai","content":"old answer","id":"m2"}]}`
	records := map[string]string{
		"agent":             `{"v":2,"thread_id":"t-v2","seq":0,"values":` + state + `,"checkpoints":["ckpt-1"],"head":"ckpt-1","next_checkpoint":1,"status":"completed","runs":1,"updated":"2026-11-22T09:00:00Z"}`,
		"agent.ckpt.ckpt-1": `{"id":"ckpt-1","step":0,"source":"loop","time":"2026-11-22T09:00:00Z","values":` + state + `}`,
	}
	for key, rec := range records {
		if _, err := store.Put(ctx, "t-v2", key, []byte(rec), 0); err != nil {
			t.Fatal(err)
		}
	}
	be := &seenBackend{be: scripted.New(scripted.Config{})}
	evs := runtimeRun(t, agent.NewRuntime(store, nil, agent.RuntimeConfig{}), be, "t-v2", "run-2", "echo", "new", nil)
	if got, want := be.last(), []string{"user: old question", "assistant: old answer", "user: new"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("input: %q, want %q", got, want)
	}
	if got, want := shape(evs[2]), "checkpoint ckpt-2<-ckpt-1 input"; got != want {
		t.Fatalf("the run's first step: %s, want %s", got, want)
	}
}

// Runs of a thread take turns: a second run waits for the first to end,
// and a run closed before its end gives its turn up.
func TestRuntimeRunsTakeTurns(t *testing.T) {
	store := startStore(t)
	rt := agent.NewRuntime(store, nil, agent.RuntimeConfig{})
	be := scripted.New(scripted.Config{})
	start := func(ctx context.Context, run string) (canonical.Stream, error) {
		return rt.Start(ctx, &canonical.Request{RunId: run, ThreadId: "t-turns", Target: "echo", Runtime: "agent",
			Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "hi")}}}, be)
	}
	first, err := start(context.Background(), "run-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	waiting, err := start(ctx, "run-b") // returns at once; its first Recv waits for the turn
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := waiting.Recv(); canonical.CodeOf(err) != canonical.CodeDeadlineExceeded {
		t.Fatalf("a second run started while the first went on: %v %v", ev, err)
	}
	_ = waiting.Close()
	_ = first.Close()
	second, err := start(context.Background(), "run-c")
	if err != nil {
		t.Fatalf("the thread's turn was not given up by a closed run: %v", err)
	}
	evs, err := canonical.Collect(second)
	if err != nil {
		t.Fatal(err)
	}
	// The closed run's input step stands (echo answers the user's turn,
	// both messages).
	if got := shape(evs[len(evs)-3]); got != "values @ckpt-3 [human: hi | human: hi | ai: hihi]" {
		t.Fatalf("after a closed run: %s", got)
	}
	b, _, err := store.Get(context.Background(), "t-turns", "agent")
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		Status string `json:"status"`
		Runs   int    `json:"runs"`
	}
	if err := json.Unmarshal(b, &head); err != nil || head.Status != "completed" || head.Runs != 2 {
		t.Fatalf("stored head %s (%v): want completed after 2 runs", b, err)
	}
}

// postNativeRun posts a native run and returns its events.
func postNativeRun(t *testing.T, base, body string) []*canonical.Event {
	t.Helper()
	evs, code := bridgetest.PostRun(t, base, body)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	return evs
}

// The daemon runs the agent runtime for any frontend's request that names
// it: two native runs on one thread keep a conversation, the runtime's
// steps numbered in the thread's seqs with the model's events, and an
// observer replays them from the log.
func TestNativeRunsThroughTheAgentRuntime(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	body := func(text string) string {
		return fmt.Sprintf(`{"target":"echo","threadId":"t-native","runtime":"agent","inputs":[{"name":"prompt","node":{"role":"user","data":%q}}]}`,
			base64.StdEncoding.EncodeToString([]byte(text)))
	}
	first := postNativeRun(t, inst.URL, body("one"))
	second := postNativeRun(t, inst.URL, body("two"))
	all := append(first, second...)
	for i, ev := range all {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d: %v", i, ev.GetSeq(), ev)
		}
	}
	if got, want := shape(second[len(second)-3]), "values @ckpt-4 [human: one | ai: one | human: two | ai: two]"; got != want {
		t.Fatalf("second run's state: %s, want %s", got, want)
	}
	obs, err := inst.Bridge().Observe(context.Background(), "t-native", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	for i := range all {
		ev, err := obs.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := shape(ev), shape(all[i]); got != want || ev.GetSeq() != all[i].GetSeq() {
			t.Fatalf("replayed event %d: %d %s, want %d %s", i, ev.GetSeq(), got, all[i].GetSeq(), want)
		}
	}
}

// inject writes a message into the thread's stored head record as a
// frontend injecting it into a run does (input.inject), over the head's
// revision.
func inject(t *testing.T, store canonical.ThreadStore, thread, id, text string) {
	t.Helper()
	ctx := context.Background()
	b, rev, err := store.Get(ctx, thread, "agent")
	if err != nil {
		t.Fatal(err)
	}
	var head map[string]json.Value
	if err := json.Unmarshal(b, &head); err != nil {
		t.Fatal(err)
	}
	var injected []json.Value
	if raw, ok := head["injected"]; ok {
		if err := json.Unmarshal(raw, &injected); err != nil {
			t.Fatal(err)
		}
	}
	msg, _ := json.Marshal(map[string]string{"type": "human", "content": text, "id": id})
	head["injected"], _ = json.Marshal(append(injected, msg))
	b, _ = json.Marshal(head)
	if _, err := store.Put(ctx, thread, "agent", b, rev); err != nil {
		t.Fatal(err)
	}
}

// Messages injected while a run goes on (written to the stored record by
// any instance's frontend) are added as a step at the run's end, once; and
// an update run adds those injected since, without the backend, its
// events marked as an update's.
func TestRuntimeAddsInjectedMessages(t *testing.T) {
	store := startStore(t)
	rt := agent.NewRuntime(store, nil, agent.RuntimeConfig{})
	be := &seenBackend{be: scripted.New(scripted.Config{})}
	s, err := rt.Start(context.Background(), &canonical.Request{RunId: "run-1", ThreadId: "t-inj", Target: "echo", Runtime: "agent",
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "hi")}}}, be)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	inject(t, store, "t-inj", "inject-1", "psst")
	evs, err := canonical.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"updates model",
		"values @ckpt-2 [human: hi | ai: hi]",
		"checkpoint ckpt-2<-ckpt-1 loop",
		"updates __input__",
		"values @ckpt-3 [human: hi | ai: hi | human: psst]",
		"checkpoint ckpt-3<-ckpt-2 update",
		"lifecycle RUN_STATUS_COMPLETED",
	}, "\n")
	if got := shapes(evs[len(evs)-7:]); got != want {
		t.Fatalf("the run's end:\n%s\nwant\n%s", got, want)
	}

	inject(t, store, "t-inj", "inject-2", "later")
	ext := map[string]*structpb.Value{"agent.runtime": structpb.NewStringValue(`{"update":true}`)}
	up := runtimeRun(t, rt, be, "t-inj", "run-2", "echo", "", ext)
	want = strings.Join([]string{
		"updates __input__",
		"values @ckpt-4 [human: hi | ai: hi | human: psst | human: later]",
		"checkpoint ckpt-4<-ckpt-3 update",
		"lifecycle RUN_STATUS_COMPLETED",
	}, "\n")
	if got := shapes(up); got != want {
		t.Fatalf("update run:\n%s\nwant\n%s", got, want)
	}
	for _, ev := range up {
		if !ev.GetExtensions()["agent.update"].GetBoolValue() {
			t.Fatalf("update run's event not marked: %v", ev)
		}
	}
	if len(be.inputs) != 1 {
		t.Fatalf("the backend was started %d times, want once (an update run does not start it)", len(be.inputs))
	}
	b, _, _ := store.Get(context.Background(), "t-inj", "agent")
	if strings.Contains(string(b), `"injected"`) {
		t.Fatalf("injected messages left in the record after they were added: %s", b)
	}
}

// normalizeFrames makes frames of two runs comparable: timestamps, and
// run and message ids (each distinct one numbered in order of appearance).
func normalizeFrames(frames []string) string {
	all := strings.Join(frames, "\n")
	all = regexp.MustCompile(`"timestamp":\d+`).ReplaceAllString(all, `"timestamp":0`)
	ids := map[string]string{}
	return regexp.MustCompile(`(run|msg|call|lc_run|chatcmpl)-[A-Za-z0-9_-]+`).ReplaceAllStringFunc(all, func(id string) string {
		if ids[id] == "" {
			ids[id] = fmt.Sprintf("<id%d>", len(ids))
		}
		return ids[id]
	})
}

// The agent runtime's wire events (what an agent-protocol reader on any
// instance frames from the replay log) are, frame for frame, what the
// agent frontend sends for the same run today, but for timestamps and ids.
func TestRuntimeWireFramesAreTheFrontends(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	s := &server{URL: inst.URL, hc: http.DefaultClient}
	for _, target := range []string{"echo", "demo-agent"} {
		thread := "t-front-" + target
		st := s.openSSE(t, thread, `{"channels":["lifecycle","messages","values","updates","checkpoints","tasks","custom","input","tools"]}`, nil)
		s.runStart(t, thread, target, user("what is 6*7?"), nil)
		var want []string
		for {
			e := st.next(false)
			want = append(want, string(e.Data))
			var env envelope
			if err := json.Unmarshal(e.Data, &env); err != nil {
				t.Fatal(err)
			}
			if env.rootTerminal() {
				break
			}
		}
		opts, _ := json.Marshal(map[string]any{"input": user("what is 6*7?"), "assistant": target})
		body, _ := json.Marshal(map[string]any{"target": target, "threadId": "t-rt-" + target, "runtime": "agent", "extensions": map[string]any{"agent.runtime": string(opts)}})
		var got []string
		for _, ev := range postNativeRun(t, inst.URL, string(body)) {
			got = append(got, agent.WireFrames(ev)...)
		}
		if len(got) < 10 {
			t.Fatalf("%s: only %d frames", target, len(got))
		}
		if g, w := normalizeFrames(got), normalizeFrames(want); g != w {
			t.Fatalf("%s: the runtime's frames:\n%s\nthe frontend's:\n%s", target, g, w)
		}
	}
}

// refusingStore refuses every write of a record whose key starts with
// prefix (a store full, or gone, when a checkpoint is written).
type refusingStore struct {
	canonical.ThreadStore
	prefix string
	allow  *atomic.Int32 // writes under prefix taken before the refusals (nil: none)
}

func (s refusingStore) Put(ctx context.Context, thread, key string, value []byte, expectRev uint64) (uint64, error) {
	if strings.HasPrefix(key, s.prefix) && (s.allow == nil || s.allow.Add(-1) < 0) {
		return 0, canonical.Errorf(canonical.CodeResourceExhausted, "thread store full (test)")
	}
	return s.ThreadStore.Put(ctx, thread, key, value, expectRev)
}

// A run the runtime cannot go on with fails with the reason, and what its
// stream gives before the failure, ended as the bridge ends a stream that
// fails (Guard.End), is a run of the event model: its state not saved
// (the checkpoint record its large values name refused: before, the
// runtime dropped the events it had queued, a message's finish among
// them, and gave a failed end, which the bridge refused as "backend broke
// the event model: run ends with an open message or block", the store's
// error lost), or a block past MaxBlockBytes (before, a failed end inside
// the open block, refused the same way).
func TestRuntimeFailureKeepsTheEventModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(canonical.ThreadStore) canonical.ThreadStore
		cfg   agent.RuntimeConfig
		want  string
	}{
		{"state not saved", func(s canonical.ThreadStore) canonical.ThreadStore {
			// The input step's checkpoint is stored (it is saved before
			// its events go out); the loop's, whose large values name it,
			// is refused.
			allow := &atomic.Int32{}
			allow.Store(1)
			return refusingStore{ThreadStore: s, prefix: "agent.ckpt.", allow: allow}
		},
			agent.RuntimeConfig{InlineValues: 400}, "thread store full"},
		{"block too large", func(s canonical.ThreadStore) canonical.ThreadStore { return s },
			agent.RuntimeConfig{MaxBlockBytes: 100}, "MaxBlockBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := agent.NewRuntime(tc.store(startStore(t)), nil, tc.cfg)
			req := &canonical.Request{RunId: "run-fail", ThreadId: "t-fail", Target: "echo", Runtime: "agent",
				Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", strings.Repeat("word ", 40))}}}
			s, err := rt.Start(context.Background(), req, scripted.New(scripted.Config{}))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var evs []*canonical.Event
			var g canonical.Guard
			for {
				ev, err := s.Recv()
				if err != nil {
					if canonical.CodeOf(err) != canonical.CodeResourceExhausted || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("stream ended with %v, want resource_exhausted naming %q", err, tc.want)
					}
					evs = g.End(evs, canonical.StatusFailed, canonical.AsError(err))
					break
				}
				if v := g.Observe(ev); v != nil {
					t.Fatalf("event %d (%v) refused: %v", len(evs), ev.GetKind(), v.Message)
				}
				evs = append(evs, ev)
			}
			if err := canonical.Validate(evs); err != nil {
				t.Fatal(err)
			}
			if evs[len(evs)-2].GetMessageFinish() == nil {
				t.Fatalf("the event before the end is %v, want the open message finished", evs[len(evs)-2].GetKind())
			}
		})
	}
}

// A run whose owner dies after its input step (the checkpoint and its
// events sent, the run not ended) leaves the thread's record with that
// step saved: a runtime started afresh on the store (the next owner)
// keeps the input and hands out the next checkpoint id, never that one
// again (the audit saw ckpt-3 name two states, the input gone).
func TestRuntimeInputStepOutlivesItsOwner(t *testing.T) {
	store := startStore(t)
	be := scripted.New(scripted.Config{})
	runtimeRun(t, agent.NewRuntime(store, nil, agent.RuntimeConfig{}), be, "t-crash", "run-1", "echo", "one", nil)
	req := &canonical.Request{RunId: "run-2", ThreadId: "t-crash", Target: "echo", Runtime: "agent",
		Parameters: map[string]*structpb.Value{"hang": structpb.NewBoolValue(true)},
		Inputs:     []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "two")}}}
	s, err := agent.NewRuntime(store, nil, agent.RuntimeConfig{}).Start(context.Background(), req, be)
	if err != nil {
		t.Fatal(err)
	}
	for { // up to the input step's checkpoint, which clients have now
		ev, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetCheckpoint() != nil {
			if got := shape(ev); got != "checkpoint ckpt-3<-ckpt-2 input" {
				t.Fatalf("run 2's input step: %s", got)
			}
			break
		}
	}
	// The owner is gone: run 2 never ends there. The next owner:
	evs := runtimeRun(t, agent.NewRuntime(store, nil, agent.RuntimeConfig{}), be, "t-crash", "run-3", "echo", "three", nil)
	want := "values @ckpt-4 [human: one | ai: one | human: two | human: three]\ncheckpoint ckpt-4<-ckpt-3 input"
	if got := shapes(evs[1:3]); got != want {
		t.Fatalf("run 3's input step:\n%s\nwant\n%s", got, want)
	}
	_ = s.Close()
}
