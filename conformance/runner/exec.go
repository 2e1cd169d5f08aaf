package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// env is the system under test as the executor sees it.
type env interface {
	// base is the URL clients connect to.
	base() string
	// target is the target a client names to run case c on backend be.
	target(be string, c *cases.Case) string
	// serverParameters reports whether requests carry the cases' server
	// parameters (the scripted targets' faults): server mode only.
	serverParameters() bool
	// caseState is c's upstream state (nil in server mode).
	caseState(c *cases.Case) *caseState
	// cancelSeen waits up to d for the upstream of backend be to see the
	// cancel of case c; known is false when the mode cannot tell.
	cancelSeen(be string, c *cases.Case, d time.Duration) (seen, known bool)
	// drainCancels forgets the cancels reported so far, before a cancel
	// case runs.
	drainCancels(be string, c *cases.Case)
	// newRelay starts a relay to the server for one case's client.
	newClientRelay(rec *recorder, th throttle) (*relay, error)
}

// serverEnv is server mode: a server we did not start. With model set it
// is a foreign one (not an Interlingua serving the test targets).
type serverEnv struct {
	url   string
	model string
}

func (s *serverEnv) base() string { return s.url }
func (s *serverEnv) target(_ string, c *cases.Case) string {
	return cmp.Or(s.model, c.GetRequest().GetTarget())
}

// serverParameters: only our own server takes the fault-injection
// parameters.
func (s *serverEnv) serverParameters() bool { return s.model == "" }

// reachable fails when nothing answers HTTP at the server's URL: every
// case would fail anyway, and one expecting a failure (an upstream down)
// would pass against nothing.
func (s *serverEnv) reachable(ctx context.Context, headers http.Header) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/", nil)
	if err != nil {
		return fmt.Errorf("--target %q: %w", s.url, err)
	}
	maps.Copy(req.Header, headers)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the server at %s does not answer: %w", s.url, err)
	}
	resp.Body.Close()
	return nil
}
func (s *serverEnv) caseState(*cases.Case) *caseState { return nil }
func (s *serverEnv) drainCancels(string, *cases.Case) {}
func (s *serverEnv) newClientRelay(rec *recorder, th throttle) (*relay, error) {
	return newRelay(hostPort(s.url), rec, th)
}
func (s *serverEnv) cancelSeen(string, *cases.Case, time.Duration) (bool, bool) {
	return false, false
}

func hostPort(base string) string {
	h := strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")
	if i := strings.IndexByte(h, '/'); i >= 0 {
		h = h[:i]
	}
	return h
}

// executor runs jobs.
type executor struct {
	env  env
	opts Options
	// cancelMu runs cancel cases one at a time, so an upstream's cancel
	// signal belongs to the case that waits for it.
	cancelMu sync.Mutex
}

// run runs one job.
func (x *executor) run(ctx context.Context, j job) *Result {
	start := time.Now()
	res := &Result{Name: j.name, Frontend: j.frontend, Backend: j.backend, Case: j.c.GetName(), Features: j.c.GetFeatures()}
	defer func() { res.Duration = time.Since(start) }()
	ctx, cancel := context.WithTimeout(ctx, x.opts.CaseTimeout)
	defer cancel()
	want, note := x.expected(j)
	res.Want = want
	if note != "" {
		res.Outcome, res.Message = Skip, note
		return res
	}
	var tr *trace
	st := x.env.caseState(j.c)
	if x.opts.Trace {
		tr = newTrace()
		if st != nil {
			st.setTrace(tr)
			defer st.setTrace(nil)
		}
	}
	problems := x.exec(ctx, j, want, res, tr)
	if tr != nil {
		res.Trace = tr.String()
	}
	if len(problems) > 0 {
		res.Outcome, res.Message = Fail, strings.Join(problems, "; ")
		return res
	}
	res.Outcome = Pass
	return res
}

