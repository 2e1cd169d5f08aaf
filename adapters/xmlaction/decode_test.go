package xmlaction

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/chunk"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

type fixture struct {
	name string
	path string // without extension
	wire []byte
}

func decodeFixtures(t testing.TB) []fixture {
	t.Helper()
	files, err := filepath.Glob("testdata/decode/*.wire")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []fixture
	for _, f := range files {
		wire, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := strings.TrimSuffix(f, ".wire")
		out = append(out, fixture{name: filepath.Base(p), path: p, wire: wire})
	}
	return out
}

// golden compares got with the file, or rewrites it under -update.
func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (run with -update to accept):\n%s", file, cmp.Diff(string(want), string(got)))
	}
}

// eventsJSON is one compact proto3-JSON event per line (protojson's
// whitespace is normalised by json.Compact, so the bytes are stable).
func eventsJSON(t testing.TB, evs []*canonical.Event) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, ev := range evs {
		b, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&out, b); err != nil {
			t.Fatal(err)
		}
		out.WriteByte('\n')
	}
	return out.Bytes()
}

func render(evs []*canonical.Event) []byte {
	enc := NewEncoder()
	var out []byte
	for _, ev := range evs {
		out = enc.Encode(out, ev)
	}
	return enc.End(out)
}

// TestDecodeGolden decodes each fixture whole and compares the events and
// their rendering with the golden files.
func TestDecodeGolden(t *testing.T) {
	for _, fx := range decodeFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			evs := decodeChunks(t, Config{}, [][]byte{fx.wire})
			golden(t, fx.path+".events.json", eventsJSON(t, normalize(evs)))
			golden(t, fx.path+".out", render(evs))
		})
	}
}

// TestGoldenEventsParse checks each golden event file against the model
// and proto3 JSON (so a hand edit cannot slip through).
func TestGoldenEventsParse(t *testing.T) {
	for _, fx := range decodeFixtures(t) {
		data, err := os.ReadFile(fx.path + ".events.json")
		if err != nil {
			t.Fatal(err)
		}
		var evs []*canonical.Event
		for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			ev := &canonical.Event{}
			if err := protojson.Unmarshal(line, ev); err != nil {
				t.Fatalf("%s: %v", fx.name, err)
			}
			evs = append(evs, ev)
		}
		if err := canonical.Validate(evs); err != nil {
			t.Errorf("%s: %v", fx.name, err)
		}
	}
}

// TestRoundTrip: parse(render(events)) == events for every golden stream.
func TestRoundTrip(t *testing.T) {
	for _, fx := range decodeFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			want := normalize(decodeChunks(t, Config{}, [][]byte{fx.wire}))
			text := render(want)
			got := normalize(decodeChunks(t, Config{}, [][]byte{text}))
			if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
				t.Errorf("re-parsed rendering differs (-want +got):\n%s\nrendering:\n%s", d, text)
			}
			if again := render(got); !bytes.Equal(again, text) {
				t.Errorf("rendering is not stable:\n%s\n---\n%s", text, again)
			}
		})
	}
}

