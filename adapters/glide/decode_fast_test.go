package glide

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/canonical"
)

// raceEnabled is set by decode_race_test.go: under the race detector
// sync.Pool drops a random share of what it is given, so allocation counts
// say nothing there.
var raceEnabled bool

// sameDecode decodes data with decodeResponse (fast path first) and with
// decodeResponseJSON alone, and fails unless both give the same frame, the
// same error and the same canonical events. It reports whether the fast
// path took the frame.
func sameDecode(t testing.TB, data []byte) (fast bool) {
	t.Helper()
	want, werr := decodeResponseJSON(data)
	got, gerr := decodeResponse(data)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) || canonical.CodeOf(werr) != canonical.CodeOf(gerr) {
		t.Fatalf("frame %q:\nerror %v\nwant  %v", data, gerr, werr)
	}
	if !sameFrame(want, got) {
		t.Fatalf("frame %q: decoded frames differ (-json +fast):\n%s", data,
			cmp.Diff(want, got, cmpopts.IgnoreUnexported(responseFrame{})))
	}
	fast = got != nil && got.pooled
	if werr != nil {
		return fast
	}
	dw, ew := newResponseDecoder(nil)
	dg, eg := newResponseDecoder(nil)
	ew, eg = dw.Frame(ew, want), dg.Frame(eg, got)
	ew = dw.End(ew, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "stream ended"))
	eg = dg.End(eg, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "stream ended"))
	if !sameEvents(ew, eg) {
		t.Fatalf("frame %q: events differ (-json +fast):\n%s", data, cmp.Diff(ew, eg, protocmp.Transform()))
	}
	if err := canonical.Validate(eg); err != nil {
		t.Fatalf("frame %q: %v", data, err)
	}
	return fast
}

// sameFrame compares what decodeResponse callers read (cmp.Diff is the
// same check, but too slow for thousands of frames).
func sameFrame(a, b *responseFrame) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case a.ID != b.ID || (a.Chunk == nil) != (b.Chunk == nil) || (a.Error == nil) != (b.Error == nil):
		return false
	case a.Error != nil && (a.Error.Name != b.Error.Name || a.Error.Message != b.Error.Message ||
		!samePtr(a.Error.FinishReason, b.Error.FinishReason)):
		return false
	case a.Chunk == nil:
		return true
	}
	x, y := *a.Chunk, *b.Chunk
	fx, fy := x.FinishReason, y.FinishReason
	x.FinishReason, y.FinishReason = nil, nil
	return x == y && samePtr(fx, fy)
}

func samePtr(a, b *string) bool { return a == b || a != nil && b != nil && *a == *b }

func sameEvents(a, b []*canonical.Event) bool {
	return slices.EqualFunc(a, b, func(x, y *canonical.Event) bool { return proto.Equal(x, y) })
}

// sameStream fails unless a stream of frames decodes to the same frames,
// events and error with and without the fast path (which recycles frames
// and their strings from one frame to the next).
func sameStream(t testing.TB, frames [][]byte) {
	t.Helper()
	dw, ew := newResponseDecoder(nil)
	dg, eg := newResponseDecoder(nil)
	for i, fr := range frames {
		want, werr := decodeResponseJSON(fr)
		got, gerr := decodeResponse(fr)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) {
			t.Fatalf("frame %d %q: error %v, want %v", i, fr, gerr, werr)
		}
		if !sameFrame(want, got) {
			t.Fatalf("frame %d %q: decoded frames differ (-json +fast):\n%s", i, fr,
				cmp.Diff(want, got, cmpopts.IgnoreUnexported(responseFrame{})))
		}
		if werr != nil {
			ew = dw.End(ew, canonical.StatusFailed, canonical.AsError(werr))
			eg = dg.End(eg, canonical.StatusFailed, canonical.AsError(gerr))
			break
		}
		ew, eg = dw.Frame(ew, want), dg.Frame(eg, got)
	}
	ew = dw.End(ew, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "stream ended"))
	eg = dg.End(eg, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "stream ended"))
	if !sameEvents(ew, eg) {
		t.Fatalf("events differ (-json +fast):\n%s", cmp.Diff(ew, eg, protocmp.Transform()))
	}
	if err := canonical.Validate(eg); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeFastDifferential: every recorded frame, and thousands of
