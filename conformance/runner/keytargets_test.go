package runner

import (
	"context"
	"errors"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// TestKeyTargetsEveryFrontend: a key limited to some targets reaches only
// those, through every frontend, whatever the frontend does with its
// connection (a request, a session, a WebSocket that outlives its upgrade,
// a thread). Each protocol's own client (the conformance runner's, sending
// the key as Authorization: Bearer) runs the allowed target to its end and is
// refused the other with permission_denied, before or as the run's end,
// without a word of its answer. The Glide frontend let such a key run every
// target: its runs carried no key.
func TestKeyTargetsEveryFrontend(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a"), Targets: []string{"echo"}}}
	inst := bridgetest.Start(t, &cfg)
	c := &cases.Case{Case: &cv1.Case{Name: "key-targets"}, Folder: cases.Common}
	for _, p := range frontendProtocols {
		t.Run(p, func(t *testing.T) {
			run := func(target string) (text string, err error) {
				cl, err := newClient(p, clientOptions{base: inst.URL, target: target, headers: http.Header{"Authorization": {"Bearer key-a"}}})
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
			if text, err := run("echo"); err != nil || text != "secret words" {
				t.Errorf("echo, allowed: %q, %v", text, err)
			}
			// permission_denied as the wire carries it (its profile), or
			// not_found where the wire hides what the key may not see
			// (OpenAI: "does not exist or you do not have access to it").
			want := profiles[p].Front(&cv1.Transcript{Status: transcript.Refused, Code: canonical.CodePermissionDenied.String()}, c).GetCode()
			text, err := run("stream")
			code := "none"
			if err != nil {
				code = canonical.AsError(err).Code.String()
			}
			if (code != want && code != canonical.CodeNotFound.String()) || text != "" {
				t.Errorf("stream, not allowed: %q, %v (code %s), want %s and nothing", text, err, code, want)
			}
		})
	}
}
