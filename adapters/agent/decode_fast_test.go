package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// pathPair feeds the same frames to a decoder on the fast path and one
// forced onto the encoding/json path, and fails at the first frame whose
// events or error differ.
type pathPair struct {
	t          testing.TB
	fast, slow *Decoder
	hits, n    int // frames the fast path decoded, frames fed
	envHits    int // frames decoded from the envelope the fast path read
}

func newPathPair(t testing.TB, afterSeq uint64) *pathPair {
	return &pathPair{t: t, fast: &Decoder{AfterSeq: afterSeq}, slow: &Decoder{AfterSeq: afterSeq, slow: true}}
}

func (p *pathPair) feed(frame []byte) {
	p.t.Helper()
	p.n++
	var got []*canonical.Event
	var gerr error
	trimmed := bytes.TrimSpace(frame)
	// Feed, with the path taken counted.
	if o, ok := p.fast.feedFast(trimmed, nil); ok && trimmed[0] == '{' {
		p.hits++
		got = o
	} else if o, ok := p.fast.fastEnvelope(trimmed, nil); ok {
		p.envHits++
		got = o
	} else {
		got, gerr = p.fast.feed(frame, nil)
	}
	if p.fast.held != nil {
		got = p.fast.release(got, 0)
	}
	want, werr := p.slow.Feed(frame, nil)
	sameErr(p.t, frame, werr, gerr)
	if !equalEvents(want, got) {
		p.t.Fatalf("frame %q: the fast path's events differ (-slow +fast):\n%s", frame, cmp.Diff(want, got, protocmp.Transform()))
	}
}

func equalEvents(a, b []*canonical.Event) bool {
	return slices.EqualFunc(a, b, func(x, y *canonical.Event) bool { return proto.Equal(x, y) })
}

func (p *pathPair) end() {
	p.t.Helper()
	want, got := p.slow.End(nil), p.fast.End(nil)
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		p.t.Fatalf("End differs (-slow +fast):\n%s", d)
	}
}

func sameErr(t testing.TB, frame []byte, want, got error) {
	t.Helper()
	if (want == nil) != (got == nil) || (want != nil && (want.Error() != got.Error() || canonical.CodeOf(want) != canonical.CodeOf(got))) {
		t.Fatalf("frame %q: error %v, want %v", frame, got, want)
	}
}

// testdataFrames returns every frame of the encoder's golden transcripts.
func testdataFrames(t testing.TB) [][][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "encode", "*.golden"))
	if len(files) == 0 {
		t.Fatal("no testdata/encode/*.golden")
	}
	var runs [][][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, bytes.Split(bytes.TrimSpace(data), []byte("\n")))
	}
	return runs
}

// TestFastPathTestdata: the golden transcripts decode the same on both
// paths, their deltas take the fast one and their other event frames are
// decoded from the envelope it read.
func TestFastPathTestdata(t *testing.T) {
	hits, envHits := 0, 0
	for _, frames := range testdataFrames(t) {
		p := newPathPair(t, 0)
		for _, f := range frames {
			p.feed(f)
		}
		p.end()
		hits, envHits = hits+p.hits, envHits+p.envHits
	}
	if envHits < 10 {
		t.Fatalf("only %d testdata frames were decoded from the fast path's envelope", envHits)
	}
	if hits < 10 {
		t.Fatalf("only %d testdata frames took the fast path", hits)
	}
}

// TestFastPathGenerated: generated runs of deltas with every variation
// the fast path must either decode exactly as encoding/json does or
// decline (escapes, unicode, invalid UTF-8, empty texts, missing, extra,
// reordered, duplicated, re-cased and null members, odd numbers,
// whitespace, truncation) decode the same on both paths.
func TestFastPathGenerated(t *testing.T) {
	hits, n := 0, 0
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 42))
		g := &frameGen{r: r}
		p := newPathPair(t, uint64(r.IntN(3)))
		for _, f := range g.run() {
			p.feed(f)
		}
		p.end()
		hits, n = hits+p.hits, n+p.n
	}
	fastShare(t, "generated frames", hits, n, 4)
}

// fastShare fails unless at least one in every of the n frames fed (what)
// took the fast path.
func fastShare(t *testing.T, what string, hits, n, every int) {
	t.Helper()
	t.Logf("%d of %d %s took the fast path", hits, n, what)
	if hits < n/every {
		t.Fatalf("only %d of %d %s took the fast path", hits, n, what)
	}
}

