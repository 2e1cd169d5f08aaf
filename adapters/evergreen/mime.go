package evergreen

import (
	"mime"
	"strings"
)

// Mime types the adapter reads or writes.
const (
	// MimeEndOfTurn marks the end of a conversational turn: a leaf whose
	// chunk has this mime type and no payload (the README form, with a
	// space after the semicolon).
	MimeEndOfTurn = "application/x-protobuf; type=EndOfTurn"
	// MimeText is the mime type of generated text (response, text and
	// reasoning outputs).
	MimeText = "text/plain"
	// MimeToolEvent is the mime type of a tool_calls output chunk: one JSON
	// object per tool call or tool event (see doc.go).
	MimeToolEvent = "application/json"
	// mimeDefault is the mime type of a leaf whose seq 0 names none.
	mimeDefault = "application/octet-stream"
)

// mediaType parses a mime type RFC 2045 style: type/subtype and parameter
// names lower-cased, whitespace around ";" and "=" ignored, parameter
// values kept exactly. Unparsable input is returned lower-cased and trimmed,
// with no parameters.
func mediaType(s string) (string, map[string]string) {
	t, params, err := mime.ParseMediaType(s)
	if err != nil {
		t, _, _ = strings.Cut(s, ";")
		return strings.ToLower(strings.TrimSpace(t)), nil
	}
	return t, params
}

// normalizeMime returns s in canonical form ("text/plain; charset=utf-8").
func normalizeMime(s string) string {
	if s == "" {
		return ""
	}
	t, params := mediaType(s)
	if f := mime.FormatMediaType(t, params); f != "" {
		return f
	}
	return t
}

// isEndOfTurn reports whether m is the EndOfTurn marker type.
func isEndOfTurn(m string) bool {
	t, p := mediaType(m)
	return t == "application/x-protobuf" && p["type"] == "EndOfTurn"
}

// isTextMime reports whether m is text/* (any text without a custom handler
// is text/plain, per the proto comment).
func isTextMime(m string) bool {
	t, _ := mediaType(m)
	return strings.HasPrefix(t, "text/")
}
