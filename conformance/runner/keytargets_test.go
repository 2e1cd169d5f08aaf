package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// keyedRun runs target through frontend p's own client (the conformance
// runner's, sending key as Authorization: Bearer) and returns the answer's
// text and how the run ended: nil for completed, else its error.
func keyedRun(t *testing.T, base, p, key, target string) (text string, err error) {
	t.Helper()
	cl, err := newClient(p, clientOptions{base: base, target: target, headers: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, err := cl.Start(ctx, &canonical.Request{Target: target, Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "secret words")}}})
	if err != nil {
		return "", err
	}
	defer s.Close()
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return text, nil
		}
		if err != nil {
			return text, err
		}
		text += ev.GetBlockDelta().GetText()
		if lc := ev.GetLifecycle(); lc != nil && lc.GetStatus() == canonical.StatusFailed && len(ev.GetNamespace()) == 0 {
			return text, canonical.WireError(canonical.Code(lc.GetError().GetCode()), lc.GetError().GetMessage())
		}
	}
}

// refusedAs is the code frontend p's client reads for a refusal with code,
// as p's wire carries it (its conformance profile).
func refusedAs(p string, code canonical.Code) string {
	c := &cases.Case{Case: &cv1.Case{Name: "keys"}, Folder: cases.Common}
	return profiles[p].Front(&cv1.Transcript{Status: transcript.Refused, Code: code.String()}, c).GetCode()
}

// codeOf is err's code's name, "none" for nil.
func codeOf(err error) string {
	if err == nil {
		return "none"
	}
	return canonical.AsError(err).Code.String()
}

// TestKeyTargetsEveryFrontend: a key limited to some targets reaches only
// those, through every frontend, whatever the frontend does with its
// connection (a request, a session, a WebSocket that outlives its upgrade,
// a thread). The allowed target answers in full; the other is refused
// without a word of its answer, exactly as a target no route serves is
// (canonical.VisibleTarget: a key cannot probe for the targets it may not
// use). The Glide frontend let such a key run every target: its runs
// carried no key.
func TestKeyTargetsEveryFrontend(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a"), Targets: []string{"echo"}}}
	inst := bridgetest.Start(t, &cfg)
	for _, p := range frontendProtocols {
		t.Run(p, func(t *testing.T) {
			if text, err := keyedRun(t, inst.URL, p, "key-a", "echo"); err != nil || text != "secret words" {
				t.Errorf("echo, allowed: %q, %v", text, err)
			}
			_, unknown := keyedRun(t, inst.URL, p, "key-a", "no-such-target")
			text, err := keyedRun(t, inst.URL, p, "key-a", "stream")
			hide := func(err error) string { return strings.ReplaceAll(fmt.Sprint(err), "no-such-target", "stream") }
			if err == nil || text != "" || codeOf(err) != codeOf(unknown) || hide(unknown) != fmt.Sprint(err) {
				t.Errorf("stream, not allowed: %q, %v\nwant nothing and what an unknown target gets: %v", text, err, unknown)
			}
		})
	}
}

// TestKeyMaxRunsEveryFrontend: a key's max_runs counts its runs through
// every frontend. With its one run held open (a native run of the stream
// target that hangs), the key's run through any frontend is refused
// resource_exhausted as the wire carries it; once the held run ends, the
// same run completes, so no frontend leaves a run counted after its end.
func TestKeyMaxRunsEveryFrontend(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a"), MaxRuns: 1}}
	inst := bridgetest.Start(t, &cfg)
	for _, p := range frontendProtocols {
		t.Run(p, func(t *testing.T) {
			release := holdRun(t, inst.URL, "key-a")
			want := refusedAs(p, canonical.CodeResourceExhausted)
			if text, err := keyedRun(t, inst.URL, p, "key-a", "echo"); codeOf(err) != want || text != "" {
				t.Errorf("a second run: %q, %v (code %s), want %s", text, err, codeOf(err), want)
			}
			release()
			deadline := time.Now().Add(10 * time.Second)
			for {
				text, err := keyedRun(t, inst.URL, p, "key-a", "echo")
				if err == nil && text == "secret words" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the held run ended: %q, %v", text, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// holdRun starts a native run of the stream target that hangs after its
// first event, reads that event, and returns what ends it.
func holdRun(t *testing.T, base, key string) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/runs", strings.NewReader(`{"target":"stream","parameters":{"hang":true}}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); resp.StatusCode != http.StatusOK || err != nil {
		cancel()
		t.Fatalf("the held run: HTTP %d, %v", resp.StatusCode, err)
	}
	return func() {
		cancel()
		resp.Body.Close()
	}
}