// generated ones (texts with escapes, Unicode, invalid UTF-8 and control
// bytes, nulls, missing, extra, repeated, reordered and case-folded keys,
// whitespace, broken JSON), decode the same with and without the fast
// path, one by one and as streams.
func TestDecodeFastDifferential(t *testing.T) {
	files, _ := filepath.Glob("testdata/backend/*.frames")
	if len(files) == 0 {
		t.Fatal("no testdata/backend/*.frames")
	}
	fastRecorded := 0
	for _, file := range files {
		frames := readLines(t, file)
		for _, fr := range frames {
			if sameDecode(t, fr) {
				fastRecorded++
			}
		}
		sameStream(t, frames)
	}
	if fastRecorded == 0 {
		t.Fatal("no recorded frame took the fast path")
	}

	g := newFrameGen(1)
	const n = 20000
	fast := 0
	for range n {
		if sameDecode(t, g.frame()) {
			fast++
		}
	}
	// The generator must exercise both paths, or the test proves little.
	if fast < n/10 || fast > n*9/10 {
		t.Fatalf("fast path took %d of %d generated frames", fast, n)
	}
	t.Logf("fast path: %d recorded frames, %d of %d generated frames", fastRecorded, fast, n)

	for range 500 {
		sameStream(t, g.stream())
	}
	for range 2000 {
		sameStream(t, g.templateStream())
	}
}

// TestDecodeFastAgain: a frame that is the last one but for a plain
// content string takes the new content without more decoding; any other
// difference is decoded in full.
func TestDecodeFastAgain(t *testing.T) {
	const tmpl = `{"id":"il-1","created_at":%d,"chunk":{"model_id":"m","model_response":{"message":{"role":"assistant","content":%s}}%s}}`
	first := fmt.Sprintf(tmpl, 1, `"Hello"`, "")
	f, ok := decodeResponseFast([]byte(first))
	if !ok {
		t.Fatal("fast path refused", first)
	}
	for _, tc := range []struct {
		frame string
		again bool
	}{
		{fmt.Sprintf(tmpl, 1, `" world"`, ""), true},
		{fmt.Sprintf(tmpl, 1, `""`, ""), true},
		{fmt.Sprintf(tmpl, 1, `"🌾 héhé"`, ""), true},
		{fmt.Sprintf(tmpl, 1, `"Hello"`, ""), true},
		{fmt.Sprintf(tmpl, 2, `" world"`, ""), false},                            // a new second
		{fmt.Sprintf(tmpl, 1, `" world"`, `,"finish_reason":"complete"`), false}, // more after the content
		{fmt.Sprintf(tmpl, 1, `"a\nb"`, ""), false},                              // an escape
		{fmt.Sprintf(tmpl, 1, "\"a\xffb\"", ""), false},                          // invalid UTF-8
		{fmt.Sprintf(tmpl, 1, "\"a\x01b\"", ""), false},                          // a control byte
		{fmt.Sprintf(tmpl, 1, `"x","content":"y"`, ""), false},                   // the content repeated
		{fmt.Sprintf(tmpl, 1, `"x"`, "")[:60], false},                            // cut short
		{fmt.Sprintf(tmpl, 1, `"x"`, "") + " ", false},                           // more at the end
	} {
		want, _ := decodeResponseJSON([]byte(tc.frame))
		g := *f // (g.Chunk is still f's: look at g.chunk)
		if got := g.again([]byte(tc.frame)); got != tc.again {
			t.Errorf("again(%s) = %v, want %v", tc.frame, got, tc.again)
		} else if got && g.chunk.ModelResponse.Message.Content != want.Chunk.ModelResponse.Message.Content {
			t.Errorf("again(%s) took content %q, want %q", tc.frame, g.chunk.ModelResponse.Message.Content, want.Chunk.ModelResponse.Message.Content)
		}
		sameDecode(t, []byte(tc.frame))
	}
}