// actionsOf decodes chunks and describes the actions handed to the
// executor, in order.
func actionsOf(t testing.TB, cfg Config, chunks [][]byte) []string {
	t.Helper()
	d := NewDecoder(cfg)
	d.track = true
	var acts []string
	for _, c := range chunks {
		if _, err := d.Feed(c, nil); err != nil {
			t.Fatal(err)
		}
		for _, m := range d.takeMarks() {
			if m.act != nil {
				acts = append(acts, describe(m.act))
			}
		}
	}
	if _, err := d.End(nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range d.takeMarks() {
		if m.act != nil {
			acts = append(acts, describe(m.act))
		}
	}
	return acts
}

func describe(a *action) string {
	s := fmt.Sprintf("%s type=%s mode=%s name=%q params=%s key=%q deps=%v timeout=%s retry=%d on_error=%s thought=%v dup=%v",
		a.id, a.typ, a.mode, a.name, marshalCompact(a.params), a.outputKey, a.dependsOn, a.timeout, a.retry, a.onError, a.inThought, a.dup)
	if a.err != nil {
		s += " err=" + a.err.kind
	}
	return s
}

// TestDecodeRechunk: every 2-way split, a byte-at-a-time feed and 1,000
// random k-way splits of each fixture yield the same events (deltas of a
// block merged) and the same actions as the unsplit input.
func TestDecodeRechunk(t *testing.T) {
	for _, fx := range decodeFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			want := normalize(decodeChunks(t, Config{}, [][]byte{fx.wire}))
			wantActs := actionsOf(t, Config{}, [][]byte{fx.wire})
			check := func(how string, chunks [][]byte) {
				t.Helper()
				got, acts := decodeAll(t, chunks)
				if !equalEvents(want, got) {
					t.Fatalf("%s: events differ (-whole +split):\n%s", how, cmp.Diff(want, got, protocmp.Transform()))
				}
				if !slices.Equal(wantActs, acts) {
					t.Fatalf("%s: actions differ (-whole +split):\n%s", how, cmp.Diff(wantActs, acts))
				}
			}
			for i := 0; i <= len(fx.wire); i++ {
				check(fmt.Sprintf("split at %d", i), chunk.TwoWay(fx.wire, i))
			}
			check("bytes", chunk.Bytes(fx.wire))
			for seed := uint64(0); seed < 1000; seed++ {
				k := 2 + int(seed)%max(1, min(len(fx.wire), 64))
				check(fmt.Sprintf("seed %d k %d", seed, k), chunk.Split(fx.wire, seed, k))
			}
		})
	}
}

// line is a compact description of a block or tool error.
func lines(evs []*canonical.Event) []string {
	var out []string
	var open canonical.BlockType
	var id, name, text string
	for _, ev := range normalize(evs) {
		switch k := ev.GetKind().(type) {
		case *canonical.KindBlockStart:
			open, id, name, text = k.BlockStart.GetType(), k.BlockStart.GetId(), k.BlockStart.GetName(), ""
		case *canonical.KindBlockDelta:
			text = k.BlockDelta.GetText()
		case *canonical.KindBlockFinish:
			switch open {
			case canonical.BlockToolCall:
				out = append(out, fmt.Sprintf("action %s %q %s", id, name, text))
			default:
				out = append(out, fmt.Sprintf("%s %q", blockName(open), text))
			}
		case *canonical.KindToolFailed:
			out = append(out, fmt.Sprintf("failed %s %s", k.ToolFailed.GetToolCallId(), ev.GetExtensions()[extError].GetStringValue()))
		}
	}
	return out
}

