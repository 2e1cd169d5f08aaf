package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// The report's verdicts: every target is a ratio to a hop that does
// nothing, measured in the same run (issue 37), except the idle
// connections' memory. Each figure is the median of the report's
// interleaved runs (Rounds): one run's ratio swings by ±0.15 on a shared
// machine.

// Targets of the verdict tables.
const (
	minThroughputRatio = 0.9 // bridged deltas/s ÷ the hop's, same-protocol pairs
	maxCPURatio        = 1.5 // bridged CPU per delta ÷ the hop's, same-protocol pairs
	maxCrossCPU        = 2.0 // cross pair's CPU per delta ÷ the cheaper hop of its sides
	maxPacedP99Ratio   = 1.5 // bridged added p99 ÷ the hop's added p99
	maxIdleConnBytes   = 16 << 10
	minClusterRatio    = 0.9 // events/s from another instance ÷ NATS alone's
)

// run is one measurement of a load: its result, or why there is none.
type run struct {
	res *Result
	err error
}

// median is the middle of xs (the mean of the two middle ones for an even
// count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// medianRun is the index of the run whose key is the median (the lower
// one of an even count) among the runs with a result; -1 for none.
func medianRun(runs []run, key func(*Result) float64) int {
	var idx []int
	for i, r := range runs {
		if r.res != nil {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return -1
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ka, kb := key(runs[a].res), key(runs[b].res)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return idx[(len(idx)-1)/2]
}

// firstErr is the first failed run's error text, and how many failed.
func firstErr(runs []run) (string, int) {
	text, n := "", 0
	for _, r := range runs {
		if r.res == nil {
			n++
			if text == "" {
				text = errText(r.err)
			}
		}
	}
	return text, n
}

// verdict is "met", or "**MISSED**: " and the reasons.
func verdict(misses []string) string {
	if len(misses) == 0 {
		return "met"
	}
	return "**MISSED**: " + strings.Join(misses, "; ")
}

// ratioRow is a same-protocol pair's line of the ratio table.
type ratioRow struct {
	pair         string
	measured     int // runs with a result
	failed       int
	firstErr     string
	hop, bridged float64 // median deltas/s
	ratio, cpu   float64 // medians of each run's ratios
	hopCPU       float64 // median CPU s per million deltas of the hop
	bridgedCPU   float64
	errors       int // failed or short streams, bridged and hop, all runs
}

// ratioRowOf summarizes the interleaved runs of a pair measured with the
// no-op proxy (Options.Proxy).
func ratioRowOf(pair string, runs []run) ratioRow {
	row := ratioRow{pair: pair}
	row.firstErr, row.failed = firstErr(runs)
	var hop, br, ratio, cpu, hopCPU, brCPU []float64
	for _, r := range runs {
		if r.res == nil {
			continue
		}
		p, b := r.res.Proxy, r.res.Bridged
		if p == nil || p.DeltasPerSec == 0 || p.CPUSecPerMDelta == 0 {
			row.failed++
			if row.firstErr == "" {
				row.firstErr = "no hop figures (the no-op proxy path did not run)"
			}
			continue
		}
		row.measured++
		row.errors += b.Errors + p.Errors
		hop, br = append(hop, p.DeltasPerSec), append(br, b.DeltasPerSec)
		ratio, cpu = append(ratio, b.DeltasPerSec/p.DeltasPerSec), append(cpu, b.CPUSecPerMDelta/p.CPUSecPerMDelta)
		hopCPU, brCPU = append(hopCPU, p.CPUSecPerMDelta), append(brCPU, b.CPUSecPerMDelta)
	}
	row.hop, row.bridged, row.ratio, row.cpu = median(hop), median(br), median(ratio), median(cpu)
	row.hopCPU, row.bridgedCPU = median(hopCPU), median(brCPU)
	return row
}

func (r ratioRow) verdict() string {
	if r.measured == 0 {
		return "not measured: " + r.firstErr
	}
	var misses []string
	if r.ratio < minThroughputRatio {
		misses = append(misses, fmt.Sprintf("throughput %.2f < %.1f", r.ratio, minThroughputRatio))
	}
	if r.cpu > maxCPURatio {
		misses = append(misses, fmt.Sprintf("CPU %.2f > %.1f", r.cpu, maxCPURatio))
	}
	if r.errors > 0 {
		misses = append(misses, fmt.Sprintf("%d errors", r.errors))
	}
	if r.failed > 0 {
		misses = append(misses, fmt.Sprintf("%d of %d runs failed (%s)", r.failed, r.failed+r.measured, r.firstErr))
	}
	return verdict(misses)
}

// writeRatioTable writes the report's lead table.
func writeRatioTable(w io.Writer, rows []ratioRow, rounds int, load string) {
	fmt.Fprintln(w, "## Same-protocol pairs against a hop that does nothing")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Each pair's client calls its reference peer through the bridge (\"bridged\") and, in the same alternation, through a reverse proxy that translates nothing (\"hop\"; see Load below). Unpaced, 16 streams. Each figure is %s (%s). Throughput ratio: bridged deltas/s ÷ the hop's; CPU ratio: bridged CPU per delta ÷ the hop's (process-wide: clients, peer and hop or instance); each ratio is the median of the runs' own ratios, so it need not be the quotient of the two columns. Targets: throughput ≥ %.1f, CPU ≤ %.1f, no errors.\n\n", medianOf(rounds), load, minThroughputRatio, maxCPURatio)
	fmt.Fprintln(w, "| pair | hop (deltas/s) | bridged (deltas/s) | throughput ratio | CPU ratio | verdict |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|")
	for _, r := range rows {
		if r.measured == 0 {
			fmt.Fprintf(w, "| %s | – | – | – | – | %s |\n", r.pair, r.verdict())
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.2f | %.2f | %s |\n", r.pair, num(r.hop), num(r.bridged), r.ratio, r.cpu, r.verdict())
	}
	fmt.Fprintln(w)
}

// crossCell is one frontend×backend pair's median CPU per delta, bridged.
type crossCell struct {
	cpu      float64 // CPU s per million deltas, median
	measured int
	failed   int
	firstErr string
	errors   int
}

func crossCellOf(runs []run) crossCell {
	var c crossCell
	c.firstErr, c.failed = firstErr(runs)
	var cpu []float64
	for _, r := range runs {
		if r.res != nil {
			c.measured++
			c.errors += r.res.Bridged.Errors
			cpu = append(cpu, r.res.Bridged.CPUSecPerMDelta)
		}
	}
	c.cpu = median(cpu)
	return c
}

// crossMatrix is every frontend×backend pair's CPU per delta, judged
// against the cheaper same-protocol hop of its two sides.
type crossMatrix struct {
	frontends, backends []string
	cells               map[[2]string]crossCell // off the diagonal
	hops                map[string]ratioRow     // same-protocol rows, by protocol
}

// limit is 2× the cheaper measured hop of fe and be; 0 when neither side
// has one.
func (m *crossMatrix) limit(fe, be string) float64 {
	best := 0.0
	for _, p := range []string{fe, be} {
		if h, ok := m.hops[p]; ok && h.measured > 0 && (best == 0 || h.hopCPU < best) {
			best = h.hopCPU
		}
	}
	return maxCrossCPU * best
}

// cell is a pair's text and, when it missed, why.
func (m *crossMatrix) cell(fe, be string) (text, miss string) {
	if fe == be {
		if h, ok := m.hops[fe]; ok && h.measured > 0 {
			return "*" + trim2(h.bridgedCPU) + "*", ""
		}
		return "–", ""
	}
	c, ok := m.cells[[2]string{fe, be}]
	switch {
	case !ok:
		return "–", ""
	case c.measured == 0:
		return "failed", fmt.Sprintf("%s:%s failed (%s)", fe, be, c.firstErr)
	}
	lim := m.limit(fe, be)
	text = trim2(c.cpu)
	var why []string
	if lim > 0 && c.cpu > lim {
		why = append(why, fmt.Sprintf("%s > %s", trim2(c.cpu), trim2(lim)))
	}
	if c.errors > 0 {
		why = append(why, fmt.Sprintf("%d errors", c.errors))
	}
	if c.failed > 0 {
		why = append(why, fmt.Sprintf("%d of %d runs failed", c.failed, c.failed+c.measured))
	}
	if lim == 0 {
		return text + " (no hop)", ""
	}
	if len(why) > 0 {
		return "**" + text + "**", fmt.Sprintf("%s:%s %s", fe, be, strings.Join(why, ", "))
	}
	return text, ""
}

// writeCrossMatrix writes the matrix and the list of the pairs that missed.
func writeCrossMatrix(w io.Writer, m *crossMatrix, rounds int) {
	fmt.Fprintln(w, "## Cross-protocol pairs: CPU per delta")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "CPU seconds per million deltas bridged (process-wide: client, instance and peer), frontend by row, backend by column, 16 streams unpaced, each %s. Target: at most %.0f× the cheaper same-protocol hop of the pair's two sides (the \"hop\" row and column: the do-nothing proxy's figure from the table above). The diagonal, in italics, is the same-protocol pairs' bridged figure, judged above. Missed cells are in bold.\n\n", medianOf(rounds), maxCrossCPU)
	fmt.Fprintf(w, "| frontend \\ backend | hop |")
	for _, be := range m.backends {
		fmt.Fprintf(w, " %s |", be)
	}
	fmt.Fprint(w, "\n|---|---:|")
	fmt.Fprint(w, strings.Repeat("---:|", len(m.backends)))
	fmt.Fprint(w, "\n| **hop** | |")
	for _, be := range m.backends {
		fmt.Fprintf(w, " %s |", m.hopText(be))
	}
	fmt.Fprintln(w)
	var misses []string
	pairs, met := 0, 0
	for _, fe := range m.frontends {
		fmt.Fprintf(w, "| %s | %s |", fe, m.hopText(fe))
		for _, be := range m.backends {
			text, miss := m.cell(fe, be)
			fmt.Fprintf(w, " %s |", text)
			if _, ok := m.cells[[2]string{fe, be}]; ok && fe != be {
				pairs++
				if miss == "" && !strings.HasSuffix(text, "(no hop)") {
					met++
				}
			}
			if miss != "" {
				misses = append(misses, miss)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nVerdict: %d of %d cross-protocol pairs met the target.", met, pairs)
	if len(misses) > 0 {
		fmt.Fprintf(w, " **MISSED**: %s.", strings.Join(misses, "; "))
	}
	fmt.Fprint(w, "\n\n")
}

func (m *crossMatrix) hopText(p string) string {
	if h, ok := m.hops[p]; ok && h.measured > 0 {
		return trim2(h.hopCPU)
	}
	return "–"
}

// pacedRow is a same-protocol pair's paced load: the added p99 per delta
// (over direct) of the bridge and of the hop, each a median of the runs.
type pacedRow struct {
	pair         string
	measured     int
	failed       int
	firstErr     string
	hop, bridged float64 // added p99 µs
	errors       int
}

func pacedRowOf(pair string, runs []run) pacedRow {
	row := pacedRow{pair: pair}
	row.firstErr, row.failed = firstErr(runs)
	var hop, br []float64
	for _, r := range runs {
		if r.res == nil {
			continue
		}
		if r.res.AddedDeltaP99us == nil || r.res.ProxyAddedDeltaP99us == nil {
			row.failed++
			if row.firstErr == "" {
				row.firstErr = "no direct or hop figures"
			}
			continue
		}
		row.measured++
		row.errors += r.res.Bridged.Errors + r.res.Proxy.Errors + r.res.Direct.Errors
		hop, br = append(hop, *r.res.ProxyAddedDeltaP99us), append(br, *r.res.AddedDeltaP99us)
	}
	row.hop, row.bridged = median(hop), median(br)
	return row
}

// ratio is bridged ÷ hop; ok false when the hop added nothing (≤ 0 µs).
func (r pacedRow) ratio() (float64, bool) {
	if r.hop <= 0 {
		return 0, false
	}
	return r.bridged / r.hop, true
}

func (r pacedRow) verdict() string {
	if r.measured == 0 {
		return "not measured: " + r.firstErr
	}
	var misses []string
	ratio, ok := r.ratio()
	if !ok {
		return fmt.Sprintf("not judged: the hop added %s µs (no ratio to a hop that adds nothing)", trim(r.hop))
	}
	if ratio > maxPacedP99Ratio {
		misses = append(misses, fmt.Sprintf("ratio %.2f > %.1f", ratio, maxPacedP99Ratio))
	}
	if r.errors > 0 {
		misses = append(misses, fmt.Sprintf("%d errors", r.errors))
	}
	if r.failed > 0 {
		misses = append(misses, fmt.Sprintf("%d of %d runs failed (%s)", r.failed, r.failed+r.measured, r.firstErr))
	}
	return verdict(misses)
}

func writePacedTable(w io.Writer, rows []pacedRow, rounds int) {
	fmt.Fprintln(w, "## Paced: added latency per delta against the hop's")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "10,000 deltas/s across 100 streams, same protocol on both sides. Added p99: the p99 of a delta's latency (peer's send stamp to the client's parse) on the path, minus direct's, in the same run; each %s, the ratio that of the two. Target: the bridge's added p99 ≤ %.1f× the hop's.\n\n", medianOf(rounds), maxPacedP99Ratio)
	fmt.Fprintln(w, "| pair | hop added p99 (µs) | bridged added p99 (µs) | ratio | verdict |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|")
	for _, r := range rows {
		if r.measured == 0 {
			fmt.Fprintf(w, "| %s | – | – | – | %s |\n", r.pair, r.verdict())
			continue
		}
		ratio := "–"
		if v, ok := r.ratio(); ok {
			ratio = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.pair, trim(r.hop), trim(r.bridged), ratio, r.verdict())
	}
	fmt.Fprintln(w)
}

// writeIdleVerdict writes the idle connections' line.
func writeIdleVerdict(w io.Writer, r *IdleResult, err error) {
	fmt.Fprintln(w, "## Idle: server memory per connection")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Idle streaming connections to one `interlingua serve` (details under Idle connections below). Target: ≤ %d KiB of server RSS each, none failing to open.\n\n", maxIdleConnBytes>>10)
	fmt.Fprintln(w, "| connections | RSS per connection (KiB) | verdict |")
	fmt.Fprintln(w, "|---|---:|---|")
	if r == nil {
		fmt.Fprintf(w, "| – | – | not measured: %s |\n\n", errText(err))
		return
	}
	var kinds []string
	for _, k := range r.Idle {
		if k.Conns == 0 {
			continue
		}
		kinds = append(kinds, fmt.Sprintf("%s %s", num(float64(k.Conns)), k.Protocol))
	}
	var misses []string
	if r.PerConnBytes > maxIdleConnBytes {
		misses = append(misses, fmt.Sprintf("%s KiB > %d KiB", kib(r.PerConnBytes), maxIdleConnBytes>>10))
	}
	if r.Failed > 0 {
		misses = append(misses, fmt.Sprintf("%d failed to open", r.Failed))
	}
	fmt.Fprintf(w, "| %s (%s) | %s | %s |\n\n", num(float64(r.Conns)), strings.Join(kinds, ", "), kib(r.PerConnBytes), verdict(misses))
}

// writeClusterVerdict writes the two instances' line.
func writeClusterVerdict(w io.Writer, r *ClusterResult, err error) {
	fmt.Fprintln(w, "## Two instances over NATS against NATS alone")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Events per second a client of instance B receives from runs hosted on instance A, against what NATS alone carries between two connections of the same server for the same messages (A's message size and events per message in the same run), alternating round by round (details under Two instances below). Target: ≥ %.1f.\n\n", minClusterRatio)
	fmt.Fprintln(w, "| messages | NATS alone (events/s) | from another instance (events/s) | ratio | verdict |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|")
	switch {
	case r == nil:
		fmt.Fprintf(w, "| – | – | – | – | not measured: %s |\n\n", errText(err))
		return
	case r.NATSAlone == nil || r.NATSAlone.EventsPerSec == 0:
		fmt.Fprintf(w, "| – | – | %s | – | not measured: no NATS-alone figure |\n\n", num(r.AcrossNATS.EventsPerSec))
		return
	}
	ratio := r.AcrossNATS.EventsPerSec / r.NATSAlone.EventsPerSec
	var misses []string
	if ratio < minClusterRatio {
		misses = append(misses, fmt.Sprintf("%.2f < %.1f", ratio, minClusterRatio))
	}
	if n := r.AcrossNATS.Errors + r.NATSAlone.Errors; n > 0 {
		misses = append(misses, fmt.Sprintf("%d errors", n))
	}
	fmt.Fprintf(w, "| %s B each, %.1f events per message | %s | %s | %.2f | %s |\n\n", num(r.MessageBytes), r.EventsPerMessage,
		num(r.NATSAlone.EventsPerSec), num(r.AcrossNATS.EventsPerSec), ratio, verdict(misses))
}

// trim2 is a CPU figure: two decimals under 10, else as trim.
func trim2(f float64) string {
	if f < 10 && f > -10 {
		return fmt.Sprintf("%.2f", f)
	}
	return trim(f)
}

// medianOf says what a verdict's figure is over n runs.
func medianOf(n int) string {
	if n == 1 {
		return "from a single run (no median: --rounds 3 or more for one)"
	}
	return fmt.Sprintf("the median of %d interleaved runs", n)
}
