package agent

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// randomRecord is a thread record with every field's cases: empty and
// set omitempty fields, values of assorted JSON, and checkpoints.
func randomRecord(rng *rand.Rand) threadRecord {
	str := func() string {
		return []string{"", "a", "ünï", `q"uote\`, "<tag>&", "\u2028x"}[rng.IntN(6)]
	}
	values := func() map[string]json.RawMessage {
		v := map[string]json.RawMessage{}
		for range rng.IntN(4) {
			v[fmt.Sprintf("k%d%s", rng.IntN(9), str())] = json.RawMessage([]string{`1`, `"s"`, `{"a":[1,2,{"b":null}]}`, `[]`, `"x\u00e9\n"`,
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
		if rng.IntN(2) == 0 { // as checkpointLocked makes them: sharing the record's arrays
			cv = cloneValues(rec.Values)
		}
		rec.Checkpoints = append(rec.Checkpoints, checkpointRec{ID: str(), Parent: str(), Step: rng.Int64N(9) - 1, Source: str(), Node: str(), Time: at, Values: cv})
	}
	if rng.IntN(3) == 0 {
		rec.Interrupts = []interruptRec{{ID: str(), Namespace: []string{str()}, Payload: json.RawMessage(`{"q":1}`)}}
	}
	return rec
}

// longValue is a history of the kind a record holds several copies of:
// long enough for recordWriter to compact it once per save.
var longValue = `[{"content":"` + strings.Repeat("a <b> & c ", 20) + `","type":"ai"},  {"content" : "x\u2028"}]`

// A save's records are json.Marshal's bytes: each checkpoint's, and the
// head's (the record with its checkpoints by id); both decode back to what
// was saved.
func TestEncodeRecordMatchesMarshal(t *testing.T) {
	for i := range 500 {
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		rec := randomRecord(rng)
		var w recordWriter
		for j := range rec.Checkpoints {
			rec.CheckpointIDs = append(rec.CheckpointIDs, rec.Checkpoints[j].ID)
			cw, _ := json.Marshal(&rec.Checkpoints[j])
			cg, err := w.checkpoint(nil, &rec.Checkpoints[j])
			if err != nil || string(cg) != string(cw) {
				t.Fatalf("case %d, checkpoint %d: %v\n got %s\nwant %s", i, j, err, cg, cw)
			}
			var back checkpointRec
			if err := json.Unmarshal(cg, &back); err != nil || back.ID != rec.Checkpoints[j].ID || len(back.Values) != len(rec.Checkpoints[j].Values) {
				t.Fatalf("case %d, checkpoint %d decodes to %+v (%v)", i, j, back, err)
			}
		}
		want, err := json.Marshal(&rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := w.rest(nil, &rec)
		if err != nil || string(got) != string(want) {
			t.Fatalf("case %d: %v\n got %s\nwant %s", i, err, got, want)
		}
		var back threadRecord
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back.CheckpointIDs, rec.CheckpointIDs) || back.Head != rec.Head || back.Seq != rec.Seq {
			t.Fatalf("case %d: head decodes to %+v", i, back)
		}
	}
}

// A save of a long thread after one more step: the head and the new
// checkpoint, which share the history's bytes (compacted once).
func BenchmarkEncodeRecord(b *testing.B) {
	history := json.RawMessage(`[{"role":"assistant","content":"` + strings.Repeat("x", 60_000) + `"}]`)
	rec := threadRecord{Version: stateVersion, Thread: "t", Values: map[string]json.RawMessage{"messages": history}}
	for i := range 10 {
		rec.CheckpointIDs = append(rec.CheckpointIDs, fmt.Sprint("ckpt-", i))
	}
	cp := checkpointRec{ID: "ckpt-10", Step: 10, Source: "loop", Values: cloneValues(rec.Values)}
	b.ReportAllocs()
	for b.Loop() {
		var w recordWriter
		if _, err := w.checkpoint(nil, &cp); err != nil {
			b.Fatal(err)
		}
		if _, err := w.rest(nil, &rec); err != nil {
			b.Fatal(err)
		}
	}
}

// compactCases are raw values as a record may hold them: valid JSON, with
// whitespace, escapes and the characters json.Marshal escapes in strings.
var compactCases = []string{
	`1`, ` 1 `, `"s"`, `""`, `" "`, `"a\"b"`, `"\\"`, `"\\\""`, `"<>&"`, "\"\u2028\u2029\"", "\"\xe2\x80\"", "\"\xe2\x80\xa7\"",
	` { "a" : [ 1 , 2 , { "b" : null } ] , "c" : "x y\tz" } `, "[\n\t1,\r\n2]", `{"k<":"v&"}`, `[true,false,null,-1.5e3]`,
	longValue, "\"\xff\xfe\"", `"\u003c"`,
}

// TestAppendCompact: appendCompact writes what json.Marshal writes of a
// json.RawMessage, for valid JSON.
func TestAppendCompact(t *testing.T) {
	for _, raw := range compactCases {
		want, err := json.Marshal(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if got := appendCompact(nil, []byte(raw)); string(got) != string(want) {
			t.Errorf("appendCompact(%q) = %q, want %q", raw, got, want)
		}
	}
}

// FuzzAppendCompact: on any valid JSON appendCompact writes json.Marshal's
// bytes (on invalid JSON, which a record never holds, it only must not
// panic).
func FuzzAppendCompact(f *testing.F) {
	for _, raw := range compactCases {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := appendCompact(nil, raw)
		if !json.Valid(raw) {
			return
		}
		want, err := json.Marshal(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("appendCompact(%q) = %q, want %q", raw, got, want)
		}
	})
}