// TestDecodeReference checks the table "What the v1.0 parser gets wrong,
// and Interlingua behaviour" of the reference, row by row, and that it
// does not depend on tokenization (one byte per token).
func TestDecodeReference(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"<thought>" + strings.Repeat("y", 45) + "</thought><response>R</response>",
			[]string{`thought "` + strings.Repeat("y", 45) + `"`, `text "R"`}},
		{"preamble text <thought>t</thought> middle <response>r</response> trailing",
			[]string{`text "preamble text "`, `thought "t"`, `text " middle "`, `text "r"`, `text " trailing"`}},
		{"<response>a <b>bold</b> and x<y and z>w end</response>",
			[]string{`text "a <b>bold</b> and x<y and z>w end"`}},
		{"<thought>a<response>b</response>c</thought>",
			[]string{`thought "a"`, `text "b"`, `text "c"`}},
		{"<thought>a</response>b</thought>",
			[]string{`thought "a</response>b"`}},
		{`<action type="tool" id="x">{"name": "w", </action>`,
			[]string{`action x "w" {"name": "w", `, `failed x invalid_json`}},
		{`<action>[1,2]</action>`,
			[]string{`action action-1 "" [1,2]`, `failed action-1 not_an_object`}},
		{`<action id="h">{"name":"w","parameters":{"html":"<p>hi</p>"}}</action>`,
			[]string{`action h "w" {"name":"w","parameters":{"html":"<p>hi</p>"}}`}},
		{`<action id="q">{"name":"n",<thought>x</thought> "p":1}</action>`,
			[]string{`action q "n" {"name":"n",<thought>x</thought> "p":1}`, `failed q invalid_json`}},
		{`<action type=tool mode=async>{"name":"n"}</action><action id=action-1>{"name":"m"}</action>`, // no id: action-<n>, and it runs; the default's id is taken
			[]string{`action action-1 "n" {"name":"n"}`, `action action-1 "m" {"name":"m"}`, `failed action-1 duplicate_id`}},
		{`<action id="b" depends_on="a">{"name":"n"}</action>`,
			[]string{`action b "n" {"name":"n"}`}},
		{`<Thought>hi</Thought><response>ok</response>`,
			[]string{`thought "hi"`, `text "ok"`}},
		{`<response/>after`,
			[]string{`text ""`, `text "after"`}},
		{`<action></action>`,
			[]string{`action action-1 "" `, `failed action-1 empty_body`}},
		{`<action id="u">{"name":"n"}`,
			[]string{`failed u unterminated_action`, `action u "n" {"name":"n"}`}},
		{`<thought>never closed`,
			[]string{`thought "never closed"`}},
		{`<thought>t1<action id="a">{"name":"n"}</action>t2</thought>`,
			[]string{`thought "t1"`, `action a "n" {"name":"n"}`, `thought "t2"`}},
		{`<response>one</response>junk<response>two</response>`,
			[]string{`text "one"`, `text "junk"`, `text "two"`}},
		{"<response>\nAnswer: $wd\n</response>",
			[]string{`text "\nAnswer: $wd\n"`}},
	}
	for _, c := range cases {
		for _, chunks := range [][][]byte{{[]byte(c.in)}, chunk.Bytes([]byte(c.in))} {
			got := lines(decodeChunks(t, Config{}, chunks))
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("%q (%d chunks): (-want +got)\n%s", c.in, len(chunks), d)
			}
		}
	}
}

// TestDecodeActions checks the parsed action fields.
func TestDecodeActions(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{`<action id="b" depends_on="a, c" mode="async">{"name":"n","depends_on":["c","d"]}</action>`,
			[]string{`b type=tool mode=async name="n" params={} key="" deps=[c d a] timeout=0s retry=0 on_error=fail thought=false dup=false`}},
		{`<action type=tool mode=async>{"name":"n"}</action>`,
			[]string{`action-1 type=tool mode=async name="n" params={} key="" deps=[] timeout=0s retry=0 on_error=fail thought=false dup=false`}},
		{`<action id="x" type="agent" mode="sync">{"name":"a","parameters":{"n":1.50,"s":"$k"},"output_key":"out","timeout":2.5,"on_error":"retry","depends_on":"y"}</action>`,
			[]string{`x type=agent mode=sync name="a" params={"n":1.50,"s":"$k"} key="out" deps=[y] timeout=2.5s retry=3 on_error=retry thought=false dup=false`}},
		{`<action id="r">{"name":"a","retry":2,"on_error":"skip"}</action><action id="r">{"name":"b"}</action>`,
			[]string{`r type=tool mode=sync name="a" params={} key="" deps=[] timeout=0s retry=2 on_error=skip thought=false dup=false`,
				`r type=tool mode=sync name="b" params={} key="" deps=[] timeout=0s retry=0 on_error=fail thought=false dup=true err=duplicate_id`}},
		{`<thought>x<action id="t" mode="fire_and_forget">{"name":"f"}</action></thought>`,
			[]string{`t type=tool mode=fire_and_forget name="f" params={} key="" deps=[] timeout=0s retry=0 on_error=fail thought=true dup=false`}},
	}
	for _, c := range cases {
		if d := cmp.Diff(c.want, actionsOf(t, Config{}, [][]byte{[]byte(c.in)})); d != "" {
			t.Errorf("%q: (-want +got)\n%s", c.in, d)
		}
	}
}