// expected derives the pair's expected transcript, or says why the case
// does not apply.
func (x *executor) expected(j job) (*cv1.Transcript, string) {
	if x.foreign() {
		if why := needsCooperation(j.c); why != "" {
			return nil, "needs a cooperating server (" + why + "); the server under test is not ours (--model)"
		}
	}
	fe := profiles[j.frontend]
	if j.c.GetClient().GetReplay() && !fe.Replay {
		return nil, "the " + j.frontend + " protocol has no replay"
	}
	if fe.NoParameters && (len(j.c.GetRequest().GetParameters().GetFields()) > 0 ||
		(j.backend == "server" && len(j.c.GetRequest().GetServerParameters().GetFields()) > 0)) {
		return nil, "the " + j.frontend + " protocol's requests carry no parameters, and this case needs some"
	}
	pair := "frontend:" + j.frontend + "/backend:" + j.backend
	for _, e := range j.c.GetExpectations() {
		p, err := compilePattern(e.GetPair())
		if err == nil && p.match(pair) {
			return transcript.Normalize(e.GetTranscript()), ""
		}
	}
	t := driver.Ideal(j.c.GetResponse(), j.c.GetRequest().GetPrompt())
	if be := profiles[j.backend]; be != nil && be.Back != nil {
		t = be.Back(t, j.c)
	}
	if x.foreign() {
		return shape(transcript.Normalize(fe.Front(t, j.c))), ""
	}
	return transcript.Normalize(fe.Front(t, j.c)), ""
}

// foreign reports server mode against a server that is not ours.
func (x *executor) foreign() bool {
	s, ok := x.env.(*serverEnv)
	return ok && s.model != ""
}

// needsCooperation says why case c needs a server that serves the test
// targets (fault injection parameters, a scripted answer), "" when any
// server's model can answer it: a completed run with text.
func needsCooperation(c *cases.Case) string {
	if f := c.GetRequest().GetServerParameters().GetFields(); len(f) > 0 {
		return "fault injection: " + strings.Join(slices.Sorted(maps.Keys(f)), ", ")
	}
	t := driver.Ideal(c.GetResponse(), c.GetRequest().GetPrompt())
	if t.GetStatus() != transcript.Completed {
		return "a scripted answer: a run that ends " + t.GetStatus()
	}
	if len(t.GetTools()) > 0 || len(t.GetInterrupts()) > 0 {
		return "a scripted answer: tool calls or interrupts"
	}
	if len(t.GetBlocks()) == 0 { // a model answers an empty prompt too
		return "a scripted answer: a run with no output"
	}
	for _, b := range t.GetBlocks() {
		if b.GetType() != "text" {
			return "a scripted answer: a " + b.GetType() + " block"
		}
	}
	return ""
}

// shape is what a foreign server's transcript is compared by: its outcome
// and whether it has text, not the text (a model's answer is its own).
func shape(t *cv1.Transcript) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode()}
	for _, b := range t.GetBlocks() {
		if b.GetType() == "text" && b.GetText() != "" {
			out.Blocks = []*cv1.Block{{Type: "text", Text: "(text)"}}
			break
		}
	}
	return out
}

// request builds the client's request.
func (x *executor) request(j job, copyN int) *canonical.Request {
	c := j.c
	req := &canonical.Request{
		Target:     x.env.target(j.backend, c),
		Inputs:     []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", c.GetRequest().GetPrompt())}},
		Parameters: map[string]*structpb.Value{},
	}
	for k, v := range c.GetRequest().GetParameters().GetFields() {
		req.Parameters[k] = v
	}
	for _, name := range driver.ClientTools(c.GetResponse()) {
		req.Tools = append(req.Tools, &canonical.ToolSpec{Name: name, Parameters: &structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("object")}}})
	}
	if x.env.serverParameters() {
		for k, v := range c.GetRequest().GetServerParameters().GetFields() {
			req.Parameters[k] = v
		}
	}
	if c.GetClient().GetReplay() {
		req.ThreadId = fmt.Sprintf("conformance-%s-%s-%s-%d-%d", j.frontend, j.backend, c.GetName(), copyN, time.Now().UnixNano())
	}
	return req
}