// TestFastPathCases pins cases each path must agree on, after a text
// block is open at index 0 of the root namespace and a reasoning block at
// index 2 of ["sub:1"].
func TestFastPathCases(t *testing.T) {
	const pre = `{"type":"event","seq":9,"method":"messages","params":{"namespace":[],"timestamp":1710000000000,"node":"agent","data":`
	cases := []struct {
		name  string
		frame string
		path  string // the path that must decode it: fast, envelope (fastEnvelope) or json
	}{
		{"plain", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"hi"}}}}`, "fast"},
		{"escapes", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"a\n\"b\\\/\t\u00e9\ud83d\ude00"}}}}`, "fast"},
		{"lone surrogates", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"\ud800\u0041\udc00x\ud83d"}}}}`, "fast"},
		{"invalid utf-8", pre + "{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"a\xffb\xe2\x82\"}}}}", "fast"},
		{"raw unicode", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"日本語 😀"}}}}`, "fast"},
		{"empty text", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":""}}}}`, "fast"},
		{"reordered", `{"params":{"data":{"delta":{"text":"x","type":"text-delta"},"index":0,"event":"content-block-delta"},"node":"n","namespace":[]},"method":"messages","type":"event"}`, "fast"},
		{"extra members", `{"x":[1,{"y":null}],"type":"event","method":"messages","params":{"z":"\u0041","namespace":[],"data":{"event":"content-block-delta","w":-1.5e3,"index":0,"delta":{"v":true,"type":"text-delta","text":"x"}}}}`, "fast"},
		{"whitespace", " {\n\"type\" : \"event\" ,\r\n\t\"method\":\"messages\",\"params\":{ \"namespace\" : [ ] , \"data\" : { \"event\" : \"content-block-delta\" , \"index\" : 0 , \"delta\" : { \"type\" : \"text-delta\" , \"text\" : \"x\" } } } } \n", "fast"},
		{"subgraph", `{"type":"event","method":"messages","params":{"namespace":["sub:1"],"data":{"event":"content-block-delta","index":2,"delta":{"type":"reasoning-delta","reasoning":"r"}}}}`, "fast"},
		{"float timestamp", `{"type":"event","method":"messages","params":{"namespace":[],"timestamp":1.7e12,"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}`, "fast"},
		{"negative timestamp", `{"type":"event","method":"messages","params":{"namespace":[],"timestamp":-5,"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}`, "fast"},
		{"no namespace", `{"type":"event","method":"messages","params":{"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}`, "fast"},
		{"other index", pre + `{"event":"content-block-delta","index":1,"delta":{"type":"text-delta","text":"x"}}}}`, "envelope"},
		{"no index", pre + `{"event":"content-block-delta","delta":{"type":"text-delta","text":"x"}}}}`, "envelope"},
		{"other type", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"reasoning-delta","reasoning":"x"}}}}`, "envelope"},
		{"re-cased member", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","Text":"x"}}}}`, "envelope"},
		{"re-cased envelope member", `{"TYPE":"event","type":"event","method":"messages","params":{"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}`, "json"},
		{"duplicate text", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x","text":"y"}}}}`, "envelope"},
		{"duplicate params", `{"type":"event","method":"messages","params":{"node":"a"},"params":{"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}`, "json"},
		{"null text", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":null}}}}`, "envelope"},
		{"number text", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":1}}}}`, "envelope"},
		{"float index", pre + `{"event":"content-block-delta","index":0.0,"delta":{"type":"text-delta","text":"x"}}}}`, "envelope"},
		{"negative seq", `{"type":"event","seq":-1,"method":"messages","params":{"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}`, "json"},
		{"escaped name", `{"type":"event","method":"messages","params":{"d\u0061ta":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}`, "json"},
		{"escaped node", pre[:len(pre)-len(`"node":"agent","data":`)] + `"node":"a\u0067ent","data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}`, "json"},
		{"trailing garbage", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}}`, "json"},
		{"truncated", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}`, "json"},
		{"control character", pre + "{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"a\x01\"}}}}", "json"},
		{"bad escape", pre + `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"\x"}}}}`, "json"},
		{"replayed", `{"type":"event","seq":1,"method":"messages","params":{"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"x"}}}}`, "json"},
		{"response", `{"type":"success","id":1,"result":{}}`, "json"},
		{"lifecycle", `{"type":"event","seq":9,"method":"lifecycle","params":{"namespace":[],"timestamp":1710000000000,"data":{"event":"completed","graph_name":"g"}}}`, "envelope"},
		{"checkpoint", `{"type":"event","event_id":"9","seq":9,"method":"checkpoints","params":{"namespace":[],"timestamp":1710000000000,"data":{"id":"c2","parent_id":"c1","step":0,"source":"loop"}}}`, "envelope"},
		{"block finish", pre + `{"event":"content-block-finish","index":0,"content":{"type":"text","text":"hi"}}}}`, "envelope"},
		{"message finish", `{"type":"event","seq":9,"method":"messages","params":{"namespace":["sub:1"],"data":{"event":"message-finish","reason":"stop"}}}`, "envelope"},
		{"block start", pre + `{"event":"content-block-start","index":1,"content":{"type":"text","text":""}}}}`, "envelope"},
		{"updates", `{"type":"event","seq":9,"method":"updates","params":{"namespace":[],"node":"model","data":{"node":"model","values":{"messages":[{"type":"ai","content":"x"}]}}}}`, "envelope"},
		{"tasks", `{"type":"event","seq":9,"method":"tasks","params":{"namespace":[],"data":[1,"two",{"three":null}]}}`, "envelope"},
		{"custom", `{"type":"event","seq":9,"method":"custom","params":{"namespace":["a","b"],"data":{"name":"n","payload":{"k":[true]}}}}`, "envelope"},
		{"input requested", `{"type":"event","seq":9,"method":"input.requested","params":{"namespace":[],"data":{"interrupt_id":"i","payload":"q"}}}`, "envelope"},
		{"values after params", `{"type":"event","seq":9,"params":{"namespace":[],"data":{"messages":[]}},"method":"values"}`, "envelope"},
		{"messages null data", `{"type":"event","seq":9,"method":"messages","params":{"namespace":[],"data":null}}`, "envelope"},
		{"unknown method", `{"type":"event","seq":9,"method":"future","params":{"namespace":[],"data":{"x":1}}}`, "envelope"},
		{"new namespace", `{"type":"event","seq":9,"method":"lifecycle","params":{"namespace":["new:1"],"data":{"event":"started"}}}`, "envelope"},
		{"unknown method, data not an object", `{"type":"event","seq":9,"method":"future","params":{"namespace":[],"data":"x"}}`, "json"},
		{"lifecycle without data", `{"type":"event","seq":9,"method":"lifecycle","params":{"namespace":[]}}`, "json"},
		{"escaped method", `{"type":"event","seq":9,"method":"lif\u0065cycle","params":{"namespace":[],"data":{"event":"completed"}}}`, "json"},
		{"invalid utf-8 method", "{\"type\":\"event\",\"seq\":9,\"method\":\"x\xff\",\"params\":{\"namespace\":[],\"data\":{}}}", "json"},
		{"escaped node on lifecycle", `{"type":"event","seq":9,"method":"lifecycle","params":{"namespace":[],"node":"\u0061","data":{"event":"completed"}}}`, "json"},
		{"replayed lifecycle", `{"type":"event","seq":2,"method":"lifecycle","params":{"namespace":[],"data":{"event":"completed"}}}`, "json"},
		{"re-cased method member", `{"type":"event","seq":9,"Method":"lifecycle","params":{"namespace":[],"data":{"event":"completed"}}}`, "json"},
	}
	setup := []string{
		`{"type":"event","seq":1,"method":"messages","params":{"namespace":[],"data":{"event":"message-start","role":"ai","id":"m"}}}`,
		`{"type":"event","seq":2,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}}}`,
		`{"type":"event","seq":3,"method":"messages","params":{"namespace":["sub:1"],"data":{"event":"content-block-start","index":2,"content":{"type":"reasoning","reasoning":""}}}}`,
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPathPair(t, 4)
			p.fast.AfterSeq, p.slow.AfterSeq = 0, 0
			for _, f := range setup {
				p.feed([]byte(f))
			}
			p.fast.AfterSeq, p.slow.AfterSeq = 4, 4
			p.hits, p.envHits = 0, 0
			p.feed([]byte(tc.frame))
			path := "json"
			switch {
			case p.hits == 1:
				path = "fast"
			case p.envHits == 1:
				path = "envelope"
			}
			if path != tc.path {
				t.Errorf("decoded on the %s path, want %s", path, tc.path)
			}
			p.feed([]byte(tc.frame)) // again: the state after it agrees too
			p.end()
		})
	}
}

