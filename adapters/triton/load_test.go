package triton

import "testing"

// TestLoadTextInput: the load upstream's stream key is the generate
// body's text_input, in each of its shapes.
func TestLoadTextInput(t *testing.T) {
	for body, want := range map[string]string{
		`{"text_input":"k1","stream":true}`: "k1",
		`{"text_input":["k2"]}`:             "k2",
		`{"text_input":[["k3"]]}`:           "k3",
		`{"stream":true}`:                   "",
		`not json`:                          "",
	} {
		if got := loadTextInput([]byte(body)); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}