// exec runs the job's client(s) and returns the problems found.
func (x *executor) exec(ctx context.Context, j job, want *cv1.Transcript, res *Result, tr *trace) []string {
	cb := j.c.GetClient()
	base := x.env.base()
	var rl *relay
	if x.opts.Trace || cb.GetReadBytes() > 0 || cb.GetConcurrent() > 1 {
		var rec *recorder
		if tr != nil {
			rec = &recorder{side: "client", current: func() *trace { return tr }}
		}
		var err error
		th := throttle{bytes: int(cb.GetReadBytes()), delay: time.Duration(cb.GetReadDelayUs()) * time.Microsecond}
		if rl, err = x.env.newClientRelay(rec, th); err != nil {
			return []string{"client relay: " + err.Error()}
		}
		defer rl.close()
		base = "http://" + rl.addr()
	}
	n := max(int(cb.GetConcurrent()), 1)
	_, server := x.env.(*serverEnv)
	// One connection for concurrent runs: by the protocol's design, or
	// over h2c, which our own server speaks (a server under test need not).
	oneConn := n > 1 && (profiles[j.frontend].Multiplex || !server)
	co := clientOptions{base: base, target: x.env.target(j.backend, j.c), multiplex: oneConn, headers: x.opts.Headers}
	if v, ok := j.c.GetRequest().GetParameters().GetFields()["include_reasoning"]; ok {
		co.tritonBody = map[string]any{"include_reasoning": v.AsInterface()}
	}
	cl, err := newClient(j.frontend, co)
	if err != nil {
		return []string{"client: " + err.Error()}
	}
	defer cl.close()

	checkCancel := cb.GetCancel() && profiles[j.backend] != nil && profiles[j.backend].UpstreamCancel
	if checkCancel {
		x.cancelMu.Lock()
		defer x.cancelMu.Unlock()
		x.env.drainCancels(j.backend, j.c)
	}
	type outcome struct {
		t        *cv1.Transcript
		evs      []*canonical.Event
		problems []string
	}
	outs := make([]outcome, n)
	var wg sync.WaitGroup
	// The first copy opens the connection; the others start once its
	// first event has arrived, so they can share it.
	started := make(chan struct{})
	var startOnce sync.Once
	for i := range n {
		if i == 1 {
			select {
			case <-started:
			case <-ctx.Done():
			}
		}
		wg.Go(func() {
			first := func() {}
			if i == 0 {
				first = func() { startOnce.Do(func() { close(started) }) }
				defer first()
			}
			t, evs, p := x.once(ctx, cl, x.request(j, i), cb, tr, first)
			outs[i] = outcome{t, evs, p}
		})
	}
	wg.Wait()
	var problems []string
	for i, o := range outs {
		prefix := ""
		if n > 1 {
			prefix = fmt.Sprintf("run %d: ", i+1)
		}
		for _, p := range o.problems {
			problems = append(problems, prefix+p)
		}
		got := transcript.Normalize(o.t)
		if x.foreign() {
			got = shape(got)
		}
		if i == 0 {
			res.Got = got
		}
		if d := transcript.Diff(want, got); d != "" {
			problems = append(problems, prefix+d)
		}
	}
	if oneConn && rl != nil && rl.accepted.Load() != 1 {
		problems = append(problems, fmt.Sprintf("%d concurrent runs used %d connections, want 1", n, rl.accepted.Load()))
	}
	if checkCancel {
		if seen, known := x.env.cancelSeen(j.backend, j.c, 10*time.Second); known && !seen {
			problems = append(problems, "the upstream did not see the client's cancel within 10s")
		}
	}
	if cb.GetReplay() && len(problems) == 0 {
		problems = append(problems, x.replay(ctx, cl, outs[0].evs, uint64(cb.GetReplaySince()))...)
	}
	return problems
}