// TestDecodeFastCoverage pins what the fast path takes and what it leaves
// to encoding/json (either way the result is the same; this is about
// speed, and about the fast path not silently taking nothing).
func TestDecodeFastCoverage(t *testing.T) {
	const chunk = `"chunk":{"model_id":"m","provider_id":"p","model_name":"n","cached":false,"model_response":{"metadata":{"response_id":"r"},"message":{"role":"assistant","content":%s}}}`
	frame := func(content string) string { return `{"id":"il-1",` + fmt.Sprintf(chunk, content) + `}` }
	for _, tc := range []struct {
		frame string
		fast  bool
	}{
		{frame(`"Hello"`), true},
		{frame(`""`), true},
		{frame(`"héllo 🌾 中文"`), true},
		{`{"chunk":{"model_response":{"message":{"content":"x"}}},"id":"a"}`, true}, // reordered, fields missing
		{" {\n\t\"id\" : \"a\" ,\r\n \"chunk\" : { } }\n", true},                    // whitespace
		{`{"id":"a","created_at":1719245000,"router_id":"r","metadata":{"k":[1,-2.5e3,true,null,{"q":"a\"\u00e9\\"}]},"chunk":{},"extra":null}`, true},
		{frame(`"a\nb"`), true},             // an escape in the content: unquoted
		{frame(`"\u00e9"`), true},           // an escape in the content: unquoted
		{frame("\"a\xffb\""), true},         // invalid UTF-8 in the content becomes U+FFFD
		{`{"id":"a\nb","chunk":{}}`, false}, // an escape in another value read
		{frame("\"a\x01b\""), false},        // control byte: invalid JSON
		{frame(`null`), false},              // null
		{frame(`42`), false},                // wrong type
		{`{"id":"a","error":{"name":"x","message":"y"}}`, false},
		{`{"id":"a"}`, false},                                 // neither chunk nor error
		{`{"id":"","chunk":{}}`, false},                       // no id
		{`{"ID":"a","chunk":{}}`, false},                      // matched without case
		{`{"id":"a","Chunk":{},"chunk":{}}`, false},           // idem
		{"{\"id\":\"a\",\"chun\u212a\":{}}", false},           // Kelvin sign folds to k
		{`{"id":"a","\u0069d":"b","chunk":{}}`, false},        // escaped key
		{`{"id":"a","id":"b","chunk":{}}`, false},             // repeated key
		{`{"id":"a","chunk":{},"x":01}`, false},               // invalid JSON in a skipped value
		{`{"id":"a","chunk":{}}x`, false},                     // trailing garbage
		{`{"id":"a","chunk":{},"x":"\q"}`, false},             // invalid escape in a skipped value
		{`{"id":"a","chunk":{},"x":` + deep(70) + `}`, false}, // deeper than maxSkipDepth
		{`{"id":"a","chunk":{},"x":` + deep(60) + `}`, true},
	} {
		sameDecode(t, []byte(tc.frame))
		f, ok := decodeResponseFast([]byte(tc.frame))
		if ok != tc.fast {
			t.Errorf("fast path took %q: %v, want %v", tc.frame, ok, tc.fast)
		}
		if ok {
			releaseFrame(f)
		}
	}
}

func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// FuzzDecodeFast: on any input, decoding with the fast path gives the same
// frame, error and events as encoding/json alone, and nothing panics.
func FuzzDecodeFast(f *testing.F) {
	files, _ := filepath.Glob("testdata/backend/*.frames")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		for _, l := range readLines(f, file) {
			f.Add(l)
		}
	}
	g := newFrameGen(2)
	for range 50 {
		f.Add(g.frame())
		f.Add(bytes.Join(g.templateStream(), []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameDecode(t, data)
		var frames [][]byte
		for _, l := range bytes.Split(data, []byte("\n")) {
			frames = append(frames, l)
		}
		sameStream(t, frames)
	})
}