// FuzzFastPath: any frames (one per line), after a run with blocks open
// in two namespaces, decode the same on the fast and the encoding/json
// path, errors included, and never panic.
func FuzzFastPath(f *testing.F) {
	for _, frames := range testdataFrames(f) {
		for _, fr := range frames {
			f.Add(fr)
		}
	}
	for seed := range uint64(20) {
		g := &frameGen{r: rand.New(rand.NewPCG(seed, 7))}
		f.Add(bytes.Join(g.run(), []byte("\n")))
		f.Add([]byte(`{"type":"event","seq":4,"method":"values","params":{"namespace":[],"data":` + g.state(0, seed%2 == 0) + `}}`))
	}
	setup := [][]byte{
		[]byte(`{"type":"event","seq":1,"method":"messages","params":{"namespace":[],"node":"agent","data":{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}}}`),
		[]byte(`{"type":"event","seq":2,"method":"messages","params":{"namespace":["sub:1"],"data":{"event":"content-block-start","index":1,"content":{"type":"tool_call_chunk","id":"c","name":"f"}}}}`),
		[]byte(`{"type":"event","seq":3,"method":"messages","params":{"namespace":["a","b"],"data":{"event":"content-block-start","index":2,"content":{"type":"image","base64":""}}}}`),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newPathPair(t, 0)
		for _, fr := range setup {
			p.feed(fr)
		}
		for _, fr := range bytes.Split(data, []byte("\n")) {
			p.feed(fr)
		}
		p.end()
	})
}

