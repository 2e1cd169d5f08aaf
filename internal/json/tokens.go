package json

import "github.com/go-json-experiment/json/jsontext"

// Null is the token of JSON null.
var Null = jsontext.Null

// Uint is the token of the JSON number n.
func Uint(n uint64) Token { return jsontext.Uint(n) }

// AppendUnquote appends the text of the JSON string src (quoted, as a
// Decoder's ReadValue returns it) to dst; invalid UTF-8 becomes U+FFFD
// and an error.
func AppendUnquote(dst, src []byte) ([]byte, error) { return jsontext.AppendUnquote(dst, src) }

// AppendQuote appends s as a JSON string (escaping only what JSON requires)
// to dst. Invalid UTF-8 is written as U+FFFD, as an Encoder with
// AllowInvalidUTF8 writes it: for templates whose constant parts were
// encoded once, where a delta's text is the only part that changes.
func AppendQuote[S string | []byte](dst []byte, s S) []byte {
	dst, _ = jsontext.AppendQuote(dst, s) // the error only reports the U+FFFD replacement
	return dst
}
