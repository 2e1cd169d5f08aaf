package nativeclient_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
	nativeclient "github.com/interlingua-dev/interlingua/conformance/clients/native"
)

func TestRunAndReplay(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := nativeclient.New(inst.URL, &http.Client{Transport: tr})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Start(ctx, &canonical.Request{Target: "echo", ThreadId: "t-native-client",
		Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", "a b c")}}})
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
	var text strings.Builder
	for _, ev := range evs {
		text.WriteString(ev.GetBlockDelta().GetText())
	}
	if text.String() != "a b c" {
		t.Fatalf("text %q", text.String())
	}
	o, err := c.Observe(ctx, "t-native-client", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for i, want := range evs[2:] {
		ev, err := o.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetSeq() != want.GetSeq() {
			t.Fatalf("replayed event %d has seq %d, want %d", i, ev.GetSeq(), want.GetSeq())
		}
	}
}

func TestRefusal(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := nativeclient.New(inst.URL, &http.Client{Transport: tr})
	_, err := c.Start(context.Background(), &canonical.Request{Target: "no-such-target"})
	if canonical.CodeOf(err) != canonical.CodeNotFound || !strings.Contains(err.Error(), "no-such-target") {
		t.Fatalf("got %v, want not_found naming the target", err)
	}
}
