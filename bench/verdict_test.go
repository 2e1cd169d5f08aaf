package bench

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/protocols"
)

// ratioRun is a synthetic same-protocol run: the hop's and the bridge's
// deltas/s and CPU s per million deltas, and the bridge's errors.
func ratioRun(hop, bridged, hopCPU, bridgedCPU float64, errs int) run {
	return run{res: &Result{
		Proxy:   &Side{DeltasPerSec: hop, CPUSecPerMDelta: hopCPU},
		Bridged: &Side{DeltasPerSec: bridged, CPUSecPerMDelta: bridgedCPU, Errors: errs},
	}}
}

// TestRatioTable: each column is the median of the runs (the ratios the
// medians of each run's ratios, not ratios of medians), and the verdict
// names every target missed.
func TestRatioTable(t *testing.T) {
	rows := []ratioRow{
		// ratios 0.95, 0.90, 0.80 → 0.90; CPU 1.10, 1.20, 1.50 → 1.20
		ratioRowOf("triton:triton", []run{ratioRun(100_000, 95_000, 2, 2.2, 0), ratioRun(200_000, 180_000, 2, 2.4, 0), ratioRun(150_000, 120_000, 2, 3, 0)}),
		// ratios 0.38, 0.40, 0.36; CPU 2.5 each; one bridged error
		ratioRowOf("glide:glide", []run{ratioRun(100_000, 38_000, 4, 10, 0), ratioRun(100_000, 40_000, 4, 10, 1), ratioRun(100_000, 36_000, 4, 10, 0)}),
		// even count: means of the middle two
		ratioRowOf("agent:agent", []run{ratioRun(100_000, 95_000, 2, 2, 0), ratioRun(100_000, 91_000, 2, 2, 0), {err: errors.New("round 1: timeout")}, ratioRun(100_000, 93_000, 2, 2, 0), ratioRun(100_000, 99_000, 2, 2, 0)}),
		ratioRowOf("openai:openai", []run{{err: errors.New("upstream: refused")}}),
	}
	var b bytes.Buffer
	writeRatioTable(&b, rows, 5, "load average 1.00 to 2.00")
	want := `| pair | hop (deltas/s) | bridged (deltas/s) | throughput ratio | CPU ratio | verdict |
|---|---:|---:|---:|---:|---|
| triton:triton | 150,000 | 120,000 | 0.90 | 1.20 | met |
| glide:glide | 100,000 | 38,000 | 0.38 | 2.50 | **MISSED**: throughput 0.38 < 0.9; CPU 2.50 > 1.5; 1 errors |
| agent:agent | 100,000 | 94,000 | 0.94 | 1.00 | **MISSED**: 1 of 5 runs failed (failed: round 1: timeout) |
| openai:openai | – | – | – | – | not measured: failed: upstream: refused |
`
	got := b.String()
	if i := strings.Index(got, "| pair |"); i < 0 || got[i:] != want+"\n" {
		t.Fatalf("ratio table:\n%s\nwant:\n%s", got, want)
	}
	if !strings.HasPrefix(got, "## Same-protocol pairs against a hop that does nothing\n\n") || !strings.Contains(got, "median of 5 interleaved runs (load average 1.00 to 2.00)") {
		t.Fatalf("heading or text:\n%s", got)
	}
}

// TestCrossMatrix: a pair is judged against twice the cheaper hop of its
// two sides, the side without a hop of its own taking the other's; the
// diagonal is the same-protocol bridged figure, unjudged.
func TestCrossMatrix(t *testing.T) {
	bridged := func(cpus ...float64) []run {
		var out []run
		for _, c := range cpus {
			out = append(out, run{res: &Result{Bridged: &Side{CPUSecPerMDelta: c}}})
		}
		return out
	}
	m := &crossMatrix{
		frontends: []string{"triton", "glide", "xml"},
		backends:  []string{"triton", "glide"},
		hops: map[string]ratioRow{
			"triton": ratioRowOf("triton:triton", []run{ratioRun(1, 1, 2, 2.5, 0)}),
			"glide":  ratioRowOf("glide:glide", []run{ratioRun(1, 1, 3, 7.5, 0)}),
		},
		cells: map[[2]string]crossCell{
			{"triton", "glide"}: crossCellOf(bridged(5, 7, 6)),  // 6 > 2×2
			{"glide", "triton"}: crossCellOf(bridged(3.9, 3.1)), // 3.5 ≤ 4
			{"xml", "triton"}:   crossCellOf(bridged(4.5)),      // 4.5 > 4
			{"xml", "glide"}:    crossCellOf([]run{{err: errors.New("boom")}}),
		},
	}
	var b bytes.Buffer
	writeCrossMatrix(&b, m, 3)
	want := `| frontend \ backend | hop | triton | glide |
|---|---:|---:|---:|
| **hop** | | 2.00 | 3.00 |
| triton | 2.00 | *2.50* | **6.00** |
| glide | 3.00 | 3.50 | *7.50* |
| xml | – | **4.50** | failed |

Verdict: 1 of 4 cross-protocol pairs met the target. **MISSED**: triton:glide 6.00 > 4.00; xml:triton 4.50 > 4.00; xml:glide failed (failed: boom).

`
	got := b.String()
	if i := strings.Index(got, "| frontend"); i < 0 || got[i:] != want {
		t.Fatalf("cross matrix:\n%s\nwant:\n%s", got, want)
	}
}

