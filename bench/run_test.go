package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/interlingua-dev/interlingua/bench/load"
)

// TestRunPairs drives a small load through every kind of pair and checks
// that each client counted exactly the deltas the upstream sent, that
// both paths exist where they should, and the JSON shape scripts rely on.
func TestRunPairs(t *testing.T) {
	pairs := []struct {
		fe, be string
		direct bool
	}{
		{"triton", "triton", true},
		{"evergreen", "evergreen", true},
		{"glide", "glide", true},
		{"triton", "scripted", false},
		{"agent", "agent", true},
		{"triton", "agent", false},
		{"glide", "scripted", false},
		{"xml", "scripted", false},
		{"native", "scripted", false},
		{"agent", "scripted", false},
		{"evergreen", "scripted", false},
		{"triton", "xml", false},
		{"glide", "triton", false},
		{"triton", "glide", false},
		{"evergreen", "triton", false},
		{"agent", "triton", false},
		{"anthropic", "anthropic", true},
		{"anthropic", "scripted", false},
		{"triton", "anthropic", false},
		{"openai", "openai", true},
		{"responses", "responses", true},
		{"openai", "triton", false},
		{"triton", "openai", false},
	}
	if testing.Short() {
		pairs = pairs[:5]
	}
	for _, p := range pairs {
		t.Run(p.fe+":"+p.be, func(t *testing.T) {
			const streams, deltas, rounds = 3, 25, 2
			r, err := Run(context.Background(), Options{Frontend: p.fe, Backend: p.be, Streams: streams, Deltas: deltas, Rounds: rounds, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			sides := map[string]*Side{"bridged": r.Bridged}
			if p.direct {
				if r.Direct == nil || r.ThroughputRatio == nil || r.AddedDeltaP99us == nil {
					t.Fatalf("direct path missing: %+v", r)
				}
				sides["direct"] = r.Direct
			} else if r.Direct != nil || r.ThroughputRatio != nil {
				t.Fatalf("unexpected direct path: %+v", r.Direct)
			}
			for name, s := range sides {
				if s.Errors != 0 {
					t.Errorf("%s: %d errors, first: %s", name, s.Errors, s.FirstError)
				}
				if want := int64(streams * deltas * rounds); s.Deltas != want {
					t.Errorf("%s: %d deltas received, want %d", name, s.Deltas, want)
				}
				if s.DeltasPerSec <= 0 || s.TTFDP50us <= 0 || s.RSSBytes <= 0 || s.CPUSecPerMDelta <= 0 {
					t.Errorf("%s: figures missing: %+v", name, s)
				}
			}
			checkJSON(t, r)
			var md bytes.Buffer
			WriteMarkdown(&md, r)
			if !strings.Contains(md.String(), "| deltas/s |") {
				t.Errorf("markdown lacks the throughput row:\n%s", md.String())
			}
		})
	}
}

// checkJSON checks the keys `interlingua bench --json` promises.
func checkJSON(t *testing.T, r *Result) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"pair", "streams", "deltas", "direct", "bridged", "throughput_ratio", "added_delta_p50_us", "added_delta_p99_us"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	for _, side := range []string{"direct", "bridged"} {
		s, ok := m[side].(map[string]any)
		if !ok {
			if r.Direct == nil && side == "direct" && m[side] == nil {
				continue
			}
			t.Errorf("%s is %v", side, m[side])
			continue
		}
		for _, k := range []string{"deltas_per_sec", "ttfd_p50_us", "ttfd_p99_us", "delta_p50_us", "delta_p99_us", "rss_bytes"} {
			if _, ok := s[k]; !ok {
				t.Errorf("%s lacks %q", side, k)
			}
		}
	}
}

func TestRunRefusesUnknownProtocols(t *testing.T) {
	for _, o := range []Options{{Frontend: "soap", Backend: "scripted"}, {Frontend: "triton", Backend: "soap"},
		{Frontend: "glide", Backend: "scripted", Rate: 100}} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%s:%s rate %v: no error", o.Frontend, o.Backend, o.Rate)
		}
	}
}

