package agent

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/chunk"
)

// sseSeeds renders the encoder's golden transcripts as SSE streams, in the
// frontend's framing, with heartbeats and, for one, CRLF line ends.
func sseSeeds(t testing.TB) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "encode", "*.golden"))
	if len(files) == 0 {
		t.Fatal("no testdata/encode/*.golden")
	}
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.WriteString(": heartbeat\n\n")
		for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			b.WriteString("id: " + strings.Repeat("", i) + "x\nevent: e\ndata: ")
			b.Write(line)
			b.WriteString("\n\n")
			if i%3 == 0 {
				b.WriteString(": heartbeat\n\n")
			}
		}
		name := strings.TrimSuffix(filepath.Base(f), ".golden")
		out[name] = b.Bytes()
		out[name+"-crlf"] = bytes.ReplaceAll(b.Bytes(), []byte("\n"), []byte("\r\n"))
	}
	return out
}

// decodeSSE decodes a stream fed in chunks.
func decodeSSE(chunks [][]byte) ([]*canonical.Event, error) {
	d := NewSSEDecoder(0, 1<<16)
	var out []*canonical.Event
	err := chunk.Feed(chunks, func(c []byte) (err error) {
		out, err = d.Feed(c, out)
		return err
	})
	if err != nil {
		return out, err
	}
	return d.End(out)
}

