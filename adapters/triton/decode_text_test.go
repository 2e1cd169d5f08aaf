package triton

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/chunk"
)

// decodeText runs a stream decoder over chunks, with the text path forced
// through TextAccumulator.Append (slow) or not, and returns the events
// and the first error.
func decodeText(chunks [][]byte, cumulative, slow bool) ([]*canonical.Event, error) {
	d := newStreamDecoder(cumulative, 512, 200, "run-")
	d.slowText = slow
	var out []*canonical.Event
	var err error
	for _, c := range chunks {
		if out, err = d.Feed(c, out); err != nil {
			return d.Fail(out, err), err
		}
	}
	if out, err = d.End(out); err != nil {
		return d.Fail(out, err), err
	}
	return out, nil
}

// sameTextPaths fails if the arena path and the accumulator path decode
// chunks differently, or the output is not a valid run.
func sameTextPaths(t testing.TB, chunks [][]byte, cumulative bool) []*canonical.Event {
	t.Helper()
	want, werr := decodeText(chunks, cumulative, true)
	got, gerr := decodeText(chunks, cumulative, false)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("error %v, want %v", gerr, werr)
	}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Fatalf("the arena text path differs (-accumulator +arena):\n%s", d)
	}
	if err := canonical.Validate(got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTextPathTestdata: every recorded upstream body, whole and cut at
// random, decodes the same on both text paths.
func TestTextPathTestdata(t *testing.T) {
	for _, c := range wireCases(t) {
		if c.object {
			continue
		}
		sameTextPaths(t, [][]byte{c.wire}, c.cumulative)
		for seed := range uint64(16) {
			sameTextPaths(t, chunk.Split(c.wire, seed, 1+int(seed%8)), c.cumulative)
		}
		sameTextPaths(t, chunk.Bytes(c.wire), c.cumulative)
	}
}

// TestTextPathGenerated: generated streams (texts with escapes, unicode,
// runes split across responses, invalid UTF-8, empty texts, arrays,
// missing, extra and reordered members, whitespace, CRLF, terminators,
// errors; delta and cumulative) decode the same on both text paths, whole
// and cut at random.
func TestTextPathGenerated(t *testing.T) {
	deltas := 0
	for seed := range uint64(400) {
		g := &responseGen{r: rand.New(rand.NewPCG(seed, 9))}
		cumulative := seed%4 == 3
		wire := g.stream(cumulative)
		events := sameTextPaths(t, [][]byte{wire}, cumulative)
		sameTextPaths(t, chunk.Split(wire, seed, 1+int(seed%7)), cumulative)
		for _, e := range events {
			if e.GetBlockDelta().GetText() != "" {
				deltas++
			}
		}
	}
	if deltas < 2000 {
		t.Fatalf("only %d text deltas generated", deltas)
	}
}

// FuzzTextPath: any bytes, whole or cut anywhere, decode the same on the
// arena and the accumulator text paths, and never panic.
func FuzzTextPath(f *testing.F) {
	for _, c := range wireCases(f) {
		if !c.object {
			f.Add(c.wire, uint64(len(c.wire)), c.cumulative)
		}
	}
	for seed := range uint64(10) {
		g := &responseGen{r: rand.New(rand.NewPCG(seed, 3))}
		f.Add(g.stream(seed%2 == 1), seed, seed%2 == 1)
	}
	f.Fuzz(func(t *testing.T, wire []byte, seed uint64, cumulative bool) {
		sameTextPaths(t, [][]byte{wire}, cumulative)
		sameTextPaths(t, chunk.Split(wire, seed, 1+int(seed%9)), cumulative)
	})
}

// TestDecodeDeltaAllocs: a text delta costs at most two allocations: the
// SSE event's data (the SSE parser copies it) and the canonical event;
// the text's string shares an arena chunk. A text with escapes costs one
// more, the library's unquoted string.
func TestDecodeDeltaAllocs(t *testing.T) {
	for _, text := range []string{` token`, `line\n\"q\" \u00e9\ud83d\ude00`, `日本語`, strings.Repeat("long text ", 100)} {
		t.Run(text[:min(len(text), 20)], func(t *testing.T) {
			d := newStreamDecoder(false, 1<<20, 200, "run-")
			frame := []byte(`data: {"model_name":"ensemble","model_version":"1","text_output":"` + text + `"}` + "\n\n")
			out, err := d.Feed(frame, nil)
			if err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				if out, err = d.Feed(frame, out[:0]); err != nil || len(out) != 1 {
					t.Fatal(err, out)
				}
			})
			want := 2.0
			if strings.Contains(text, `\`) {
				want = 3
			}
			if allocs > want {
				t.Errorf("%v allocations per delta, want at most %v", allocs, want)
			}
		})
	}
}

// responseGen generates Triton response streams.
type responseGen struct{ r *rand.Rand }

func (g *responseGen) p(percent int) bool { return g.r.IntN(100) < percent }

var textPieces = []string{
	"hello", " ", "world", "\n", "\"", "\\", "/", "é", "日本", "😀", "\u2028", "\t", "\x01",
	"\xff", "\xe2\x82", "\xac", "\xf0\x9f", "\x98\x80", "", "a", "{", "}", "\uFFFD",
}

// text is a random text, possibly invalid UTF-8 or cut inside a rune.
func (g *responseGen) text() string {
	var b strings.Builder
	for range g.r.IntN(5) {
		b.WriteString(textPieces[g.r.IntN(len(textPieces))])
	}
	return b.String()
}

// str encodes s as a JSON string, escaping at random; invalid bytes pass
// raw.
func (g *responseGen) str(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteByte(s[i])
		case r == '"' || r == '\\' || r < 0x20 || g.p(10):
			switch {
			case r == '\n' && g.p(50):
				b.WriteString(`\n`)
			case r == '"' && g.p(50):
				b.WriteString(`\"`)
			case r > 0xFFFF:
				r -= 0x10000
				fmt.Fprintf(&b, `\u%04x\u%04X`, 0xd800+(r>>10)&0x3ff, 0xdc00+r&0x3ff)
			default:
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
	return b.String()
}

func (g *responseGen) ws() string {
	if g.p(90) {
		return ""
	}
	return []string{" ", "\t", "  "}[g.r.IntN(3)]
}

// stream is an SSE body of responses.
func (g *responseGen) stream(cumulative bool) []byte {
	var b bytes.Buffer
	sofar := ""
	eol := "\n"
	if g.p(20) {
		eol = "\r\n"
	}
	for range 1 + g.r.IntN(30) {
		text := g.text()
		if cumulative {
			sofar += text
			text = sofar
		}
		ms := [][2]string{{"model_name", `"ensemble"`}, {"model_version", `"1"`}, {"text_output", g.str(text)}}
		switch {
		case g.p(5):
			ms[2][1] = "[" + g.str(text) + "," + g.ws() + g.str(g.text()) + "]"
		case g.p(3):
			ms = ms[:2]
		case g.p(2):
			ms[2][1] = []string{"null", "1", "{}"}[g.r.IntN(3)]
		}
		if g.p(10) {
			ms = append(ms, [2]string{"x", `{"a":[1,"` + g.text() + `"]}`})
		}
		if g.p(5) {
			ms = append(ms, [2]string{"finish_reason", `"stop"`}, [2]string{"num_output_tokens", "7"})
		}
		if g.p(2) {
			ms = append(ms, ms[len(ms)-1])
		}
		if g.p(20) {
			g.r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		}
		b.WriteString("data:" + []string{" ", ""}[g.r.IntN(2)] + "{" + g.ws())
		for i, m := range ms {
			if i > 0 {
				b.WriteString("," + g.ws())
			}
			b.WriteString(`"` + m[0] + `"` + g.ws() + ":" + g.ws() + m[1])
		}
		b.WriteString(g.ws() + "}" + eol + eol)
		if g.p(2) {
			b.WriteString(": keep-alive" + eol + eol)
		}
	}
	switch {
	case g.p(5):
		b.WriteString("data: [DONE]" + eol + eol)
	case g.p(3):
		b.WriteString(`data: {"error":"boom"}` + eol + eol)
	case g.p(3):
		b.WriteString(`data: {"text_output":` + eol + eol)
	}
	return b.Bytes()
}
