package wsconn

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// Close codes this package and its callers send (RFC 6455 section 7.4.1).
const (
	// CloseNormal ends a connection whose purpose is fulfilled.
	CloseNormal = websocket.CloseNormalClosure // 1000
	// CloseGoingAway is sent at server shutdown and when the context given to
	// Read is cancelled.
	CloseGoingAway = websocket.CloseGoingAway // 1001
	// ClosePolicyViolation is sent to a slow consumer and to a peer that
	// stops answering pings.
	ClosePolicyViolation = websocket.ClosePolicyViolation // 1008
	// CloseMessageTooBig is sent when a message exceeds
	// Config.MaxMessageBytes.
	CloseMessageTooBig = websocket.CloseMessageTooBig // 1009
	// CloseInternalError ends a connection on an unexpected condition.
	CloseInternalError = websocket.CloseInternalServerErr // 1011
)

// AppCode returns the close code that carries a gRPC (canonical) code under
// the Evergreen convention: 4000 plus the code. A code above 999 has no
// close code and is sent as UNKNOWN (4002).
func AppCode(code uint32) int {
	if code > 999 {
		code = 2 // UNKNOWN
	}
	return 4000 + int(code)
}

// ErrSlowConsumer is the cause (see errors.Is) of the error that ends a Conn
// whose peer does not keep up: the send queue was full, or one write blocked
// longer than Config.WriteTimeout.
var ErrSlowConsumer = errors.New("wsconn: slow consumer")

// ErrClosed is the cause (see errors.Is) of the error that ends a Conn
// closed by its Close method.
var ErrClosed = errors.New("wsconn: connection closed")

// Error is the reason this side ended a Conn: the close code and reason it
// sent and the cause, a *canonical.Error. Sending is best effort: a peer
// that stopped reading, or a connection whose write side already failed,
// never sees them; for 1009 the frame sent is gorilla's, without a reason.
type Error struct {
	Code   int    // close code sent
	Reason string // close reason sent, cut to 123 bytes on the wire
	Err    error  // cause, a *canonical.Error
}

func (e *Error) Error() string {
	return "websocket close " + strconv.Itoa(e.Code) + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CloseCode returns the close code err carries: the one this side sent
// (*Error) or the one the peer sent (*websocket.CloseError; gorilla reports
// a connection dropped without a close frame as 1006). It returns 0 when err
// carries none.
func CloseCode(err error) int {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	if ce, ok := errors.AsType[*websocket.CloseError](err); ok {
		return ce.Code
	}
	return 0
}

// sendable reports whether code may appear in a close frame (RFC 6455
// section 7.4: 1005, 1006 and 1015 are reserved for reporting, codes below
// 1000 are unused, 1016-2999 are unassigned).
func sendable(code int) bool {
	switch {
	case code >= 3000 && code <= 4999:
		return true
	case code == 1004 || code == 1005 || code == 1006:
		return false
	}
	return code >= 1000 && code <= 1014
}

// closeReasonMax is the room for a reason in a close frame: the 125-byte
// control frame payload less the 2-byte code.
const closeReasonMax = 123

// truncateReason cuts s to closeReasonMax bytes without splitting a rune,
// after turning no-break spaces into spaces: protobuf-go's error texts put
// one, at random per build, after "proto:", which made Evergreen's close
// reasons differ from build to build.
func truncateReason(s string) string {
	s = strings.ReplaceAll(s, "\u00a0", " ")
	if len(s) <= closeReasonMax {
		return s
	}
	n := closeReasonMax
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