func sameEvents(t testing.TB, want, got []*canonical.Event) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(want[i], got[i]) {
			t.Fatalf("event %d differs:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}

// validate checks copies of events (stamped with a thread and run).
func validate(t testing.TB, events []*canonical.Event) {
	t.Helper()
	cp := make([]*canonical.Event, len(events))
	for i, e := range events {
		cp[i] = proto.Clone(e).(*canonical.Event)
		cp[i].ThreadId, cp[i].RunId = "t", "r"
	}
	if err := canonical.Validate(cp); err != nil {
		t.Fatalf("decoder output breaks the canonical model: %v", err)
	}
}

// TestSSEDecoderRechunk: cutting the stream anywhere (every two-way cut,
// and one byte at a time) changes nothing, and the output is a valid
// canonical run.
func TestSSEDecoderRechunk(t *testing.T) {
	for name, wire := range sseSeeds(t) {
		t.Run(name, func(t *testing.T) {
			want, err := decodeSSE([][]byte{wire})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, want)
			got, err := decodeSSE(chunk.Bytes(wire))
			if err != nil {
				t.Fatal(err)
			}
			sameEvents(t, want, got)
			for i := 0; i <= len(wire); i += 1 + len(wire)/97 {
				got, err := decodeSSE(chunk.TwoWay(wire, i))
				if err != nil {
					t.Fatal(err)
				}
				sameEvents(t, want, got)
			}
		})
	}
}

// TestDecoderRoundTrip: every golden transcript decodes to a canonical run
// that encodes back to the same frames.
func TestDecoderRoundTrip(t *testing.T) {
	for name, build := range encodeCases {
		events := build()
		for _, e := range events {
			e.TimeUnixNano = fixedNow.UnixNano()
		}
		frames := encodeRun(t, events)
		d := &Decoder{}
		var decoded []*canonical.Event
		for _, f := range frames {
			var err error
			if decoded, err = d.Feed(f, decoded); err != nil {
				t.Fatal(err)
			}
		}
		decoded = d.End(decoded)
		validate(t, decoded)
		again := encodeRun(t, decoded)
		if name == "agent" || name == "interrupt" || name == "subgraph" || name == "failure" || name == "cancelled" {
			if !bytes.Equal(bytes.Join(frames, []byte("\n")), bytes.Join(again, []byte("\n"))) {
				t.Errorf("%s: the round trip changed the wire:\n--- first\n%s\n--- again\n%s", name, bytes.Join(frames, []byte("\n")), bytes.Join(again, []byte("\n")))
			}
		}
	}
}

func TestDecoderRepairsUpstreams(t *testing.T) {
	frames := []string{
		`{"type":"success","id":1,"result":{}}`, // a response: ignored
		`{"type":"event","seq":1,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-delta","index":3,"delta":{"type":"text-delta","text":"no start"}}}}`,
		`{"type":"event","seq":2,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-delta","index":5,"delta":{"type":"reasoning-delta","reasoning":"other block"}}}}`,
		`{"type":"event","seq":3,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-delta","index":5,"delta":{"type":"future-delta","x":1}}}}`,
		`{"type":"event","seq":4,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-delta","index":6,"delta":{"type":"block-delta","fields":{"type":"tool_call_chunk","id":"c","name":"n","args":"{\"a\""}}}}}`,
		`{"type":"event","seq":5,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-delta","index":6,"delta":{"type":"block-delta","fields":{"type":"tool_call_chunk","args":"{\"a\":1}"}}}}}`,
		`{"type":"event","seq":6,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-finish","index":7,"content":{"type":"text","text":"whole"}}}}`,
		`{"type":"event","seq":7,"method":"messages","params":{"namespace":["sub"],"data":{"event":"message-start","role":"ai","id":"m"}}}`,
		`{"type":"event","seq":8,"method":"messages","params":{"namespace":["sub"],"data":{"event":"content-block-start","index":0,"content":{"type":"non_standard","value":{"k":1}}}}}`,
		`{"type":"event","seq":9,"method":"lifecycle","params":{"namespace":["sub"],"data":{"event":"failed"}}}`,
		`{"type":"event","seq":10,"method":"bogus","params":{"namespace":[],"data":{}}}`,
		`{"type":"event","seq":11,"method":"lifecycle","params":{"namespace":[],"data":{"event":"completed"}}}`,
		`{"type":"event","seq":12,"method":"messages","params":{"namespace":[],"data":{"event":"message-start","role":"ai","id":"late"}}}`,
	}
	d := &Decoder{}
	var out []*canonical.Event
	for _, f := range frames {
		var err error
		if out, err = d.Feed([]byte(f), out); err != nil {
			t.Fatal(err)
		}
	}
	validate(t, d.End(out))
	if !d.Ended() || out[len(out)-1].GetLifecycle().GetStatus() != canonical.StatusCompleted {
		t.Fatal("the run did not end completed")
	}
	var text string
	for _, e := range out {
		text += e.GetBlockDelta().GetText()
	}
	if text != "no startother block{\"a\":1}whole" {
		t.Fatalf("texts: %q", text)
	}
	if _, err := d.Feed([]byte(`not json`), nil); canonical.CodeOf(err) != canonical.CodeInvalidArgument {
		t.Fatalf("malformed frame: %v", err)
	}
	// AfterSeq skips the replay of earlier runs.
	d2 := &Decoder{AfterSeq: 11}
	out, _ = d2.Feed([]byte(frames[11]), nil)
	if len(out) != 0 {
		t.Fatalf("replayed event decoded: %v", out)
	}
}

// FuzzSSEDecoder: any bytes, cut anywhere, decode to the same events (or
// fail the same way), never panic, and decode to a valid canonical run.
func FuzzSSEDecoder(f *testing.F) {
	for _, wire := range sseSeeds(f) {
		f.Add(wire, uint64(1))
	}
	f.Add([]byte("data: {\"type\":\"event\",\"method\":\"messages\",\"params\":{\"data\":{\"event\":\"content-block-delta\",\"delta\":{\"type\":\"data-delta\",\"data\":\"QUJD\"}}}}\n\n"), uint64(7))
	f.Fuzz(func(t *testing.T, wire []byte, seed uint64) {
		want, werr := decodeSSE([][]byte{wire})
		got, gerr := decodeSSE(chunk.Split(wire, seed, 1+int(seed%9)))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("error depends on chunking: %v / %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		sameEvents(t, want, got)
		validate(t, want)
	})
}

// BenchmarkDecodeDelta is the backend's per-delta cost: one SSE text-delta
// event to a canonical event.
func BenchmarkDecodeDelta(b *testing.B) {
	d := NewSSEDecoder(0, 0)
	start := []byte("data: {\"type\":\"event\",\"seq\":1,\"method\":\"messages\",\"params\":{\"namespace\":[],\"timestamp\":1710000000000,\"data\":{\"event\":\"content-block-start\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"\"}}}}\n\n")
	out, _ := d.Feed(start, nil)
	frame := []byte("id: 2\nevent: messages\ndata: {\"type\":\"event\",\"event_id\":\"2\",\"seq\":2,\"method\":\"messages\",\"params\":{\"namespace\":[],\"timestamp\":1710000000000,\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\" token\"}}}}\n\n")
	b.ReportAllocs()
	for b.Loop() {
		out, _ = d.Feed(frame, out[:0])
		if len(d.ns[""].acc) > 1<<20 {
			d.ns[""].acc = d.ns[""].acc[:0]
		}
	}
}

// A model call failing inside a message that the run then gets past (a
// fallback) is a non-terminal error event after the message's finish;
// when the run fails with it instead, only the terminal event carries it.
func TestDecoderMessageErrorThenContinue(t *testing.T) {
	ev := func(method, data string) []byte {
		return []byte(`{"type":"event","method":"` + method + `","params":{"namespace":[],"timestamp":1710000000000,"data":` + data + `}}`)
	}
	start := [][]byte{
		ev("messages", `{"event":"message-start","role":"ai","id":"m1"}`),
		ev("messages", `{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}`),
		ev("messages", `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"first"}}`),
		ev("messages", `{"event":"error","message":"model-1 is unavailable","code":"unavailable"}`),
	}
	for _, tc := range []struct {
		name string
		rest [][]byte
		want []string // kinds, in order
	}{
		{"fallback", [][]byte{
			ev("messages", `{"event":"message-start","role":"ai","id":"m2"}`),
			ev("messages", `{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}`),
			ev("messages", `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"second"}}`),
			ev("messages", `{"event":"message-finish","reason":"stop"}`),
			ev("lifecycle", `{"event":"completed"}`),
		}, []string{"messageStart", "blockStart", "blockDelta", "blockFinish", "messageFinish", "error", "messageStart", "blockStart", "blockDelta", "blockFinish", "messageFinish", "lifecycle"}},
		{"fails with it", [][]byte{
			ev("lifecycle", `{"event":"failed","error":"model-1 is unavailable"}`),
		}, []string{"messageStart", "blockStart", "blockDelta", "blockFinish", "messageFinish", "lifecycle"}},
		{"stream ends", nil, []string{"messageStart", "blockStart", "blockDelta", "blockFinish", "messageFinish", "error", "lifecycle"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Decoder{}
			var out []*canonical.Event
			for _, f := range append(append([][]byte{}, start...), tc.rest...) {
				var err error
				if out, err = d.Feed(f, out); err != nil {
					t.Fatal(err)
				}
			}
			out = d.End(out)
			var kinds []string
			for _, e := range out {
				m := e.ProtoReflect()
				kinds = append(kinds, m.WhichOneof(m.Descriptor().Oneofs().ByName("kind")).JSONName())
				if er := e.GetError(); er != nil && (canonical.Code(er.GetCode()) != canonical.CodeUnavailable || er.GetMessage() != "model-1 is unavailable") {
					t.Fatalf("error event %v", er)
				}
			}
			if strings.Join(kinds, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("%s\nwant %s", strings.Join(kinds, ","), strings.Join(tc.want, ","))
			}
			if err := canonical.Validate(out); err != nil && tc.name != "stream ends" {
				t.Fatal(err)
			}
		})
	}
}

// params.data is read in one pass with the frame: its bytes whatever the
// whitespace around them, the last of two data members (as JSON.parse
// takes it), and data that is not as a delta's (a tools delta is a
// string) read again on the general path.
func TestDecoderReadsData(t *testing.T) {
	frames := []string{
		`{"type":"event","seq":1,"method":"values","params":{"namespace":[],"data" :	 {"a": [1, 2]} , "node":"n"}}`,
		`{"type":"event","seq":2,"method":"values","params":{"data":{"a":0},"namespace":[],"data":{"b":"x"}}}`,
		`{"type":"event","seq":3,"method":"tools","params":{"namespace":[],"data":{"event":"tool-output-delta","tool_call_id":"c","delta":"abc"}}}`,
		`{"type":"event","seq":4,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}}}`,
		`{"type":"event","seq":5,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"hi"}}}}`,
		`{"type":"event","seq":6,"method":"messages","params":{"namespace":[],"data":{"event":"content-block-delta","index":"0","delta":{"type":"text-delta","text":" there"}}}}`,
	}
	d := &Decoder{Contiguous: true}
	var out []*canonical.Event
	for _, f := range frames {
		var err error
		if out, err = d.Feed([]byte(f), out); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	var text string
	for _, e := range out {
		text += e.GetBlockDelta().GetText()
	}
	if len(out) < 5 || out[0].GetStateSnapshot().GetValues().GetStructValue().GetFields()["a"].GetListValue().GetValues()[1].GetNumberValue() != 2 ||
		out[1].GetStateSnapshot().GetValues().GetStructValue().GetFields()["b"].GetStringValue() != "x" ||
		out[2].GetToolOutput().GetDelta() != "abc" || text != "hi there" {
		t.Fatalf("decoded %v (text %q)", out, text)
	}
}

// The envelope is read token by token as the library reads it into a
// struct: null members are empty, names may be escaped, the last of
// repeated params wins whole, a member of another type or data after the
// object fails the frame (named as not an event's), and a frame's
// namespace is its own whatever the frame before it held.
func TestDecoderReadsEnvelope(t *testing.T) {
	const start = `{"event":"content-block-start","index":0,"content":{"type":"text","text":""}}`
	delta := func(text string) string {
		return `{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"` + text + `"}}`
	}
	frames := []string{
		`{"type":"event","seq":null,"method":"messages","params":{"namespace":null,"timestamp":null,"node":null,"data":` + start + `}}`,
		`{"\u0074ype":"event","method":"messages","params":{"namespace":["x"]},"params":{"data":` + delta("a") + `,"node":"n1"}}`,
		`{"type":"event","method":"messages","params":{"namespace":["s"],"data":` + start + `}}`,
		`{"type":"event","method":"messages","params":{"namespace":["s"],"data":` + delta("b") + `}}`,
		`{"type":"event","method":"messages","params":{"namespace":[],"timestamp":1.5e3,"data":` + delta("c") + `}}`,
	}
	d := &Decoder{}
	var out []*canonical.Event
	for _, f := range frames {
		var err error
		if out, err = d.Feed([]byte(f), out); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	var got []string
	for _, e := range out {
		if dl := e.GetBlockDelta(); dl != nil {
			got = append(got, strings.Join(e.GetNamespace(), "/")+":"+dl.GetText()+":"+e.GetGraphNode())
		}
	}
	if strings.Join(got, " ") != ":a:n1 s:b: :c:" || out[len(out)-1].GetTimeUnixNano() != 1500*1e6 {
		t.Fatalf("deltas %q, last %v", got, out[len(out)-1])
	}
	for _, f := range []string{
		`{"type":"event","seq":1.5,"method":"messages","params":{"data":{}}}`,
		`{"type":"event","method":7,"params":{"data":{}}}`,
		`{"type":"event","method":"messages","params":{"namespace":[1],"data":{}}}`,
		`{"type":"event","method":"messages","params":[]}`,
		`{"type":"event","method":"messages","params":{"data":{}}} {}`,
	} {
		_, err := (&Decoder{}).Feed([]byte(f), nil)
		if canonical.AsError(err).Code != canonical.CodeInvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", f, err)
		}
	}
}

// A reader of every event tells a seq the server skipped from events lost:
// a frame whose prev_seq is the last decoded follows it, whatever its seq;
// a jump without one, or with another prev_seq, is data_loss.
func TestDecoderPrevSeq(t *testing.T) {
	values := func(seq, prev int) string {
		p := ""
		if prev > 0 {
			p = fmt.Sprintf(`,"prev_seq":%d`, prev)
		}
		return fmt.Sprintf(`{"type":"event","seq":%d%s,"method":"values","params":{"namespace":[],"data":{"n":%d}}}`, seq, p, seq)
	}
	for _, tc := range []struct {
		frames []string
		loss   bool
	}{
		{[]string{values(1, 0), values(2, 0), values(4, 2), values(5, 0)}, false},
		{[]string{values(1, 0), values(2, 0), values(4, 0)}, true},
		{[]string{values(1, 0), values(2, 0), values(5, 3)}, true},
	} {
		d := &Decoder{Contiguous: true}
		var err error
		for _, f := range tc.frames {
			if _, err = d.Feed([]byte(f), nil); err != nil {
				break
			}
		}
		if loss := canonical.CodeOf(err) == canonical.CodeDataLoss; loss != tc.loss {
			t.Errorf("%v: err %v, want data_loss %v", tc.frames, err, tc.loss)
		}
	}
}
