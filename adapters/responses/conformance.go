package responses

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/driver"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// conformanceProfile is what the protocol's wire keeps of a run, checked
// by the conformance runner (conformance/profile).
var conformanceProfile = &profile.Profile{
	NewPeer: newConformancePeer,
	Front:   conformanceKeep, Back: conformanceKeep, UpstreamCancel: true, NoParameters: true,
	Upstream: "the reference Responses peer: this package's frontend rendering the conformance driver's canonical script (not an independent implementation; the official SDKs check the frontend's wire in the package's tests)",
	FrontNotes: []profile.Degradation{
		profile.AgentAnswer,
		{"text, reasoning, tool-call", "kept: output_text parts, reasoning items (reasoning_text), function_call items with their call ids"},
		{"tool-activity, multimodal, error-nonterminal", "dropped: a response's output has no place for them; a call of a tool the request did not declare (the bridge runs it) is dropped too, not handed to the client to run"},
		{"interrupt", "the run reads as completed"},
		{"error-before", "an HTTP error status in OpenAI's form: the code goes through the status table (errors.go; e.g. failed_precondition → 400 → invalid_argument, data_loss → 500 → internal)"},
		{"error-mid", "an error event, then response.failed: every code survives but unknown and data_loss (server_error → internal)"},
		profile.HTTPConcurrency,
		{"replay", "a stored response's stream is replayed by GET ?stream=true&starting_after=N (tested in adapters/responses); the conformance client does not read it"},
		{"parameters", "a Responses request carries its own members only (max_output_tokens, temperature, top_p, ...): cases that need other parameters do not apply (server mode: the scripted faults cannot be asked for)"},
	},
	BackNotes: []profile.Degradation{
		{"text, reasoning, tool-call", "kept (the peer declares the calls its script's model makes as the request's tools; one its model ran itself is dropped, as by the frontend)"},
		{"tool-activity, multimodal, error-nonterminal", "the peer's wire cannot carry them: dropped"},
		{"interrupt", "the peer completes"},
		{"error-before", "the peer's HTTP error status, read through the status table"},
		{"error-mid", "the peer's error event: every code but unknown and data_loss (internal)"},
	},
}

// conformanceCode is the code a client of this wire reads for c: through
// the status table before the stream, the failure-code table after.
func conformanceCode(code string, refused bool) string {
	c, _ := canonical.ParseCode(code)
	if refused {
		return canonical.CodeOfHTTPStatus(statusOf(c)).String()
	}
	return codeOfFailure(failureCode(c)).String()
}

// conformanceKeep: what crosses this wire either way: text, reasoning and
// tool-call blocks but the calls the bridge ran; the outcome, with the
// code through the tables.
func conformanceKeep(t *cv1.Transcript, c *cases.Case) *cv1.Transcript {
	out := &cv1.Transcript{Status: t.GetStatus(), Code: t.GetCode()}
	for _, b := range t.GetBlocks() {
		if profile.Undeclared(c, b) {
			continue
		}
		switch b.GetType() {
		case transcript.Text, transcript.Reasoning, transcript.ToolCall:
			out.Blocks = append(out.Blocks, profile.Clone(&cv1.Transcript{Blocks: []*cv1.Block{b}}).Blocks[0])
		}
	}
	switch t.GetStatus() {
	case transcript.Interrupted:
		out.Status, out.Code = transcript.Completed, ""
	case transcript.Refused:
		out.Code = conformanceCode(t.GetCode(), true)
	case transcript.Failed:
		out.Code = conformanceCode(t.GetCode(), false)
	}
	return out
}

// newConformancePeer is the reference Responses peer: the frontend over
// the conformance driver's canonical backend, a case's name as its model,
// nothing stored.
func newConformancePeer(cs []*cases.Case) (*profile.Peer, error) {
	scripts := map[string]*driver.Script{}
	cancelled := make(chan string, len(cs)+16)
	for _, c := range cs {
		name := c.GetName()
		scripts[name] = &driver.Script{Response: c.GetResponse(), Cancelled: func() {
			select {
			case cancelled <- name:
			default:
			}
		}}
	}
	be := &driver.Backend{Lookup: func(target string) (*driver.Script, bool) {
		s, ok := scripts[target]
		return s, ok
	}}
	mux := http.NewServeMux()
	NewFrontend(FrontendConfig{Runner: peerRunner{be}}).Mount(mux)
	return &profile.Peer{Handler: declareScriptTools(mux, scripts), Cancelled: cancelled,
		Backend: func(addr, _ string) map[string]any { return map[string]any{"base_url": "http://" + addr + "/v1"} }}, nil
}

// declareScriptTools adds to a create request the tools its script's
// model calls (driver.ClientTools), as a model is given the tools it
// calls: the frontend renders calls of declared tools only, and the
// bridge in front of the peer need not have been told them (the native
// or Evergreen client of a case sends none).
func declareScriptTools(next http.Handler, scripts map[string]*driver.Script) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
			next.ServeHTTP(w, r)
			return
		}
		var body map[string]any
		if err := json.UnmarshalRead(http.MaxBytesReader(w, r.Body, 32<<20), &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		model, _ := body["model"].(string)
		if sc := scripts[model]; sc != nil {
			tools, _ := body["tools"].([]any)
			for _, name := range driver.ClientTools(sc.Response) {
				tools = append(tools, map[string]any{"type": "function", "name": name, "parameters": map[string]any{"type": "object"}})
			}
			body["tools"] = tools
		}
		data, err := json.Marshal(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
		next.ServeHTTP(w, r)
	})
}

// peerRunner runs the driver's scripts for the peer's frontend.
type peerRunner struct{ be *driver.Backend }

func (p peerRunner) Run(ctx context.Context, req *canonical.Request) (canonical.Stream, error) {
	return p.be.Start(ctx, req)
}

func (p peerRunner) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name, Backend: "peer"}, p.be.Knows(name)
}

func (p peerRunner) Targets() []canonical.TargetInfo { return nil }