// TestDecodeStreamsEarly checks that text is emitted as soon as it is
// known (no waiting for the closing tag), that only a possible tag prefix
// is held, and that an action's block starts once its name is known.
func TestDecodeStreamsEarly(t *testing.T) {
	d := NewDecoder(Config{})
	feed := func(s string) []string {
		t.Helper()
		evs, err := d.Feed([]byte(s), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ev := range evs {
			switch k := ev.GetKind().(type) {
			case *canonical.KindBlockStart:
				out = append(out, "start "+blockName(k.BlockStart.GetType())+" "+k.BlockStart.GetName())
			case *canonical.KindBlockDelta:
				out = append(out, "delta "+k.BlockDelta.GetText())
			case *canonical.KindBlockFinish:
				out = append(out, "finish")
			}
		}
		return out
	}
	steps := []struct {
		in   string
		want []string
	}{
		{"<thou", nil},
		{"ght>I think", []string{"start thought ", "delta I think"}},
		{" more </th", []string{"delta  more "}},
		{"ink", []string{"delta </think"}},
		{"</thought><action id=\"a\">{\"na", []string{"finish"}},
		{"me\": \"web_", nil},
		{"scraper\", \"par", []string{"start tool_call web_scraper", `delta {"name": "web_scraper", "par`}},
		{"ameters\": {\"html\": \"</acti", []string{`delta ameters": {"html": "`}},
		// A </action> inside a JSON string holds the deltas back until the
		// real end is seen (an unbalanced quote would cut the body there).
		{"on>\"}}</act", nil},
		{"ion><response>caf\xc3", []string{`delta </action>"}}`, "finish", "start text ", "delta caf"}},
		{"\xa9 $na", []string{"delta é "}},
		{"me!", []string{"delta $name", "delta !"}},
	}
	for _, s := range steps {
		if d := cmp.Diff(s.want, feed(s.in)); d != "" {
			t.Fatalf("after %q: (-want +got)\n%s", s.in, d)
		}
	}
}

// TestDecodeLimits checks the body, tag and action-count limits.
func TestDecodeLimits(t *testing.T) {
	cfg := Config{MaxActionBytes: 32, MaxTagBytes: 40, MaxActions: 2}
	cases := []struct {
		in   string
		want []string
	}{
		// Over MaxActionBytes: the body is failed and skipped to </action>.
		{`<action id="a">{"name":"n","parameters":{"x":"` + strings.Repeat("z", 100) + `"}}</action><response>r</response>`,
			[]string{`action a "n" {"name":"n","parameters":{"x":"z`, `failed a body_too_large`, `text "r"`}},
		// Over MaxActionBytes with a </action> inside a string: cut there.
		{`<action id="b">{"name":"n","p":"x</action>` + strings.Repeat("w", 40) + `<response>r</response>`,
			[]string{`action b "n" {"name":"n","p":"x`, `failed b invalid_json`, `text "` + strings.Repeat("w", 40) + `"`, `text "r"`}},
		// An opening tag longer than MaxTagBytes is text.
		{`<action id="` + strings.Repeat("i", 40) + `">{}</action>`,
			[]string{`text "<action id=\"` + strings.Repeat("i", 40) + `\">{}"`}},
		// More than MaxActions actions.
		{`<action id="1">{"name":"n"}</action><action id="2">{"name":"n"}</action><action id="3">{"name":"n"}</action>`,
			[]string{`action 1 "n" {"name":"n"}`, `action 2 "n" {"name":"n"}`, `action 3 "n" {"name":"n"}`, `failed 3 too_many_actions`}},
	}
	for _, c := range cases {
		for _, chunks := range [][][]byte{{[]byte(c.in)}, chunk.Bytes([]byte(c.in))} {
			got := lines(decodeChunks(t, cfg, chunks))
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("%q (%d chunks): (-want +got)\n%s", c.in, len(chunks), d)
			}
		}
	}
}