// TestPacedTable: the ratio is of the medians; a hop that added nothing
// leaves the pair unjudged.
func TestPacedTable(t *testing.T) {
	paced := func(hop, bridged float64, errs int) run {
		return run{res: &Result{AddedDeltaP99us: &bridged, ProxyAddedDeltaP99us: &hop,
			Direct: &Side{}, Proxy: &Side{}, Bridged: &Side{Errors: errs}}}
	}
	rows := []pacedRow{
		pacedRowOf("triton:triton", []run{paced(800, 1000, 0), paced(900, 1300, 0), paced(700, 1100, 0)}),
		pacedRowOf("glide:glide", []run{paced(400, 700, 0), paced(400, 500, 2), paced(400, 600, 0)}),
		pacedRowOf("agent:agent", []run{paced(-20, 2000, 0)}),
	}
	var b bytes.Buffer
	writePacedTable(&b, rows, 3)
	want := `| pair | hop added p99 (µs) | bridged added p99 (µs) | ratio | verdict |
|---|---:|---:|---:|---|
| triton:triton | 800 | 1100 | 1.38 | met |
| glide:glide | 400 | 600 | 1.50 | **MISSED**: 2 errors |
| agent:agent | -20 | 2000 | – | not judged: the hop added -20 µs (no ratio to a hop that adds nothing) |

`
	got := b.String()
	if i := strings.Index(got, "| pair |"); i < 0 || got[i:] != want {
		t.Fatalf("paced table:\n%s\nwant:\n%s", got, want)
	}
}

// TestIdleAndClusterVerdicts: memory per idle connection against 16 KiB;
// events/s from another instance against NATS alone's, same messages.
func TestIdleAndClusterVerdicts(t *testing.T) {
	var b bytes.Buffer
	writeIdleVerdict(&b, &IdleResult{Conns: 10_000, PerConnBytes: 28 << 10, Failed: 3,
		Idle: []IdleConns{{Protocol: "triton", Conns: 5000}, {Protocol: "glide", Conns: 5000}, {Protocol: "evergreen"}}}, nil)
	writeClusterVerdict(&b, &ClusterResult{MessageBytes: 412, EventsPerMessage: 3.5,
		AcrossNATS: &ClusterSide{EventsPerSec: 950_000}, NATSAlone: &ClusterSide{EventsPerSec: 1_000_000}}, nil)
	writeClusterVerdict(&b, nil, errors.New("nats-server not ready"))
	got := b.String()
	for _, want := range []string{
		"| 10,000 (5,000 triton, 5,000 glide) | 28.0 | **MISSED**: 28.0 KiB > 16 KiB; 3 failed to open |\n",
		"| 412 B each, 3.5 events per message | 1,000,000 | 950,000 | 0.95 | met |\n",
		"| – | – | – | – | not measured: failed: nats-server not ready |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	runs := []run{{err: errors.New("x")}, ratioRun(1, 3, 1, 1, 0), ratioRun(1, 1, 1, 1, 0), ratioRun(1, 2, 1, 1, 0)}
	if i := medianRun(runs, func(r *Result) float64 { return r.Bridged.DeltasPerSec }); i != 3 {
		t.Errorf("medianRun = %d, want 3 (the run with the middle figure)", i)
	}
}

// TestReportMatrixCoversEveryPair: the report measures, interleaved,
// every protocol with a frontend, a backend and a reference upstream
// against the no-op hop (unpaced and paced), and every frontend to every
// such backend of another protocol.
func TestReportMatrixCoversEveryPair(t *testing.T) {
	m := newMatrix(true)
	want := 0
	for i := range protocols.All {
		if p := &protocols.All[i]; isFrontend(p) && hasPeer(p) {
			want++
			for _, s := range []*scenario{m.ratio[p.Name], m.paced[p.Name]} {
				if s == nil || !s.repeat || !s.opts.Proxy || s.opts.Frontend != p.Name || s.opts.Backend != p.Name {
					t.Errorf("%s: same-protocol scenario %+v, want repeated with the proxy", p.Name, s)
				}
			}
		}
	}
	if len(matrixPeers) != want {
		t.Errorf("matrixPeers %v, want the %d protocols with a frontend, backend and upstream", matrixPeers, want)
	}
	for _, fe := range Frontends {
		for _, be := range peerBackends() {
			s, ok := m.cross[[2]string{fe, be}]
			if fe == be {
				if ok {
					t.Errorf("%s:%s measured as cross-protocol", fe, be)
				}
				continue
			}
			if !ok || !s.repeat || s.opts.Streams != 16 {
				t.Errorf("%s:%s: cross scenario %+v", fe, be, s)
			}
		}
	}
}
