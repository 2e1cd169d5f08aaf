package wsconn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/canonical"
)

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Config
		want Config
	}{
		{"zero", Config{}, Config{MaxMessageBytes: 4 << 20, SendQueue: 256,
			WriteTimeout: 10 * time.Second, PingInterval: 30 * time.Second, CloseGrace: time.Second}},
		{"negative", Config{MaxMessageBytes: -1, SendQueue: -1, WriteTimeout: -1, PingInterval: -1, CloseGrace: -1},
			Config{MaxMessageBytes: 4 << 20, SendQueue: 256,
				WriteTimeout: 10 * time.Second, PingInterval: 30 * time.Second, CloseGrace: time.Second}},
		{"set", Config{MaxMessageBytes: 1, SendQueue: 2, WriteTimeout: 3, PingInterval: 4, CloseGrace: 5},
			Config{MaxMessageBytes: 1, SendQueue: 2, WriteTimeout: 3, PingInterval: 4, CloseGrace: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.withDefaults()
			if got.Logger == nil {
				t.Error("Logger not defaulted")
			}
			got.Logger = nil
			if got != tt.want {
				t.Errorf("withDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	err := Config{MaxMessageBytes: -1, SendQueue: -1, WriteTimeout: -1, PingInterval: -1, CloseGrace: -1}.Validate()
	for _, field := range []string{"MaxMessageBytes", "SendQueue", "WriteTimeout", "PingInterval", "CloseGrace"} {
		if err == nil || !strings.Contains(err.Error(), "Config."+field) {
			t.Errorf("Validate() = %v, want it to name %s", err, field)
		}
	}
	if canonical.CodeOf(err) != canonical.CodeInvalidArgument {
		t.Errorf("Validate() code = %v, want invalid_argument", canonical.CodeOf(err))
	}
}

func TestAppCode(t *testing.T) {
	tests := []struct {
		code uint32
		want int
	}{
		{uint32(canonical.CodeOK), 4000},
		{uint32(canonical.CodeNotFound), 4005},
		{uint32(canonical.CodeUnauthenticated), 4016},
		{999, 4999},
		{1000, 4002}, // no close code: UNKNOWN
	}
	for _, tt := range tests {
		if got := AppCode(tt.code); got != tt.want {
			t.Errorf("AppCode(%d) = %d, want %d", tt.code, got, tt.want)
		}
	}
}

func TestCloseCode(t *testing.T) {
	ours := &Error{Code: ClosePolicyViolation, Err: canonical.Errorf(canonical.CodeResourceExhausted, "x")}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"ours", ours, 1008},
		{"ours wrapped", errors.Join(errors.New("run"), ours), 1008},
		{"peer", &websocket.CloseError{Code: 4005, Text: "not found"}, 4005},
		{"dropped", &websocket.CloseError{Code: websocket.CloseAbnormalClosure}, 1006},
		{"other", errors.New("x"), 0},
	}
	for _, tt := range tests {
		if got := CloseCode(tt.err); got != tt.want {
			t.Errorf("%s: CloseCode = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestSendable(t *testing.T) {
	tests := []struct {
		code int
		want bool
	}{
		{0, false}, {999, false}, {1000, true}, {1001, true}, {1004, false}, {1005, false},
		{1006, false}, {1008, true}, {1009, true}, {1011, true}, {1014, true}, {1015, false},
		{2999, false}, {3000, true}, {4005, true}, {4999, true}, {5000, false},
	}
	for _, tt := range tests {
		if got := sendable(tt.code); got != tt.want {
			t.Errorf("sendable(%d) = %v, want %v", tt.code, got, tt.want)
		}
	}
}

func TestTruncateReason(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int // length in bytes
	}{
		{"short", "bye", 3},
		{"exact", strings.Repeat("a", 123), 123},
		{"long", strings.Repeat("a", 200), 123},
		{"rune across the cut", strings.Repeat("a", 122) + "é", 122},
	}
	for _, tt := range tests {
		got := truncateReason(tt.in)
		if len(got) != tt.want || !strings.HasPrefix(tt.in, got) {
			t.Errorf("%s: truncateReason = %d bytes, want %d", tt.name, len(got), tt.want)
		}
	}
	// protobuf-go's no-break space after "proto:" becomes a space.
	if got := truncateReason("proto:\u00a0syntax error"); got != "proto: syntax error" {
		t.Errorf("truncateReason kept a no-break space: %q", got)
	}
}