// deltaFrames returns n text-delta frames of one stream, as Glide sends
// them, each with its own content. With ticking set each frame is built in
// a new second (created_at and generated_at change), so that none is the
// one before but for its content (see lastFrame).
func deltaFrames(n int, ticking bool) [][]byte {
	words := []string{" world", " did", " the", " scarecrow", " win", "?", " Because", " he", " was", " outstanding", " in", " his", " field", " 🌾", " héhé", "."}
	var out [][]byte
	for i := range n {
		ts := 1719245000
		if ticking {
			ts += i
		}
		out = append(out, fmt.Appendf(nil, `{"id":"il-1","created_at":%d,"router_id":"my-router","chunk":{"model_id":"openai-gpt","provider_id":"openai","model_name":"gpt-3.5-turbo-0125","cached":false,"model_response":{"metadata":{"response_id":"chatcmpl-9d","system_fingerprint":"fp_1","generated_at":%d},"message":{"role":"assistant","content":%q}}}}`, ts, ts, words[i%len(words)]))
	}
	return out
}

// TestDecodeDeltaAllocs: a text delta costs at most two allocations, the
// content's string and the event, once the stream's message is open;
// whether the frame is the one before but for its content or not.
func TestDecodeDeltaAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops frames at random under the race detector")
	}
	for _, ticking := range []bool{false, true} {
		frames := deltaFrames(16, ticking)
		d, out := newResponseDecoder(nil)
		for _, fr := range frames {
			f, ok := decodeResponseFast(fr)
			if !ok {
				t.Fatalf("fast path refused %s", fr)
			}
			out = d.Frame(out, f)
		}
		if err := canonical.Validate(d.End(out, canonical.StatusCompleted, nil)); err != nil {
			t.Fatal(err)
		}
		d, out = newResponseDecoder(nil)
		out = d.Frame(out, must(decodeResponse(frames[0])))
		k := 0
		allocs := testing.AllocsPerRun(1000, func() {
			k++
			out = d.Frame(out[:0], must(decodeResponse(frames[k%len(frames)])))
			if len(out) != 1 || out[0].GetBlockDelta() == nil {
				t.Fatalf("frame gave %v, want one text delta", out)
			}
		})
		if allocs > 2 {
			t.Fatalf("ticking %v: %v allocations per text delta, want at most 2", ticking, allocs)
		}
	}
}

func must(f *responseFrame, err error) *responseFrame {
	if err != nil {
		panic(err)
	}
	return f
}

// BenchmarkFallbackJSON is the encoding/json path on the same frames, for
// reference: it decodes only the frames the fast path declines (error
// frames, escaped keys or ids, values of unusual types).
func BenchmarkFallbackJSON(b *testing.B) {
	benchmarkDecodeDelta(b, decodeResponseJSON, false)
}

// BenchmarkDecodeDeltaEscaped is BenchmarkDecodeDelta with a newline and
// a quote escaped in every content, as model output often has.
func BenchmarkDecodeDeltaEscaped(b *testing.B) {
	frames := deltaFrames(16, false)
	for i, f := range frames {
		frames[i] = bytes.Replace(f, []byte(`"content":"`), []byte(`"content":"\n\"`), 1)
	}
	d, out := newResponseDecoder(nil)
	out = d.Frame(out, must(decodeResponse(frames[0])))
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		k++
		f, err := decodeResponse(frames[k%len(frames)])
		if err != nil {
			b.Fatal(err)
		}
		if k == 1 && !strings.HasPrefix(f.Chunk.ModelResponse.Message.Content, "\n\"") {
			b.Fatalf("content %q", f.Chunk.ModelResponse.Message.Content)
		}
		out = d.Frame(out[:0], f)
	}
}

