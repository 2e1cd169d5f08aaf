package xmlaction_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/adapters/xmlaction"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/internal/chunk"
)

// stream is what the XML frontend writes for a run with reasoning, a tool
// call, its result, a failed call, an error event, text and a failure.
const stream = `<thought>hmm &lt;ok&gt;</thought>
<action type="tool" mode="sync" id="c1">{"name":"calc","parameters":{"x":1}}</action>
<observation id="c1" status="ok">{"v":"a&lt;b"}</observation>
<observation id="c2" status="error" code="unavailable">down</observation>
<error code="aborted">fallback</error>
<response>done &amp; dusted</response>
<error code="data_loss" status="failed">broke</error>
`

var want = &cv1.Transcript{
	Blocks: []*cv1.Block{
		{Type: transcript.Reasoning, Text: "hmm <ok>"},
		{Type: transcript.ToolCall, Id: "c1", Name: "calc", Mime: "application/json", Text: `{"name":"calc","parameters":{"x":1}}`},
		{Type: transcript.Error, Text: "aborted"},
		{Type: transcript.Text, Text: "done & dusted"},
	},
	Tools:  []*cv1.Tool{{Event: "finished", Id: "c1", Value: `{"v":"a<b"}`}, {Event: "failed", Id: "c2", Value: "unavailable"}},
	Status: transcript.Failed, Code: "data_loss",
}

// The elements are split out and the rest decoded the same however the
// body is cut.
func TestElementsAnyChunking(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		pieces := chunk.Split([]byte(stream), seed, 1+int(seed%17))
		if seed == 39 {
			pieces = chunk.Bytes([]byte(stream))
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			for _, p := range pieces {
				_, _ = w.Write(p)
				_ = rc.Flush()
			}
		}))
		c := xmlaction.NewClient(srv.URL, srv.Client())
		s, err := c.Start(context.Background(), &canonical.Request{Target: "x"})
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		evs, err := canonical.Collect(s)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := canonical.Validate(evs); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		got := transcript.Normalize(transcript.FromEvents(evs))
		if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
			t.Fatalf("seed %d (%d pieces): %s", seed, len(pieces), d)
		}
	}
}

func TestRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		_, _ = w.Write([]byte(`<error code="not_found">unknown target "x"</error>` + "\n"))
	}))
	defer srv.Close()
	_, err := xmlaction.NewClient(srv.URL, srv.Client()).Start(context.Background(), &canonical.Request{Target: "x"})
	if canonical.CodeOf(err) != canonical.CodeNotFound {
		t.Fatalf("got %v, want not_found", err)
	}
}

func BenchmarkStream(b *testing.B) {
	body := []byte(strings.Repeat("<response>"+strings.Repeat("tok ", 64)+"</response>\n", 16) + stream)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	defer srv.Close()
	c := xmlaction.NewClient(srv.URL, srv.Client())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := c.Start(context.Background(), &canonical.Request{Target: "x"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := canonical.Collect(s); err != nil {
			b.Fatal(err)
		}
	}
}
