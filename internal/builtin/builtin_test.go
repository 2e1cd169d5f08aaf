package builtin

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/interlingua-dev/interlingua/canonical"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCalculator(t *testing.T) {
	tools := Tools(func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })
	tests := []struct{ args, want, err string }{
		{`{"expression":"6 * 7"}`, `{"result":42}`, ""},
		{`{"expression":"(1+2)*-3/2"}`, `{"result":-4.5}`, ""},
		{`{"expression":"1/0"}`, "", "division by zero"},
		{`{"expression":"2+"}`, "", "ends early"},
		{`{"expression":"2)"}`, "", "unexpected"},
		{`{"expr":"1"}`, "", `{"expression": string}`},
		{`{"expression":"` + strings.Repeat("(", 300) + `"}`, "", "longer than 256"},
	}
	for _, tt := range tests {
		out, err := tools["calculator"](context.Background(), []byte(tt.args))
		if tt.err != "" {
			if canonical.CodeOf(err) != canonical.CodeInvalidArgument || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: got %v, want invalid_argument with %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || string(out) != tt.want {
			t.Errorf("%s: got %s, %v; want %s", tt.args, out, err, tt.want)
		}
	}
	out, _ := tools["clock"](context.Background(), nil)
	if string(out) != `{"now":"2026-01-02T03:04:05Z"}` {
		t.Errorf("clock: %s", out)
	}
	out, _ = tools["echo"](context.Background(), []byte(`{"a":1}`))
	if string(out) != `{"a":1}` {
		t.Errorf("echo: %s", out)
	}
	if _, err := tools["echo"](context.Background(), []byte(`{`)); err == nil {
		t.Error("echo accepted bad JSON")
	}
}