// BenchmarkDecodeDeltaTicking is BenchmarkDecodeDelta with every frame
// built in a new second: each one is decoded in full.
func BenchmarkDecodeDeltaTicking(b *testing.B) {
	benchmarkDecodeDelta(b, decodeResponse, true)
}

func benchmarkDecodeDelta(b *testing.B, decode func([]byte) (*responseFrame, error), ticking bool) {
	frames := deltaFrames(16, ticking)
	d, out := newResponseDecoder(nil)
	out = d.Frame(out, must(decode(frames[0])))
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		k++
		f, err := decode(frames[k%len(frames)])
		if err != nil {
			b.Fatal(err)
		}
		out = d.Frame(out[:0], f)
	}
}

// frameGen generates response frames: mostly Glide's chunk frames, with
// every variation the fast path must either decode exactly as
// encoding/json does or leave to it.
//
// Half the frames are well-formed Glide frames (fields in any order, maybe
// missing, extra fields, whitespace, non-ASCII text); in the other half any
// part may also be odd: escapes, control bytes, invalid UTF-8, nulls,
// values of other types, keys repeated or spelled otherwise, broken JSON.
type frameGen struct {
	r       *rand.Rand
	oddness float64 // 0 for a well-formed frame
}

func newFrameGen(seed uint64) *frameGen { return &frameGen{r: rand.New(rand.NewPCG(seed, seed))} }

func (g *frameGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *frameGen) chance(p float64) bool    { return g.r.Float64() < p }

// odd is chance for something only odd frames have.
func (g *frameGen) odd(p float64) bool { return g.r.Float64() < p*g.oddness }

var (
	plainPieces = []string{"Why", " did", " the", " scarecrow", "?", " 42", ".", ",", " ", "<b>", "a-b_c", "~", "\x7f",
		"é", "中文", " 🌾", "\u2028", "\uFFFD"}
	oddPieces = []string{`\n`, `\"`, `\\`, `\/`, `\b\f\r\t`, `\u00e9`, `\u00E9`, `\ud83c\udf3e`, `\uD83C\uDF3E`, `\ud800`,
		`\udc00`, `\ud800\u0041`, `\ud800\ud800`, `\udbff\udfff`, `\u0000`, `\uFFFD`, `\x`, `\u12`, `\uzzzz`, `\ug123`, `\u0g12`, `\u01g2`, `\u012g`, `\`,
		"\x01", "\x1f", "\t", "\n", "\xff", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", `"`}
	keyVariants = map[string][]string{
		"id":             {"ID", "Id", `\u0069d`, "i\\u0064"},
		"chunk":          {"Chunk", "CHUNK", "chun\u212a", `chun\u006b`},
		"content":        {"Content", "conTent"},
		"model_response": {"model_reſponse", "Model_Response"},
		"model_id":       {"MODEL_ID", "model_Id"},
		"role":           {"Role"},
		"cached":         {"Cached"},
		"metadata":       {"Metadata"},
		"response_id":    {"Response_ID"},
		"finish_reason":  {"Finish_Reason"},
		"message":        {"MESSAGE"},
		"error":          {"Error"},
	}
)

// text returns a string token, quotes included: mostly plain text, now
// and then with escapes (valid or not), raw control bytes or invalid UTF-8.
func (g *frameGen) text() string {
	var b strings.Builder
	b.WriteByte('"')
	odd := g.odd(0.25)
	for n := g.r.IntN(5); n > 0; n-- {
		if odd && g.chance(0.3) {
			b.WriteString(g.pick(oddPieces...))
		} else {
			b.WriteString(g.pick(plainPieces...))
		}
	}
	b.WriteByte('"')
	return b.String()
}

// any returns any JSON value (or, rarely, something that is not one).
func (g *frameGen) any(depth int) string {
	switch n := g.r.IntN(12); {
	case n < 3:
		return g.text()
	case n < 5:
		return g.pick("0", "-1", "42", "1719245000", "3.25", "-0.5e-3", "1E+2", "1e5", "-0")
	case n < 6:
		return g.pick("true", "false", "null")
	case n < 8 && depth < 4:
		var items []string
		for k := g.r.IntN(4); k > 0; k-- {
			items = append(items, g.any(depth+1))
		}
		return "[" + g.join(items) + "]"
	case n < 10 && depth < 4:
		var m [][2]string
		for k := g.r.IntN(4); k > 0; k-- {
			m = append(m, [2]string{g.pick(`"a"`, `"b"`, `"\u00e9"`, `"Z"`, `"a\"b"`, "\"\xff\""), g.any(depth + 1)})
		}
		return g.obj(m)
	case n < 11 && g.odd(1):
		return g.pick("01", "1.", ".5", "-", "+1", "1e", "tru", "nul", "[1,]", "{,}", `{"a"}`, `{"a":}`, "[", "{", `"abc`, "NaN")
	}
	return `"x"`
}

// ws returns whitespace between tokens: mostly none, as Glide sends it.
func (g *frameGen) ws() string {
	switch {
	case g.chance(0.9):
		return ""
	case g.odd(0.2):
		return g.pick("\f", "\v", "\u00a0", "\x00")
	}
	return g.pick(" ", "\n", "\t", "\r\n", "  ")
}

func (g *frameGen) join(items []string) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteString(g.ws() + "," + g.ws())
		}
		b.WriteString(it)
	}
	return b.String()
}