// once runs one copy of the case and returns the client's transcript, the
// events it decoded and the invariant violations and stream errors seen.
func (x *executor) once(ctx context.Context, cl client, req *canonical.Request, cb *cv1.ClientBehavior, tr *trace, first func()) (*cv1.Transcript, []*canonical.Event, []string) {
	b := transcript.NewBuilder()
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	var cancelled atomic.Bool
	var cancelOnce sync.Once
	doCancel := func() {
		cancelOnce.Do(func() {
			cancelled.Store(true)
			tr.add("client   cancels the run")
			cancelRun()
		})
	}
	if cb.GetCancel() {
		after := 5 * time.Second
		if _, server := x.env.(*serverEnv); server && cb.GetCancelAfterMs() > 0 {
			after = time.Duration(cb.GetCancelAfterMs()) * time.Millisecond
		}
		t := time.AfterFunc(after, doCancel)
		defer t.Stop()
	}
	s, err := cl.Start(runCtx, req)
	if err != nil {
		tr.add("client   start refused: %v", err)
		b.Refuse(err)
		t := b.Transcript()
		if cancelled.Load() {
			t.Status = transcript.Cancelled // the client gave up waiting for the start
		}
		return t, nil, nil
	}
	if x.foreign() {
		// A server we did not write may answer in namespaces of its own
		// (LangGraph streams each graph node's model call in
		// ["model:<task id>"]): its answer is read as a client of a flat
		// protocol reads it (canonical.AnswerStream).
		s = canonical.AnswerStream(s, 0)
	}
	defer s.Close()
	var (
		evs      []*canonical.Event
		problems []string
		v        = canonical.NewValidator()
	)
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if !cancelled.Load() {
				problems = append(problems, "stream error: "+err.Error())
			}
			break
		}
		tr.event("client", ev)
		first()
		evs = append(evs, proto.Clone(ev).(*canonical.Event))
		if verr := v.Check(ev); verr != nil && len(problems) < 5 {
			problems = append(problems, "client-side events break an invariant: "+verr.Error())
		}
		b.Add(ev)
		if _, end := canonical.TerminalOf(ev); end {
			break
		}
		if cb.GetCancel() && isContent(ev) {
			doCancel()
		}
	}
	t := b.Transcript()
	if cancelled.Load() {
		// The client gave up: whatever it decoded after that, the run
		// ended for it as cancelled.
		t.Status, t.Code = transcript.Cancelled, canonical.CodeCanceled.String()
	}
	return t, evs, problems
}

// isContent reports whether ev is a content delta.
func isContent(ev *canonical.Event) bool {
	d := ev.GetBlockDelta()
	return d != nil && (d.GetText() != "" || len(d.GetData()) > 0)
}

// replay reads the thread's events after seq since again and compares
// them with the run's.
func (x *executor) replay(ctx context.Context, cl client, run []*canonical.Event, since uint64) []string {
	o := cl.observer()
	if o == nil {
		return []string{"the client cannot replay"}
	}
	if len(run) == 0 {
		return []string{"the run produced no events to replay"}
	}
	var want []*canonical.Event
	for _, ev := range run {
		if ev.GetSeq() > since {
			want = append(want, ev)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := o.Observe(rctx, run[0].GetThreadId(), since)
	if err != nil {
		return []string{"replay refused: " + err.Error()}
	}
	defer s.Close()
	for i := 0; ; i++ {
		ev, err := s.Recv()
		if err != nil {
			return []string{fmt.Sprintf("replay: after %d of %d events: %v", i, len(want), err)}
		}
		if i >= len(want) {
			return []string{fmt.Sprintf("replay: event %d (seq %d) beyond the run's last", i, ev.GetSeq())}
		}
		if !proto.Equal(ev, want[i]) {
			return []string{fmt.Sprintf("replay: event %d is seq %d %v, want seq %d %v", i, ev.GetSeq(), ev.GetKind(), want[i].GetSeq(), want[i].GetKind())}
		}
		if i == len(want)-1 {
			return nil
		}
	}
}