func TestFeedAfterEnd(t *testing.T) {
	d := NewDecoder(Config{})
	if _, err := d.End(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Feed([]byte("x"), nil); canonical.CodeOf(err) != canonical.CodeFailedPrecondition {
		t.Fatalf("Feed after End: %v", err)
	}
	if out, err := d.End(nil); err != nil || len(out) != 0 {
		t.Fatalf("second End: %v %v", out, err)
	}
}

// FuzzDecode: no panic, output always valid, the same for any chunking,
// and a bounded amount held between chunks.
func FuzzDecode(f *testing.F) {
	for _, fx := range decodeFixtures(f) {
		f.Add(fx.wire, uint64(len(fx.wire)))
	}
	cfg := Config{MaxActionBytes: 64, MaxTagBytes: 48, MaxActions: 8}
	f.Fuzz(func(t *testing.T, wire []byte, seed uint64) {
		want := normalize(decodeChunks(t, cfg, [][]byte{wire}))
		chunks := chunk.Split(wire, seed, 1+int(seed%17))
		d := NewDecoder(cfg)
		var got []*canonical.Event
		for _, c := range chunks {
			var err error
			if got, err = d.Feed(c, got); err != nil {
				t.Fatal(err)
			}
			if n := d.buffered(); n > cfg.MaxActionBytes+maxWhitespace+cfg.MaxTagBytes {
				t.Fatalf("decoder holds %d bytes between chunks", n)
			}
		}
		got, _ = d.End(got)
		if err := canonical.Validate(got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, normalize(got), protocmp.Transform()); d != "" {
			t.Fatalf("chunking changed the events (-whole +split):\n%s", d)
		}
		// The rendering parses back to the same events, unless a body was
		// cut at MaxActionBytes (the rendering holds only what was kept) or
		// leaves a JSON string open (doc.go: a stated degradation).
		bodies := map[uint32]string{}
		for _, ev := range want {
			if ev.GetExtensions()[extError].GetStringValue() == kindBodyTooLarge {
				return
			}
			if bs := ev.GetBlockStart(); bs != nil {
				bodies[bs.GetIndex()] = ""
			}
			if bd := ev.GetBlockDelta(); bd != nil {
				bodies[bd.GetIndex()] += bd.GetText()
			}
			if ev.GetBlockFinish() != nil && openString(bodies[ev.GetBlockFinish().GetIndex()]) {
				return
			}
			for _, v := range ev.GetExtensions()[extAttributes].GetStructValue().GetFields() {
				if attrForm(v.GetStringValue()) == '!' {
					return // a stated degradation: no form carries it
				}
			}
		}
		// A rendered tag is in a canonical form that may be a little longer
		// than the original (quoted values), and an invalid byte becomes a
		// 3-byte U+FFFD: parse it with room for that.
		wide := cfg
		wide.MaxTagBytes *= 4
		wide.MaxActionBytes *= 4
		back := normalize(decodeChunks(t, wide, [][]byte{render(want)}))
		if d := cmp.Diff(want, back, protocmp.Transform()); d != "" {
			t.Fatalf("render/parse round trip (-want +got):\n%s", d)
		}
	})
}

// equalEvents is proto.Equal over the events, with a fast path for the
// block events that make up most of them.
func equalEvents(a, b []*canonical.Event) bool {
	return slices.EqualFunc(a, b, func(x, y *canonical.Event) bool {
		switch k := x.GetKind().(type) {
		case *canonical.KindBlockDelta:
			o := y.GetBlockDelta()
			return o != nil && len(x.GetNamespace()) == 0 && len(y.GetNamespace()) == 0 &&
				k.BlockDelta.GetIndex() == o.GetIndex() && k.BlockDelta.GetText() == o.GetText() && len(o.GetData()) == 0 && len(k.BlockDelta.GetData()) == 0
		case *canonical.KindBlockFinish:
			o := y.GetBlockFinish()
			return o != nil && len(x.GetNamespace()) == 0 && len(y.GetNamespace()) == 0 && k.BlockFinish.GetIndex() == o.GetIndex()
		}
		return proto.Equal(x, y)
	})
}

// decodeAll decodes chunks in one pass, returning the validated events
// with a block's adjacent deltas merged (in place) and the actions.
func decodeAll(t testing.TB, chunks [][]byte) ([]*canonical.Event, []string) {
	t.Helper()
	d := NewDecoder(Config{})
	d.track = true
	var evs []*canonical.Event
	var acts []string
	take := func() {
		for _, m := range d.takeMarks() {
			if m.act != nil {
				acts = append(acts, describe(m.act))
			}
		}
	}
	for _, c := range chunks {
		evs, _ = d.Feed(c, evs)
		take()
	}
	evs, _ = d.End(evs)
	take()
	if err := canonical.Validate(evs); err != nil {
		t.Fatal(err)
	}
	out := evs[:0]
	for _, ev := range evs {
		if dl := ev.GetBlockDelta(); dl != nil && len(out) > 0 {
			if p := out[len(out)-1].GetBlockDelta(); p != nil {
				p.Text += dl.GetText()
				continue
			}
		}
		out = append(out, ev)
	}
	return out, acts
}

// benchInput is about 1 MiB of model output: long thoughts and responses
// (the bulk of real output) with an action between them.
func benchInput() []byte {
	para := strings.Repeat("The model reasons about the data in plain words, with numbers 1 < 2 and a few symbols. ", 24)
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "<thought>\n%s\n</thought>\n", para)
		fmt.Fprintf(&b, `<action type="tool" mode="async" id="a%d">`+"\n"+`{"name": "web_scraper", "parameters": {"url": "https://example.com/%d"}, "output_key": "k%d"}`+"\n</action>\n", i, i, i)
		fmt.Fprintf(&b, "<response>\n%s $k%d\n</response>\n", para, i)
	}
	return []byte(b.String())
}