// obj writes an object of members (a quoted key, a value), now and then
// reordered, with a member repeated or an extra one.
func (g *frameGen) obj(members [][2]string) string {
	if g.chance(0.1) {
		g.r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	}
	if len(members) > 0 && g.odd(0.03) {
		members = append(members, members[g.r.IntN(len(members))])
	}
	if g.chance(0.1) {
		members = append(members, [2]string{g.pick(`"created_at"`, `"x"`, `"system_fingerprint"`, `"z_9"`), g.any(1)})
	}
	items := make([]string, len(members))
	for i, m := range members {
		items[i] = m[0] + g.ws() + ":" + g.ws() + m[1]
	}
	return "{" + g.ws() + g.join(items) + g.ws() + "}"
}

// member returns a member with key name (maybe spelled otherwise, or
// absent) whose value is val (maybe replaced by a value of any type).
func (g *frameGen) member(name, val string) [][2]string {
	switch {
	case g.chance(0.03):
		return nil
	case g.odd(0.03):
		val = g.pick("null", "1", "true", "{}", "[]", `"s"`)
	}
	key := name
	if vs := keyVariants[name]; len(vs) > 0 && g.odd(0.03) {
		key = g.pick(vs...)
	}
	return [][2]string{{`"` + key + `"`, val}}
}

// frame returns one generated frame.
func (g *frameGen) frame() []byte {
	g.oddness = 0
	if g.chance(0.5) {
		g.oddness = 1
	}
	if g.odd(0.02) {
		return []byte(g.pick("", "null", "[]", `"x"`, "{}", "{", "42", "\xff"))
	}
	var m [][2]string
	m = append(m, g.member("id", g.pick(`"il-1"`, `"req-2"`, `""`, g.text()))...)
	m = append(m, [2]string{`"created_at"`, g.pick("1719245000", "1719245001", g.any(0))})
	m = append(m, [2]string{`"router_id"`, g.pick(`"my-router"`, g.text())})
	if g.chance(0.3) {
		m = append(m, [2]string{`"metadata"`, g.any(0)})
	}
	if g.odd(0.2) {
		m = append(m, g.member("error", g.obj([][2]string{{`"name"`, g.pick(`"model_unavailable"`, `"all_models_unavailable"`)}, {`"message"`, g.text()}}))...)
	}
	if !g.odd(0.05) {
		m = append(m, g.member("chunk", g.chunk())...)
	}
	b := []byte(g.ws() + g.obj(m) + g.ws())
	switch {
	case g.odd(0.05):
		b = b[:g.r.IntN(len(b)+1)]
	case g.odd(0.05) && len(b) > 0:
		b[g.r.IntN(len(b))] = byte(g.r.IntN(256))
	}
	return b
}

