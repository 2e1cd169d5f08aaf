package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes a pair's result as a markdown table.
func WriteMarkdown(w io.Writer, r *Result) {
	spread := ""
	if r.SpreadMS > 0 {
		spread = fmt.Sprintf(", starts spread over %s ms", trim(r.SpreadMS))
	}
	fmt.Fprintf(w, "### %s: %d streams × %d deltas%s%s\n\n", r.Pair, r.Streams, r.Deltas, rateText(r.Rate), spread)
	if r.Direct == nil {
		fe, be, _ := strings.Cut(r.Pair, ":")
		if r.LatencyFrom == "upstream" {
			fmt.Fprintf(w, "No direct path (a %s client cannot call a %s peer); delta latency is from the peer's send stamp.\n\n", fe, be)
		} else {
			fmt.Fprintf(w, "No direct path (the %s backend runs inside the bridge); delta latency is the interval between deltas at the client.\n\n", be)
		}
		fmt.Fprintln(w, "| figure | bridged |")
		fmt.Fprintln(w, "|---|---:|")
		for _, row := range rows(r.Bridged, r.Bridged) {
			fmt.Fprintf(w, "| %s | %s |\n", row[0], row[2])
		}
	} else if r.Proxy != nil {
		fmt.Fprintln(w, "| figure | direct | no-op proxy | bridged | proxy vs direct | bridged vs direct |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		prows, brows := rows(r.Direct, r.Proxy), rows(r.Direct, r.Bridged)
		for i, row := range brows {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", row[0], row[1], prows[i][2], row[2], prows[i][3], row[3])
		}
	} else {
		fmt.Fprintln(w, "| figure | direct | bridged | bridged vs direct |")
		fmt.Fprintln(w, "|---|---:|---:|---:|")
		for _, row := range rows(r.Direct, r.Bridged) {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row[0], row[1], row[2], row[3])
		}
	}
	fmt.Fprintf(w, "\n%d measured rounds per path (alternating), GOMAXPROCS %d, load average %.2f before, %.2f after.\n",
		r.Rounds, r.Procs, r.LoadBefore[0], r.LoadAfter[0])
	if r.FabricDropped > 0 {
		fmt.Fprintf(w, "The instance could not publish %s of its events to NATS (publish queue full; %s published): observers and the replay log miss them, the clients do not.\n", num(float64(r.FabricDropped)), num(float64(r.FabricPublished)))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s.\n", n)
	}
	for _, s := range []struct {
		name string
		side *Side
	}{{"direct", r.Direct}, {"proxy", r.Proxy}, {"bridged", r.Bridged}} {
		if s.side != nil && s.side.FirstError != "" {
			fmt.Fprintf(w, "First %s error: %s\n", s.name, s.side.FirstError)
		}
	}
	fmt.Fprintln(w)
}

func rateText(rate float64) string {
	if rate <= 0 {
		return ", unpaced"
	}
	return fmt.Sprintf(", paced at %s deltas/s in total", num(rate))
}

// rows are figure, direct, bridged, comparison.
func rows(d, b *Side) [][4]string {
	diff := func(x, y float64, unit string) string { return signed(y-x) + unit }
	ratio := func(x, y float64) string {
		if x == 0 {
			return "–"
		}
		return fmt.Sprintf("×%.2f", y/x)
	}
	return [][4]string{
		{"deltas/s", num(d.DeltasPerSec), num(b.DeltasPerSec), ratio(d.DeltasPerSec, b.DeltasPerSec)},
		{"TTFD p50 (µs)", us(d.TTFDP50us), us(b.TTFDP50us), diff(d.TTFDP50us, b.TTFDP50us, " µs")},
		{"TTFD p99 (µs)", us(d.TTFDP99us), us(b.TTFDP99us), diff(d.TTFDP99us, b.TTFDP99us, " µs")},
		{"delta latency p50 (µs)", us(d.DeltaP50us), us(b.DeltaP50us), diff(d.DeltaP50us, b.DeltaP50us, " µs")},
		{"delta latency p99 (µs)", us(d.DeltaP99us), us(b.DeltaP99us), diff(d.DeltaP99us, b.DeltaP99us, " µs")},
		{"CPU s / M deltas (process)", fmt.Sprintf("%.2f", d.CPUSecPerMDelta), fmt.Sprintf("%.2f", b.CPUSecPerMDelta), diff(d.CPUSecPerMDelta, b.CPUSecPerMDelta, " s")},
		{"heap allocs / delta (process)", fmt.Sprintf("%.1f", d.AllocsPerDelta), fmt.Sprintf("%.1f", b.AllocsPerDelta), diff(d.AllocsPerDelta, b.AllocsPerDelta, "")},
		{"heap bytes / delta (process)", num(d.BytesPerDelta), num(b.BytesPerDelta), diff(d.BytesPerDelta, b.BytesPerDelta, " B")},
		{"peak RSS (MiB)", mib(d.RSSBytes), mib(b.RSSBytes), diff(float64(d.RSSBytes)/(1<<20), float64(b.RSSBytes)/(1<<20), " MiB")},
		{"RSS / stream (KiB)", kib(d.RSSPerStreamBytes), kib(b.RSSPerStreamBytes), diff(float64(d.RSSPerStreamBytes)/1024, float64(b.RSSPerStreamBytes)/1024, " KiB")},
		{"errors", fmt.Sprint(d.Errors), fmt.Sprint(b.Errors), ""},
	}
}

func signed(f float64) string {
	if f >= 0 {
		return "+" + trim(f)
	}
	return trim(f)
}

func trim(f float64) string {
	if f == float64(int64(f)) || f >= 1000 || f <= -1000 {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.1f", f)
}

func us(f float64) string { return trim(f) }

// num formats with thousands separators.
func num(f float64) string {
	n := int64(f + 0.5)
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
func kib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/1024) }
