package json_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/internal/json"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type member struct {
	Name  string     `json:"name"`
	Extra json.Value `json:"extra,omitzero"`
}

// The facade keeps the library's defaults: a duplicate member is refused
// unless the call allows it, and raw values pass through byte for byte.
func TestDefaults(t *testing.T) {
	var m member
	if err := json.Unmarshal([]byte(`{"name":"a","name":"b"}`), &m); err == nil {
		t.Fatal("duplicate member accepted by default")
	}
	if err := json.Unmarshal([]byte(`{"name":"a","name":"b"}`), &m, json.AllowDuplicateNames(true)); err != nil || m.Name != "b" {
		t.Fatalf("AllowDuplicateNames: %v, name %q; want nil, \"b\"", err, m.Name)
	}
	if err := json.Unmarshal([]byte(`{"name":"x","extra":{"k": [1, 2.50]}}`), &m); err != nil {
		t.Fatal(err)
	}
	if got := string(m.Extra); got != `{"k": [1, 2.50]}` {
		t.Fatalf("raw value %s", got)
	}
	b, err := json.Marshal(member{Name: "<&>"})
	if err != nil || string(b) != `{"name":"<&>"}` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	if json.Valid([]byte(`{"a":1,"a":2}`)) || !json.Valid([]byte(`[1]`)) {
		t.Fatal("Valid")
	}
}

// UnknownScalars keeps the scalar members known does not name, decoded;
// objects, arrays and null are left out, and a body that is not an
// object is an error.
func TestUnknownScalars(t *testing.T) {
	got, err := json.UnknownScalars([]byte(`{"model":"m","top_k":40,"min_p":0.5,"tag":"x","flag":false,"obj":{"a":1},"arr":[1],"nil":null}`),
		map[string]bool{"model": true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"top_k": float64(40), "min_p": 0.5, "tag": "x", "flag": false}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	if got, err := json.UnknownScalars([]byte(`{"model":"m"}`), map[string]bool{"model": true}); err != nil || got != nil {
		t.Fatalf("nothing unknown: %v %v", got, err)
	}
	if _, err := json.UnknownScalars([]byte(`[1]`), nil); err == nil {
		t.Fatal("an array is not an object")
	}
}