func (g *frameGen) chunk() string {
	var md [][2]string
	md = append(md, g.member("response_id", g.pick(`"chatcmpl-9d"`, g.text()))...)
	if g.chance(0.5) {
		md = append(md, [2]string{`"system_fingerprint"`, g.text()}, [2]string{`"generated_at"`, g.any(0)})
	}
	var msg [][2]string
	msg = append(msg, g.member("role", g.pick(`"assistant"`, `"model"`, `""`, g.text()))...)
	msg = append(msg, g.member("content", g.text())...)
	var mr [][2]string
	mr = append(mr, g.member("metadata", g.obj(md))...)
	mr = append(mr, g.member("message", g.obj(msg))...)
	var c [][2]string
	c = append(c, g.member("model_id", g.pick(`"openai-gpt"`, `"cohere"`, g.text()))...)
	c = append(c, g.member("provider_id", g.pick(`"openai"`, `"cohere"`))...)
	c = append(c, g.member("model_name", g.pick(`"gpt-3.5-turbo-0125"`, `"command-light"`, g.text()))...)
	c = append(c, g.member("cached", g.pick("false", "true"))...)
	c = append(c, g.member("model_response", g.obj(mr))...)
	if g.chance(0.1) {
		c = append(c, g.member("finish_reason", g.pick(`"complete"`, `"max_tokens"`, `"error"`, `"other"`, g.text()))...)
	}
	return g.obj(c)
}

// templateStream returns the frames of one generated stream built as
// Glide builds them, from one template: mostly the content alone changes
// (so that the fast path finds most frames to be the last one again), now
// and then the timestamps, the model or the finish, or the content has an
// escape or more than a string.
func (g *frameGen) templateStream() [][]byte {
	g.oddness = 0
	meta, sp := "", ""
	if g.chance(0.5) {
		meta = `"metadata":` + g.any(0) + ","
	}
	if g.chance(0.2) {
		sp = " "
	}
	ts, model := 1719245000, `"openai-gpt"`
	var out [][]byte
	for n := 2 + g.r.IntN(12); n > 0; n-- {
		switch {
		case g.chance(0.1):
			ts++
		case g.chance(0.05):
			model = `"cohere"`
		case len(out) > 0 && g.chance(0.05):
			out = append(out, out[len(out)-1])
			continue
		}
		g.oddness = 0
		if g.chance(0.3) {
			g.oddness = 1
		}
		content, role := `"content":`+sp+g.text(), `"assistant"`
		switch {
		case g.chance(0.05):
			content = `"content":` + g.pick(`"x","content":"y"`, `"x","role":"user"`, `"x"} ,"extra":{"a":"`, `"x" `)
		case g.chance(0.05):
			content, role = `"name":"x"`, g.pick(`"user"`, `"system"`) // no content
		}
		finish := ""
		if n == 1 && g.chance(0.5) {
			finish = `,"finish_reason":"complete"`
		}
		out = append(out, fmt.Appendf(nil, `{"id":"il-1",%s"created_at":%d,"router_id":"r","chunk":{"model_id":%s,"provider_id":"p","model_name":"n","cached":false,"model_response":{"metadata":{"response_id":"c-1","generated_at":%d},"message":{"role":%s,%s%s}}%s}}`,
			meta, ts, model, ts, role, sp, content, finish))
	}
	return out
}

// stream returns the frames of one generated stream: deltas of one or two
// models, maybe a fallback error between them, maybe a finish.
func (g *frameGen) stream() [][]byte {
	var out [][]byte
	for n := 1 + g.r.IntN(12); n > 0; n-- {
		if g.chance(0.05) {
			out = append(out, []byte(`{"id":"il-1","error":{"name":"model_unavailable","message":"provider is not available"}}`))
		}
		out = append(out, g.frame())
	}
	return out
}
