package agent

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// randomRecord is a thread record with every field's cases: empty and
// set omitempty fields, values of assorted JSON, and checkpoints.
func randomRecord(rng *rand.Rand) threadRecord {
	str := func() string {
		return []string{"", "a", "ünï", `q"uote\`, "<tag>&", "\u2028x"}[rng.IntN(6)]
	}
	values := func() map[string]json.Value {
		v := map[string]json.Value{}
		for range rng.IntN(4) {
			v[fmt.Sprintf("k%d%s", rng.IntN(9), str())] = json.Value([]string{`1`, `"s"`, `{"a":[1,2,{"b":null}]}`, `[]`, `"x\u00e9\n"`,
				longValue, ` { "spaced" : [ 1 , "a b" ] } `, "\"<tag>&\u2028\u2029 \\\" \xe2\x80\xa8\xe2\x80\xa9\"", ` "\"\\" `}[rng.IntN(9)])
		}
		if rng.IntN(4) == 0 {
			return nil
		}
		return v
	}
	at := time.Date(2026, 11, 22, 9, 0, rng.IntN(60), rng.IntN(1e9), time.UTC)
	rec := threadRecord{Version: stateVersion, Thread: str(), Assistant: str(), Seq: rng.Uint64N(1e6), Agent: rng.IntN(2) == 0,
		Values: values(), Head: str(), NextCkpt: rng.Uint64N(100), Status: str(), Runs: rng.Uint64N(9), LastRun: str(), Updated: at}
	for range rng.IntN(5) {
		cv := values()
		if rng.IntN(2) == 0 { // as convo.checkpoint makes them: sharing the record's arrays
			cv = cloneValues(rec.Values)
		}
		rec.Checkpoints = append(rec.Checkpoints, checkpointRec{ID: str(), Parent: str(), Step: rng.Int64N(9) - 1, Source: str(), Node: str(), Time: at, Values: cv})
	}
	if rng.IntN(3) == 0 {
		rec.Interrupts = []interruptRec{{ID: str(), Namespace: []string{str()}, Payload: json.Value(`{"q":1}`)}}
	}
	return rec
}

// longValue is a history of the kind a record holds several copies of:
// long enough for recordWriter to compact it once per save.
var longValue = `[{"content":"` + strings.Repeat("a <b> & c ", 20) + `","type":"ai"},  {"content" : "x\u2028"}]`

// A save's records decode back to what was saved: each checkpoint's, and
// the head's (the record with its checkpoints by id), the values as the
// same JSON.
func TestRecordRoundTrip(t *testing.T) {
	for i := range 500 {
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		rec := randomRecord(rng)
		for j := range rec.Checkpoints {
			cp := &rec.Checkpoints[j]
			b, err := encodeCheckpoint(cp)
			if err != nil {
				t.Fatal(err)
			}
			back := checkpointRec{}
			if err := json.Unmarshal(b, &back, recordJSON); err != nil {
				t.Fatalf("case %d, checkpoint %d: %s: %v", i, j, b, err)
			}
			if back.ID != cp.ID || back.Parent != cp.Parent || back.Step != cp.Step || back.Source != cp.Source || back.Node != cp.Node ||
				!back.Time.Equal(cp.Time) || !sameValues(back.Values, cp.Values) {
				t.Fatalf("case %d, checkpoint %d decodes to %+v, want %+v", i, j, back, *cp)
			}
		}
		if len(rec.Checkpoints) > 0 && rng.IntN(2) == 0 {
			rec.ValuesAt = rec.Checkpoints[len(rec.Checkpoints)-1].ID
		}
		b, err := encodeHead(&rec)
		if err != nil {
			t.Fatal(err)
		}
		back := decodeHead(b, rec.Thread, slog.New(slog.DiscardHandler))
		if back == nil {
			t.Fatalf("case %d: %s does not decode", i, b)
		}
		wantValues := rec.Values
		if rec.ValuesAt != "" { // its checkpoint's record holds them
			wantValues = nil
		}
		if !sameValues(back.Values, wantValues) || len(back.Interrupts) != len(rec.Interrupts) {
			t.Fatalf("case %d: values %v, want %v", i, back.Values, wantValues)
		}
		back.Values, back.Interrupts = nil, nil
		want := rec
		want.Values, want.Interrupts, want.Checkpoints = nil, nil, nil
		for _, cp := range rec.Checkpoints { // listed whole but for their values
			cp.Values, cp.saved = nil, true
			want.Checkpoints = append(want.Checkpoints, cp)
		}
		if !reflect.DeepEqual(*back, want) {
			t.Fatalf("case %d: head decodes to\n%+v, want\n%+v", i, *back, want)
		}
	}
}

// sameValues reports whether two maps of raw values hold the same JSON.
func sameValues(a, b map[string]json.Value) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		var x, y any
		if json.Unmarshal(v, &x, peerJSON) != nil || json.Unmarshal(b[k], &y, peerJSON) != nil || !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// Records stored before the records were marshalled through internal/json
// (written in encoding/json's bytes: HTML characters escaped, nil as null)
// read back.
func TestRecordStoredBefore(t *testing.T) {
	const head, withInterrupt, checkpoint = `{"v":2,"thread_id":"","assistant_id":"\u003ctag\u003e\u0026","seq":943018,"values":{"k0\u003ctag\u003e\u0026":{"spaced":[1,"a b"]},"k8a":[]},"checkpoints":["a"],"next_checkpoint":94,"status":"a","runs":5,"last_run":"\u003ctag\u003e\u0026","updated":"2026-11-22T09:00:47.790767877Z"}`,
		`{"v":2,"thread_id":"\u2028x","assistant_id":"a","seq":689350,"values":{},"head":"\u2028x","next_checkpoint":21,"interrupts":[{"id":"ünï","namespace":["\u003ctag\u003e\u0026"],"payload":{"q":1},"run":""}],"status":"","runs":8,"last_run":"ünï","updated":"2026-11-22T09:00:16.820945784Z"}`,
		`{"id":"a","parent_id":"ünï","step":6,"source":"","node":"a","time":"2026-11-22T09:00:47.790767877Z","values":{"k0\u003ctag\u003e\u0026":{"spaced":[1,"a b"]},"k8a":[]}}`
	log := slog.New(slog.DiscardHandler)
	rec := decodeHead([]byte(head), "", log)
	if rec == nil || rec.Assistant != "<tag>&" || rec.Seq != 943018 || string(rec.Values["k0<tag>&"]) != `{"spaced":[1,"a b"]}` ||
		!reflect.DeepEqual(rec.CheckpointIDs, []string{"a"}) || rec.NextCkpt != 94 || rec.Runs != 5 || rec.LastRun != "<tag>&" ||
		!rec.Updated.Equal(time.Date(2026, 11, 22, 9, 0, 47, 790767877, time.UTC)) {
		t.Fatalf("head record read as %+v", rec)
	}
	rec = decodeHead([]byte(withInterrupt), "", log)
	if rec == nil || rec.Thread != "\u2028x" || rec.Head != "\u2028x" || len(rec.Interrupts) != 1 ||
		!reflect.DeepEqual(rec.Interrupts[0], interruptRec{ID: "ünï", Namespace: []string{"<tag>&"}, Payload: json.Value(`{"q":1}`)}) {
		t.Fatalf("head record read as %+v", rec)
	}
	nulls := decodeHead([]byte(`{"v":2,"thread_id":"t","seq":1,"values":null,"interrupts":[{"id":"i","namespace":null,"payload":null,"run":"r"}],"next_checkpoint":0,"status":"","runs":0,"updated":"0001-01-01T00:00:00Z"}`), "t", log)
	if nulls == nil || nulls.Values != nil || nulls.Interrupts[0].Namespace != nil {
		t.Fatalf("record with nulls read as %+v", nulls)
	}
	var cp checkpointRec
	if err := json.Unmarshal([]byte(checkpoint), &cp, recordJSON); err != nil || cp.ID != "a" || cp.Parent != "ünï" || cp.Step != 6 || cp.Node != "a" || len(cp.Values) != 2 {
		t.Fatalf("checkpoint record read as %+v (%v)", cp, err)
	}
	if b, _ := encodeHead(nulls); !strings.Contains(string(b), `"values":null`) || !strings.Contains(string(b), `"namespace":null`) {
		t.Fatalf("a record with nil values is written %s", b)
	}
}

// A save of a long thread after one more step: the head and the new
// checkpoint, which share the history's bytes.
func BenchmarkEncodeRecord(b *testing.B) {
	history := json.Value(`[{"role":"assistant","content":"` + strings.Repeat("x", 60_000) + `"}]`)
	rec := threadRecord{Version: stateVersion, Thread: "t", Values: map[string]json.Value{"messages": history}}
	for i := range 10 {
		rec.Checkpoints = append(rec.Checkpoints, checkpointRec{ID: fmt.Sprint("ckpt-", i), saved: true})
	}
	cp := checkpointRec{ID: "ckpt-10", Step: 10, Source: "loop", Values: cloneValues(rec.Values)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeCheckpoint(&cp); err != nil {
			b.Fatal(err)
		}
		if _, err := encodeHead(&rec); err != nil {
			b.Fatal(err)
		}
	}
}