// TestDecodeDeltaAllocs: a text, reasoning or tool-arguments delta costs
// at most two allocations, the canonical event and the text, whether it
// comes as a frame or as an SSE event (whose data the SSE parser copies:
// the text then shares an arena chunk, see textarena.Arena).
func TestDecodeDeltaAllocs(t *testing.T) {
	for _, tc := range []struct{ name, start, delta string }{
		{"text", `{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}`,
			`{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":" token"}}`},
		{"escaped text", `{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}`,
			`{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"line\n\"é\" \u00e9\ud83d\ude00"}}`},
		{"reasoning", `{"event":"content-block-start","index":3,"content":{"type":"reasoning","reasoning":""}}`,
			`{"event":"content-block-delta","index":3,"delta":{"type":"reasoning-delta","reasoning":"hmm"}}`},
		{"long text", `{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}`,
			`{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"` + strings.Repeat("long text ", 100) + `"}}`},
		{"tool arguments", `{"event":"content-block-start","index":1,"content":{"type":"tool_call_chunk","id":"c","name":"f","args":""}}`,
			`{"event":"content-block-delta","index":1,"delta":{"type":"tool-call-delta","args":"{\"a\":"}}`},
	} {
		for _, ns := range []string{`[]`, `["tools:call-1","sub:2"]`} {
			env := func(seq int, data string) string {
				return `{"type":"event","event_id":"` + strconv.Itoa(seq) + `","seq":` + strconv.Itoa(seq) + `,"method":"messages","params":{"namespace":` + ns + `,"timestamp":1710000000000,"node":"agent","data":` + data + `}}`
			}
			t.Run(tc.name+" "+ns+" frame", func(t *testing.T) {
				d := &Decoder{}
				out, err := d.Feed([]byte(env(1, tc.start)), nil)
				if err != nil {
					t.Fatal(err)
				}
				frame := []byte(env(2, tc.delta))
				allocs := testing.AllocsPerRun(1000, func() {
					if out, err = d.Feed(frame, out[:0]); err != nil || len(out) != 1 {
						t.Fatal(err, out)
					}
				})
				if allocs > 2 {
					t.Errorf("%v allocations per delta, want at most 2", allocs)
				}
			})
			t.Run(tc.name+" "+ns+" sse", func(t *testing.T) {
				d := NewSSEDecoder(0, 0)
				out, err := d.Feed([]byte("data: "+env(1, tc.start)+"\n\n"), nil)
				if err != nil {
					t.Fatal(err)
				}
				frame := []byte("id: 2\nevent: messages\ndata: " + env(2, tc.delta) + "\n\n")
				allocs := testing.AllocsPerRun(1000, func() {
					if out, err = d.Feed(frame, out[:0]); err != nil || len(out) != 1 {
						t.Fatal(err, out)
					}
				})
				if allocs > 2 {
					t.Errorf("%v allocations per delta, want at most 2", allocs)
				}
			})
		}
	}
}

// frameGen generates runs of agent-protocol frames: block starts and many
// deltas, most of the common shape, many varied.
type frameGen struct {
	r   *rand.Rand
	seq int
}

func (g *frameGen) p(percent int) bool { return g.r.IntN(100) < percent }

var genPieces = []string{
	"hello", " ", "world", "\n", "\"", "\\", "/", "é", "日本", "😀", "\u2028", "<&>", "\t", "\x00", "\x1f",
	"\xff", "\xe2\x82", "\xed\xa0\x80", "", "a", "{\"k\":", "1}", "\u007f", "\uFFFD",
}

// text returns a random text, possibly invalid UTF-8.
func (g *frameGen) text() string {
	var b strings.Builder
	for range g.r.IntN(6) {
		b.WriteString(genPieces[g.r.IntN(len(genPieces))])
	}
	return b.String()
}