// TestSpreadStarts: with Spread the streams of a paced pair start over
// that time, every delta arrives on both paths, and the result and its
// table say so.
func TestSpreadStarts(t *testing.T) {
	r, err := Run(context.Background(), Options{Frontend: "triton", Backend: "triton", Streams: 4, Deltas: 3, Rate: 400, Spread: 20 * time.Millisecond, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.SpreadMS != 20 || r.Direct == nil || r.Direct.Errors != 0 || r.Bridged.Errors != 0 || r.Direct.Deltas != 12 || r.Bridged.Deltas != 12 {
		t.Fatalf("spread %v ms; direct %+v; bridged %+v", r.SpreadMS, r.Direct, r.Bridged)
	}
	var b bytes.Buffer
	WriteMarkdown(&b, r)
	if !strings.HasPrefix(b.String(), "### triton:triton: 4 streams × 3 deltas, paced at 400 deltas/s in total, starts spread over 20 ms\n") {
		t.Fatalf("table heading: %.120q", b.String())
	}
}

// The CPU profile and the execution trace are of a bridged round of its
// own: the measured rounds' figures count their deltas only, and both
// files are written.
func TestCPUProfileRoundIsNotMeasured(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	tr := filepath.Join(t.TempDir(), "trace.out")
	r, err := Run(context.Background(), Options{Frontend: "triton", Backend: "triton", Streams: 2, Deltas: 20, Rounds: 2, CPUProfile: prof, Trace: tr})
	if err != nil {
		t.Fatal(err)
	}
	if r.Direct == nil || r.Direct.Deltas != 80 || r.Bridged.Deltas != 80 || r.Bridged.Errors != 0 {
		t.Fatalf("direct %+v; bridged %+v; want 80 deltas each (2 rounds of 2 x 20)", r.Direct, r.Bridged)
	}
	data, err := os.ReadFile(prof)
	if err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b { // pprof's gzip
		t.Fatalf("profile: %d bytes, %v", len(data), err)
	}
	if data, err = os.ReadFile(tr); err != nil || !bytes.HasPrefix(data, []byte("go 1.")) || !bytes.Contains(data[:16], []byte(" trace")) { // runtime/trace's header
		t.Fatalf("trace: %d bytes (%.16q), %v", len(data), data, err)
	}
}

func TestPacedScriptedRoundsToMilliseconds(t *testing.T) {
	r, err := Run(context.Background(), Options{Frontend: "triton", Backend: "scripted", Streams: 2, Deltas: 5, Rate: 3000, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Bridged.Errors != 0 || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "whole milliseconds") {
		t.Fatalf("errors %d, notes %q", r.Bridged.Errors, r.Notes)
	}
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and two instances")
	}
	r, err := Cluster(context.Background(), ClusterOptions{Streams: 2, Deltas: 200, PacedStreams: 2, PacedDeltas: 20, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*ClusterSide{"same": r.SameInstance, "across": r.AcrossNATS} {
		if s.Errors != 0 || s.EventsPerSec <= 0 || s.P99us <= 0 {
			t.Errorf("%s: %+v", name, s)
		}
	}
	if n := r.NATSAlone; n == nil || n.P50us <= 0 || n.P99us < n.P50us || n.EventsPerSec <= 0 {
		t.Errorf("nats alone: %+v", n)
	}
	// Instance A's messages, measured: at least one event each, and more
	// than the protobuf of a bare event.
	if r.MessageBytes < 20 || r.EventsPerMessage < 1 || r.AloneRatio == nil {
		t.Errorf("messages %v B, %v events each, ratio %v", r.MessageBytes, r.EventsPerMessage, r.AloneRatio)
	}
	var md bytes.Buffer
	WriteClusterMarkdown(&md, r)
	if !strings.Contains(md.String(), "A→B over NATS") || !strings.Contains(md.String(), "through NATS alone") {
		t.Error(md.String())
	}
}

// The NATS-alone load delivers every message of every stream, each
// latency measured from its own publish.
func TestNATSAloneRound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t0 := time.Now()
	lat, err := natsAloneRound(context.Background(), ns.ClientURL(), 3, 40)
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != 3*40 {
		t.Fatalf("%d latencies, want 120", len(lat))
	}
	for _, l := range lat {
		if l <= 0 || l > int64(time.Since(t0)) {
			t.Fatalf("latency %v: not from its own publish", time.Duration(l))
		}
	}
	// Saturated: every message of every subject arrives.
	wall, err := natsAloneSaturated(context.Background(), ns.ClientURL(), 3, 5000, 300)
	if err != nil || wall <= 0 {
		t.Fatalf("saturated: %v, %v", wall, err)
	}
}

func TestPercentile(t *testing.T) {
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(i + 1)
	}
	for _, c := range []struct{ p, want int }{{50, 51}, {99, 100}, {0, 1}, {100, 100}} {
		if got := percentile(v, c.p); got != int64(c.want) {
			t.Errorf("p%d = %d, want %d", c.p, got, c.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty")
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
pkg: github.com/interlingua-dev/interlingua/adapters/triton
BenchmarkEncodeDelta-2       	 1000000	       254.8 ns/op	       0 B/op	       0 allocs/op
BenchmarkDecodeDelta-2       	  103441	      2380 ns/op	     352 B/op	       5 allocs/op
pkg: github.com/interlingua-dev/interlingua/adapters/xmlaction
BenchmarkDecode/mixed/chunk=4-2 	      22	  52857712 ns/op	  19.87 MB/s	      201.3 ns/token	67890636 B/op	  530770 allocs/op
BenchmarkEncodeTextDelta-2 	 5000000	       230.1 ns/op	       0 B/op	       0 allocs/op
PASS
`
	got := parseBench([]byte(out))
	if len(got) != 4 {
		t.Fatalf("%d lines: %+v", len(got), got)
	}
	if g := got[1]; g.pkg != "adapters/triton" || g.name != "BenchmarkDecodeDelta" || g.nsOp != 2380 || g.allocs != 5 || !g.hasMem {
		t.Errorf("%+v", g)
	}
	if g := got[2]; g.name != "BenchmarkDecode/mixed/chunk=4" || len(g.extra) != 2 {
		t.Errorf("%+v", g)
	}
}

// TestAwaitUpstream: the streams that finished, before or during the wait,
// are reported finished and the others not; and the wait is one deadline
// for all, not one per stream (300 streams that never finish take 2 s,
// where a deadline each would take 10 minutes, past go test's timeout).
func TestAwaitUpstream(t *testing.T) {
	const never = 300
	open := func() *load.Stamps { return load.NewStamps(0) }
	early, late := open(), open()
	early.Finish()
	sts := []*load.Stamps{early, nil, late}
	for range never {
		sts = append(sts, open())
	}
	go func() {
		time.Sleep(time.Millisecond)
		late.Finish()
	}()
	got := awaitUpstream(sts, 2*time.Second)
	want := make([]bool, len(sts))
	want[0], want[2] = true, true
	if !slices.Equal(got, want) {
		t.Fatalf("finished: first three %v, %d of %d others; want %v and none", got[:3], count(got[3:]), never, want[:3])
	}
}

func count(bs []bool) (n int) {
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
