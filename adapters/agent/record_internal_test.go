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

// encodeRecord's JSON is json.Marshal's, with "checkpoints" first and the
// same length (the size bound sees the same figure): each checkpoint's and
// the rest's bytes are json.Marshal's; a second encoding, from the kept
// checkpoint encodings, is the same bytes.
func TestEncodeRecordMatchesMarshal(t *testing.T) {
	for i := range 500 {
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		rec := randomRecord(rng)
		want, err := json.Marshal(&rec)
		if err != nil {
			t.Fatal(err)
		}
		var w recordWriter
		for j := range rec.Checkpoints {
			cw, _ := json.Marshal(&rec.Checkpoints[j])
			if cg, err := w.checkpoint(nil, &rec.Checkpoints[j]); err != nil || string(cg) != string(cw) {
				t.Fatalf("case %d, checkpoint %d: %v\n got %s\nwant %s", i, j, err, cg, cw)
			}
		}
		rest := rec
		rest.Checkpoints = nil
		rw, _ := json.Marshal(&rest)
		if rg, err := w.rest(nil, &rest); err != nil || string(rg) != string(rw) {
			t.Fatalf("case %d: %v\n got %s\nwant %s", i, err, rg, rw)
		}
		got, err := encodeRecord(&rec)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("case %d: %d bytes, json.Marshal %d\n%s\n%s", i, len(got), len(want), got, want)
		}
		var a, b map[string]any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, got)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("case %d:\n%s\nwant (as json.Marshal)\n%s", i, got, want)
		}
		for j, cp := range rec.Checkpoints {
			if cp.enc == nil {
				t.Fatalf("case %d: checkpoint %d's encoding not kept", i, j)
			}
		}
		again, err := encodeRecord(&rec)
		if err != nil || string(again) != string(got) {
			t.Fatalf("case %d: second encoding differs (%v)", i, err)
		}
	}
}

// A record with many large checkpoints, saved again after one more step:
// the cost persist pays on every save of a long thread.
func BenchmarkEncodeRecord(b *testing.B) {
	history := json.RawMessage(`[{"role":"assistant","content":"` + strings.Repeat("x", 60_000) + `"}]`)
	rec := threadRecord{Version: stateVersion, Thread: "t", Values: map[string]json.RawMessage{"messages": history}}
	for i := range 10 {
		rec.Checkpoints = append(rec.Checkpoints, checkpointRec{ID: fmt.Sprint("ckpt-", i), Step: int64(i), Source: "loop", Values: map[string]json.RawMessage{"messages": history}})
	}
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !cached {
					for i := range rec.Checkpoints {
						rec.Checkpoints[i].enc = nil
					}
				}
				if _, err := encodeRecord(&rec); err != nil {
					b.Fatal(err)
				}
			}
		})
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