// str encodes s as a JSON string, escaping at random, with now and then a
// lone or paired surrogate escape.
func (g *frameGen) str(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteByte(s[i]) // raw invalid byte
		case r == '"' || r == '\\' || r < 0x20 || g.p(10):
			switch {
			case r == '\n' && g.p(50):
				b.WriteString(`\n`)
			case r == '"' && g.p(50):
				b.WriteString(`\"`)
			case r == '\\' && g.p(50):
				b.WriteString(`\\`)
			case r == '/' && g.p(50):
				b.WriteString(`\/`)
			case r > 0xFFFF:
				r1, r2 := utf16Pair(r)
				fmt.Fprintf(&b, `\u%04x\u%04X`, r1, r2)
			default:
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	if g.p(3) {
		b.WriteString([]string{`\ud800`, `\udc00`, `\ud83d\u0041`, `\ud83d\ude00`}[g.r.IntN(4)])
	}
	b.WriteByte('"')
	return b.String()
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// ident encodes a name or type as a JSON string, escaped now and then.
func (g *frameGen) ident(s string) string {
	if g.p(3) {
		return g.str(s)
	}
	return `"` + s + `"`
}

// ws is optional whitespace.
func (g *frameGen) ws() string {
	if g.p(97) {
		return ""
	}
	return []string{" ", "\n", "\t ", "\r\n  "}[g.r.IntN(4)]
}

// value is a random JSON value for members the decoder does not read.
func (g *frameGen) value(depth int) string {
	switch n := g.r.IntN(8); {
	case n == 0 && depth < 3:
		return g.obj([][2]string{{"k", g.value(depth + 1)}, {g.text(), g.value(depth + 1)}})
	case n == 1 && depth < 3:
		return "[" + g.value(depth+1) + "," + g.ws() + g.value(depth+1) + "]"
	case n == 2:
		return []string{"true", "false", "null", "[]", "{}"}[g.r.IntN(5)]
	case n == 3:
		return []string{"0", "-1.5e3", "12345678901234567890", "1E+2", "-0"}[g.r.IntN(5)]
	}
	return g.str(g.text())
}

// obj renders members as an object, now and then reordered, extended,
// duplicated, re-cased or missing one.
func (g *frameGen) obj(ms [][2]string) string {
	if g.p(3) && len(ms) > 0 { // drop one
		i := g.r.IntN(len(ms))
		ms = append(ms[:i:i], ms[i+1:]...)
	}
	if g.p(10) {
		ms = append(ms, [2]string{"extra_" + strconv.Itoa(g.r.IntN(3)), g.value(0)})
	}
	if g.p(2) && len(ms) > 0 { // duplicate one
		ms = append(ms, ms[g.r.IntN(len(ms))])
	}
	if g.p(2) && len(ms) > 0 { // re-case one
		i := g.r.IntN(len(ms))
		ms[i][0] = strings.ToUpper(ms[i][0])
	}
	if g.p(1) && len(ms) > 0 { // null one
		ms[g.r.IntN(len(ms))][1] = "null"
	}
	if g.p(20) {
		g.r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	}
	var b strings.Builder
	b.WriteString("{" + g.ws())
	for i, m := range ms {
		if i > 0 {
			b.WriteString("," + g.ws())
		}
		k := `"` + m[0] + `"`
		if g.p(1) || strings.ContainsFunc(m[0], func(r rune) bool { return r < ' ' || r == '"' || r == '\\' || r >= utf8.RuneSelf }) {
			k = g.str(m[0])
		}
		b.WriteString(k + g.ws() + ":" + g.ws() + m[1] + g.ws())
	}
	b.WriteString("}")
	return b.String()
}

var genNamespaces = []string{`[]`, `["sub:1"]`, `["a","b"]`, `["a\u0000b"]`, `["a","\u0062"]`, `["ü"]`}

// frame renders one envelope for data.
func (g *frameGen) frame(ns, data string) []byte {
	g.seq++
	ms := [][2]string{{"type", `"event"`}, {"event_id", g.ident(strconv.Itoa(g.seq))}, {"seq", strconv.Itoa(g.seq)}, {"method", `"messages"`}}
	if g.p(3) {
		ms[2][1] = []string{"-1", "1.0", "0", "18446744073709551615", "18446744073709551616", "1e2"}[g.r.IntN(6)]
	}
	params := [][2]string{{"namespace", ns}, {"timestamp", "1710000000000"}, {"node", g.ident("agent")}, {"data", data}}
	if g.p(5) {
		params[1][1] = []string{"1.7e12", "-3", "0", "99999999999999999999", "1710000000000.5", "1e400", "123456789012345"}[g.r.IntN(7)]
	}
	if g.p(5) {
		params[2][1] = g.str(g.text())
	}
	ms = append(ms, [2]string{"params", g.obj(params)})
	out := g.ws() + g.obj(ms) + g.ws()
	switch {
	case g.p(1):
		out = out[:g.r.IntN(len(out)+1)]
	case g.p(1):
		out += []string{"}", "x", " 1", "\x00"}[g.r.IntN(4)]
	}
	return []byte(out)
}

// run is a sequence of block starts, deltas (mostly on the open block),
// finishes and a terminal event.
func (g *frameGen) run() [][]byte {
	types := []struct{ content, delta, field string }{
		{`{"type":"text","text":""}`, "text-delta", "text"},
		{`{"type":"reasoning","reasoning":""}`, "reasoning-delta", "reasoning"},
		{`{"type":"tool_call_chunk","id":"c","name":"f","args":""}`, "tool-call-delta", "args"},
		{`{"type":"image","base64":""}`, "data-delta", "data"},
	}
	var frames [][]byte
	for range 1 + g.r.IntN(4) {
		ns := genNamespaces[g.r.IntN(3)]
		if g.p(20) { // names the fast path leaves to encoding/json
			ns = genNamespaces[g.r.IntN(len(genNamespaces))]
		}
		idx := g.r.IntN(3)
		ty := types[g.r.IntN(len(types))]
		frames = append(frames, g.frame(ns, `{"event":"content-block-start","index":`+strconv.Itoa(idx)+`,"content":`+ty.content+`}`))
		for range g.r.IntN(25) {
			ti, di := ty, idx
			if g.p(5) {
				ti = types[g.r.IntN(len(types))]
			}
			if g.p(5) {
				di = g.r.IntN(3)
			}
			text := g.text()
			if ti.field == "data" {
				text = []string{"QUJD", "QUI=", "QQ", "!!", "", "QUJDRA=="}[g.r.IntN(6)]
			}
			idxv := strconv.Itoa(di)
			if g.p(2) {
				idxv = []string{"-0", "0.0", "1e0", `"0"`, "-1", "99999999999999999999"}[g.r.IntN(6)]
			}
			dt := g.ident(ti.delta)
			if g.p(2) {
				dt = g.ident([]string{"block-delta", "text", "future-delta"}[g.r.IntN(3)])
			}
			delta := g.obj([][2]string{{"type", dt}, {ti.field, g.str(text)}})
			data := g.obj([][2]string{{"event", `"content-block-delta"`}, {"index", idxv}, {"delta", delta}})
			frames = append(frames, g.frame(ns, data))
		}
		if g.p(50) {
			frames = append(frames, g.frame(ns, `{"event":"content-block-finish","index":`+strconv.Itoa(idx)+`,"content":`+ty.content+`}`))
		}
	}
	if g.p(50) {
		frames = append(frames, []byte(`{"type":"event","method":"lifecycle","params":{"namespace":[],"data":{"event":"completed"}}}`))
	}
	return frames
}

// BenchmarkDecodeDeltaFrame is BenchmarkDecodeDelta without SSE framing:
// one WebSocket frame holding a text delta to a canonical event.
func BenchmarkDecodeDeltaFrame(b *testing.B) {
	d := &Decoder{}
	out, _ := d.Feed([]byte(`{"type":"event","seq":1,"method":"messages","params":{"namespace":[],"timestamp":1710000000000,"data":{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}}}`), nil)
	frame := []byte(`{"type":"event","event_id":"2","seq":2,"method":"messages","params":{"namespace":[],"timestamp":1710000000000,"node":"agent","data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":" token"}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		out, _ = d.Feed(frame, out[:0])
		if len(d.ns[""].acc) > 1<<20 {
			d.ns[""].acc = d.ns[""].acc[:0]
		}
	}
}

// state returns a random JSON value: nested objects and arrays of texts
// (escaped at random, possibly invalid UTF-8, also as member names, some
// repeated), numbers of every form, literals and whitespace. With bad, now
// and then a value the fast path declines or JSON refuses: a number
// float64 cannot hold, a malformed number or literal, a nesting deeper
// than the fast path reads.
func (g *frameGen) state(depth int, bad bool) string {
	ws := func() string { return []string{"", "", " ", "\n\t "}[g.r.IntN(4)] }
	switch n := g.r.IntN(10); {
	case n < 2 && depth < 6:
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range g.r.IntN(4) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			name := g.str(g.text())
			if g.p(10) {
				name = `"k"`
			}
			b.WriteString(name + ws() + ":" + ws() + g.state(depth+1, bad) + ws())
		}
		return b.String() + "}"
	case n < 4 && depth < 6:
		var b strings.Builder
		b.WriteString("[" + ws())
		for i := range g.r.IntN(4) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(g.state(depth+1, bad) + ws())
		}
		return b.String() + "]"
	case n < 6:
		return g.str(g.text())
	case n < 8:
		if bad && g.p(30) {
			return []string{"1e400", "-1e400", "01", "1.", "-", "1e"}[g.r.IntN(6)]
		}
		return []string{"0", "-0", "12", "-3.5", "1e3", "2E-2", "0.1", "123456789012345678", "9007199254740993",
			"1.7976931348623157e308", "5e-324"}[g.r.IntN(11)]
	case n < 9:
		if bad && g.p(30) {
			return []string{"nul", "True"}[g.r.IntN(2)]
		}
		return []string{"true", "false", "null"}[g.r.IntN(3)]
	}
	if bad && g.p(20) {
		return strings.Repeat("[", 65) + strings.Repeat("]", 65) // past fastMaxDepth
	}
	return `{"messages":[{"type":"human","content":` + g.str(g.text()) + `,"id":"m1"}]}`
}

// TestFastPathValues: generated values frames (any state, members of the
// envelope reordered, namespaces, nodes, timestamps, seqs at or before
// AfterSeq; a third of them with values JSON refuses or the fast path
// declines, or cut short) decode the same on both paths, and most take the
// fast one.
func TestFastPathValues(t *testing.T) {
	hits, n := 0, 0
	for seed := range uint64(400) {
		r := rand.New(rand.NewPCG(seed, 43))
		g := &frameGen{r: r}
		p := newPathPair(t, 2)
		for i := range 20 {
			bad := g.p(33)
			params := []string{`"data":` + g.state(0, bad)}
			if g.p(70) {
				ns := []string{`[]`, `["sub:1"]`, `["a","b"]`, `null`, `[1]`}
				params = append(params, `"namespace":`+ns[r.IntN(len(ns)-2)+map[bool]int{true: 2}[bad]])
			}
			if g.p(50) {
				params = append(params, `"timestamp":`+[]string{"1710000000000", "0", "-5", "1e20", `"x"`}[r.IntN(4)+map[bool]int{true: 1}[bad]])
			}
			if g.p(40) {
				node := `"agent"`
				if bad {
					node = g.str(g.text()) // escaped or not UTF-8: the general path reads it
				}
				params = append(params, `"node":`+node)
			}
			if bad && g.p(10) {
				params = append(params, `"data":1`) // repeated
			}
			r.Shuffle(len(params), func(i, j int) { params[i], params[j] = params[j], params[i] })
			env := []string{`"type":"event"`, `"seq":` + strconv.Itoa(i), `"method":"values"`, `"params":{` + strings.Join(params, ",") + `}`}
			if bad && g.p(20) {
				r.Shuffle(len(env), func(i, j int) { env[i], env[j] = env[j], env[i] })
			}
			frame := "{" + strings.Join(env, ",") + "}"
			if bad && g.p(10) {
				frame = frame[:r.IntN(len(frame))]
			}
			p.feed([]byte(frame))
		}
		p.end()
		hits, n = hits+p.hits, n+p.n
	}
	fastShare(t, "generated values frames", hits, n, 2)
}

// BenchmarkDecodeValuesFrame: a values frame holding a thread of ten
// turns (twenty messages) to its state snapshot, on the fast path and on
// the encoding/json path it replaces.
// TestRawValue: rawValue, which reads JSON with the fast path's scanner,
// makes the value encoding/json and structpb.NewValue make (jsonValue),
// nil included, for the cases where the scanner declines too.
func TestRawValue(t *testing.T) {
	for _, raw := range rawValueSeeds {
		got, want := rawValue(json.RawMessage(raw)), jsonValue(json.RawMessage(raw))
		if !proto.Equal(got, want) {
			t.Errorf("rawValue(%q) = %v, want %v", raw, got, want)
		}
	}
	for seed := range uint64(200) {
		g := &frameGen{r: rand.New(rand.NewPCG(seed, 3))}
		raw := g.state(0, seed%2 == 0)
		if got, want := rawValue(json.RawMessage(raw)), jsonValue(json.RawMessage(raw)); !proto.Equal(got, want) {
			t.Fatalf("rawValue(%q) = %v, want %v", raw, got, want)
		}
	}
}

var rawValueSeeds = []string{
	``, `null`, `true`, `false`, `0`, `-0`, `1.5e3`, `1e400`, `-1e-400`, `01`, `"x"`, `"a\u00e9\ud83d\ude00"`,
	`"\ud800"`, "\"\xff\"", "\"a\x01\"", `[]`, `{}`, ` [1, "2", {"3": [null]}] `, `{"a":1,"a":2}`,
	`{"A":1,"a":2}`, `{"\u0061":1}`, `{"messages":[{"type":"ai","content":"x","id":"m"}]}`, `[1,]`, `{"a"}`, `[1] 2`,
	strings.Repeat("[", 70) + strings.Repeat("]", 70),
}

// FuzzRawValue: on any bytes rawValue and jsonValue agree.
func FuzzRawValue(f *testing.F) {
	for _, raw := range rawValueSeeds {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got, want := rawValue(raw), jsonValue(raw); !proto.Equal(got, want) {
			t.Fatalf("rawValue(%q) = %v, want %v", raw, got, want)
		}
	})
}

// BenchmarkDecodeRunFrames: the frames of a one-delta run but the delta
// (lifecycle, checkpoints, message and block starts and finishes, the
// node's update), which the fast path decodes from its envelope.
func BenchmarkDecodeRunFrames(b *testing.B) {
	const head = `{"type":"event","event_id":"1","seq":1,"method":`
	const params = `"params":{"namespace":[],"timestamp":1710000000000,"data":`
	frames := [][]byte{
		[]byte(head + `"lifecycle",` + params + `{"event":"running","graph_name":"agent"}}}`),
		[]byte(head + `"checkpoints",` + params + `{"id":"ckpt-1","step":-1,"source":"input"}}}`),
		[]byte(head + `"messages",` + params + `{"event":"message-start","role":"ai","id":"msg-1"}}}`),
		[]byte(head + `"messages",` + params + `{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}}}`),
		[]byte(head + `"messages",` + params + `{"event":"content-block-finish","index":0,"content":{"type":"text","text":"tok "}}}}`),
		[]byte(head + `"messages",` + params + `{"event":"message-finish","reason":"stop"}}}`),
		[]byte(head + `"updates",` + params + `{"node":"model","values":{"messages":[{"content":"tok ","id":"msg-1","response_metadata":{"finish_reason":"stop"},"type":"ai"}]}}}}`),
		[]byte(head + `"checkpoints",` + params + `{"id":"ckpt-2","parent_id":"ckpt-1","step":0,"source":"loop"}}}`),
		[]byte(head + `"lifecycle",` + params + `{"event":"completed","graph_name":"agent"}}}`),
	}
	for _, path := range []struct {
		name string
		slow bool
	}{{"fast", false}, {"json", true}} {
		b.Run(path.name, func(b *testing.B) {
			var out []*canonical.Event
			b.ReportAllocs()
			for b.Loop() {
				d := &Decoder{slow: path.slow}
				out = out[:0]
				for _, f := range frames {
					out, _ = d.Feed(f, out)
				}
			}
			if _, ok := canonical.TerminalOf(out[len(out)-1]); !ok {
				b.Fatalf("the run did not end: %v", out)
			}
		})
	}
}

func BenchmarkDecodeValuesFrame(b *testing.B) {
	var msgs []string
	for i := range 10 {
		msgs = append(msgs,
			fmt.Sprintf(`{"type":"human","content":"question number %d, with some words in it","id":"run-%d-input-0"}`, i, i),
			fmt.Sprintf(`{"type":"ai","content":"an answer of a few dozen tokens to question %d, as a model would stream it","id":"run-%d-msg-1","response_metadata":{"finish_reason":"stop"},"usage_metadata":{"input_tokens":12,"output_tokens":20,"total_tokens":32}}`, i, i))
	}
	frame := []byte(`{"type":"event","event_id":"9","seq":9,"method":"values","params":{"namespace":[],"timestamp":1710000000000,"data":{"messages":[` + strings.Join(msgs, ",") + `]}}}`)
	for _, path := range []struct {
		name string
		slow bool
	}{{"fast", false}, {"json", true}} {
		b.Run(path.name, func(b *testing.B) {
			d := &Decoder{slow: path.slow}
			var out []*canonical.Event
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				out, _ = d.Feed(frame, out[:0])
			}
			if len(out) != 1 || out[0].GetStateSnapshot() == nil {
				b.Fatalf("decoded %v", out)
			}
		})
	}
}

// TestJstr: jstr is what json.Unmarshal into a string gives, for strings
// plain, escaped, unicode or not UTF-8, cut short, with text after them,
// and for every other kind of value.
func TestJstr(t *testing.T) {
	g := &frameGen{r: rand.New(rand.NewPCG(1, 2))}
	raws := []string{``, `"`, `""`, `"a"`, `"a" `, ` "a"`, `"a"b"`, `"a\"`, `"\u0041"`, `"é"`, `"a\nb"`, "\"a\x01\"",
		`null`, `1`, `true`, `{}`, `["a"]`, `"abc`, `abc"`, `"\ud800"`}
	for range 2000 {
		raws = append(raws, g.str(g.text()))
	}
	for _, raw := range raws {
		var want string
		_ = json.Unmarshal([]byte(raw), &want)
		if got := jstr(json.RawMessage(raw)); got != want {
			t.Fatalf("jstr(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestStateKeys: a reported state as the thread keeps it is what decoding
// its JSON into a map of raw values gives, for generated states of every
// kind (objects or not, any keys, strings not UTF-8, numbers JSON cannot
// hold), also built by hand.
func TestStateKeys(t *testing.T) {
	g := &frameGen{r: rand.New(rand.NewPCG(3, 4))}
	states := []*structpb.Value{nil, structpb.NewNullValue(), structpb.NewStringValue("x"),
		structpb.NewStructValue(&structpb.Struct{}),
		structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"nan": structpb.NewNumberValue(math.NaN()), "inf": structpb.NewNumberValue(math.Inf(-1)), "nil": nil,
			"bad\xff": structpb.NewStringValue("\xed\xa0\x80"), "n": structpb.NewNumberValue(1e-7)}}),
		structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{ // two keys, one once written
			"k\xff": structpb.NewStringValue("bad"), "k\ufffd": structpb.NewStringValue("good")}})}
	for range 2000 {
		if v := rawValue(json.RawMessage(g.state(0, false))); v != nil {
			states = append(states, v)
		}
	}
	for _, st := range states {
		var want map[string]json.RawMessage
		werr := json.Unmarshal(appendValue(nil, st), &want)
		got, ok := stateKeys(st)
		if ok != (werr == nil) || !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("stateKeys(%s) = %s, %v; want %s (%v)", appendValue(nil, st), got, ok, want, werr)
		}
	}
}