// BenchmarkDecode measures decoder throughput (MB/s) with 4 KiB chunks and
// with 4-byte tokens (ns per token), as an LLM streams it.
func BenchmarkDecode(b *testing.B) {
	mixed := benchInput()
	text := bytes.ReplaceAll(mixed, []byte("<action "), []byte("<actio "))
	for _, bc := range []struct {
		name string
		data []byte
		size int
	}{{"mixed/chunk=4096", mixed, 4096}, {"text/chunk=4096", text, 4096}, {"mixed/chunk=16", mixed, 16}, {"mixed/chunk=4", mixed, 4}} {
		data, size := bc.data, bc.size
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var out []*canonical.Event
			for b.Loop() {
				d := NewDecoder(Config{MaxActions: 1 << 20})
				for i := 0; i < len(data); i += size {
					out, _ = d.Feed(data[i:min(i+size, len(data))], out[:0])
				}
				out, _ = d.End(out[:0])
			}
			tokens := (len(data) + size - 1) / size
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tokens), "ns/token")
		})
	}
}

// openString reports whether body leaves a JSON string open: an odd
// number of quotes that are not escaped inside a string.
func openString(body string) bool {
	in := false
	for i := 0; i < len(body); i++ {
		switch {
		case in && body[i] == '\\':
			i++
		case body[i] == '"':
			in = !in
		}
	}
	return in
}

// BenchmarkDecodeDelta is the per-token cost of the prose path: a
// decoder in the middle of a text block fed one model token per Feed,
// each becoming one text delta.
func BenchmarkDecodeDelta(b *testing.B) { benchDecodeToken(b, "a token ", "a token ") }

// BenchmarkDecodeDeltaEntity is the same with an entity in the token.
func BenchmarkDecodeDeltaEntity(b *testing.B) { benchDecodeToken(b, "x &amp; y ", "x & y ") }

func benchDecodeToken(b *testing.B, tok, text string) {
	d := NewDecoder(Config{})
	token := []byte(tok)
	out, err := d.Feed([]byte("Hello "), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(token)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ = d.Feed(token, out[:0])
	}
	if len(out) != 1 || out[0].GetBlockDelta().GetText() != text {
		b.Fatalf("a token decoded to %v, want one text delta %q", out, text)
	}
}
