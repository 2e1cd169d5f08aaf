package transcript

import (
	"fmt"
	"strconv"
	"strings"

	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

func fmtInt(n int) string { return strconv.Itoa(n) }

// Diff describes how got differs from want, field by field ("" when
// equal). Long texts are compared by their first differing byte.
func Diff(want, got *cv1.Transcript) string {
	var d []string
	add := func(format string, args ...any) { d = append(d, fmt.Sprintf(format, args...)) }
	if want.GetStatus() != got.GetStatus() || want.GetCode() != got.GetCode() {
		add("ended %s, want %s", outcome(got), outcome(want))
	}
	if w, g := want.GetMessages(), got.GetMessages(); w != 0 && w != g {
		add("%d messages, want %d", g, w)
	}
	wb, gb := want.GetBlocks(), got.GetBlocks()
	for i := 0; i < max(len(wb), len(gb)); i++ {
		switch {
		case i >= len(gb):
			add("block %d missing: want %s", i, blockString(wb[i]))
		case i >= len(wb):
			add("block %d unexpected: %s", i, blockString(gb[i]))
		default:
			if s := blockDiff(wb[i], gb[i]); s != "" {
				add("block %d: %s", i, s)
			}
		}
	}
	wt, gt := want.GetTools(), got.GetTools()
	for i := 0; i < max(len(wt), len(gt)); i++ {
		switch {
		case i >= len(gt):
			add("tool event %d missing: want %s", i, toolString(wt[i]))
		case i >= len(wt):
			add("tool event %d unexpected: %s", i, toolString(gt[i]))
		case toolString(wt[i]) != toolString(gt[i]):
			add("tool event %d is %s, want %s", i, toolString(gt[i]), toolString(wt[i]))
		}
	}
	if a, b := strings.Join(want.GetInterrupts(), ","), strings.Join(got.GetInterrupts(), ","); a != b {
		add("interrupts [%s], want [%s]", b, a)
	}
	return strings.Join(d, "; ")
}

func outcome(t *cv1.Transcript) string {
	if t.GetCode() == "" {
		return t.GetStatus()
	}
	return t.GetStatus() + "/" + t.GetCode()
}

func blockString(b *cv1.Block) string {
	s := b.GetType()
	if b.GetId() != "" || b.GetName() != "" {
		s += fmt.Sprintf("(%s %s)", b.GetId(), b.GetName())
	}
	if b.GetMime() != "" {
		s += " " + b.GetMime()
	}
	if b.GetRef() != "" {
		s += " ref=" + b.GetRef()
	}
	if b.GetText() != "" {
		s += " " + strconv.Quote(shorten(b.GetText()))
	}
	if len(b.GetData()) > 0 {
		s += fmt.Sprintf(" %d data bytes", len(b.GetData()))
	}
	return s
}

func blockDiff(w, g *cv1.Block) string {
	var d []string
	if w.GetType() != g.GetType() {
		d = append(d, fmt.Sprintf("type %s, want %s", g.GetType(), w.GetType()))
	}
	for _, f := range [][3]string{{"id", w.GetId(), g.GetId()}, {"name", w.GetName(), g.GetName()}, {"mime", w.GetMime(), g.GetMime()}, {"ref", w.GetRef(), g.GetRef()}} {
		if f[1] != f[2] {
			d = append(d, fmt.Sprintf("%s %q, want %q", f[0], f[2], f[1]))
		}
	}
	if w.GetText() != g.GetText() {
		d = append(d, textDiff("text", w.GetText(), g.GetText()))
	}
	if string(w.GetData()) != string(g.GetData()) {
		d = append(d, textDiff("data", string(w.GetData()), string(g.GetData())))
	}
	return strings.Join(d, ", ")
}

// textDiff names the first differing byte of two texts.
func textDiff(what, w, g string) string {
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	ctx := func(s string) string {
		lo, hi := max(i-20, 0), min(i+20, len(s))
		return strconv.Quote(s[lo:hi])
	}
	return fmt.Sprintf("%s differs at byte %d (%d bytes, want %d): got …%s…, want …%s…", what, i, len(g), len(w), ctx(g), ctx(w))
}

func toolString(t *cv1.Tool) string {
	s := t.GetEvent() + " " + t.GetId()
	if t.GetName() != "" {
		s += " " + t.GetName()
	}
	if t.GetValue() != "" {
		s += " " + t.GetValue()
	}
	return s
}
