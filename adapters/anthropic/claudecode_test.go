package anthropic_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// claudeCode is the real Claude Code CLI, pinned in
// conformance/clients/claude-code (make node-deps).
func claudeCode(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "conformance", "clients", "claude-code", "node_modules", ".bin", "claude"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: Claude Code is not installed (run make node-deps): %v", bin, err)
	}
	return bin
}

// ccEvent is a line of Claude Code's stream-json output, the members read.
type ccEvent struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	IsError bool   `json:"is_error"`
	Result  string `json:"result"`
	Message struct {
		Content []struct {
			Type string `json:"type"`
			Name string `json:"name"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
}

// runClaudeCode runs `claude -p prompt` against base with model, as the
// README tells users (ANTHROPIC_BASE_URL, the key as ANTHROPIC_AUTH_TOKEN),
// in a clean environment and home, and returns its stream-json events.
func runClaudeCode(t *testing.T, bin, base, key, model, prompt string, args ...string) []ccEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-p", prompt, "--output-format", "stream-json", "--verbose"}, args...)...)
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_AUTH_TOKEN=" + key,
		"ANTHROPIC_MODEL=" + model, "ANTHROPIC_SMALL_FAST_MODEL=echo",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // a run stopped by --max-turns exits 1: judged by its events
	var evs []ccEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev ccEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			evs = append(evs, ev)
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != "result" {
		t.Fatalf("claude -p %q: no result event\nstdout:\n%s\nstderr:\n%s", prompt, out, stderr.Bytes())
	}
	return evs
}

// blocks lists the assistant's content blocks Claude Code received, as
// type (and tool name).
func blocks(evs []ccEvent) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type != "assistant" {
			continue
		}
		for _, c := range ev.Message.Content {
			out = append(out, strings.TrimSuffix(c.Type+":"+c.Name, ":"))
		}
	}
	return out
}

// TestClaudeCode drives the real Claude Code CLI (pinned in
// conformance/clients/claude-code) at a whole instance, with an API key:
// every request it makes must be taken the first time (it retries a
// refused one in a reduced mode, which hid three refusals before), a call
// the bridge runs must not be handed to it, and its tool search must load
// the deferred tool it finds.
func TestClaudeCode(t *testing.T) {
	bin := claudeCode(t)
	inst, p := startWithPeer(t, "cc-key")
	log := bridgetest.NewStatusLog(t, inst.URL)
	base := log.URL
	const ok = "POST /v1/messages 200 OK"

	// The first request of a session carries a mid-conversation system
	// message, cache_control blocks and deferred tools.
	evs := runClaudeCode(t, bin, base, "cc-key", "echo", "hello", "--max-turns", "2")
	if got := log.Take(); !slices.Equal(got, []string{ok}) {
		t.Fatalf("echo: requests %q, want one taken", got)
	}
	if r := evs[len(evs)-1]; r.Subtype != "success" || r.IsError || r.Result == "" {
		t.Fatalf("echo: result %+v", r)
	}

	// The agent's calculator call is the bridge's: Claude Code sees a
	// server_tool_use, runs nothing, and the answer ends the turn.
	evs = runClaudeCode(t, bin, base, "cc-key", "demo-agent", "what is 6*7?", "--max-turns", "2")
	if got := log.Take(); !slices.Equal(got, []string{ok}) {
		t.Fatalf("demo-agent: requests %q, want one taken", got)
	}
	if got, want := blocks(evs), []string{"thinking", "server_tool_use:calculator", "text"}; !slices.Equal(got, want) {
		t.Fatalf("demo-agent: blocks %q, want %q", got, want)
	}
	if r := evs[len(evs)-1]; r.Subtype != "success" || r.Result != "6 * 7 = 42." {
		t.Fatalf("demo-agent: result %+v", r)
	}

	// The model calls Claude Code's ToolSearch, whose tool_reference
	// result loads the deferred WebFetch for the next request upstream.
	// (The peer's model answers the same every turn: two turns at most.)
	evs = runClaudeCode(t, bin, base, "cc-key", "peer-toolsearch", "find a tool that fetches web pages", "--max-turns", "2")
	if got := log.Take(); !slices.Equal(got, []string{ok, ok}) {
		t.Fatalf("peer-toolsearch: requests %q, want two taken", got)
	}
	if got := blocks(evs); !slices.Contains(got, "tool_use:ToolSearch") {
		t.Fatalf("peer-toolsearch: blocks %q, want a ToolSearch tool_use", got)
	}
	reqs := p.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the peer got %d requests, want 2", len(reqs))
	}
	first, second := upstreamTools(t, reqs[0].Body), upstreamTools(t, reqs[1].Body)
	if slices.Contains(first, "WebFetch") || !slices.Contains(second, "WebFetch") || !slices.Contains(first, "ToolSearch") {
		t.Fatalf("tools upstream: %q, then %q; want WebFetch only once ToolSearch found it", first, second)
	}
}

// upstreamTools is the names of the tools of a request the peer got.
func upstreamTools(t *testing.T, body []byte) []string {
	t.Helper()
	var r struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return names
}
