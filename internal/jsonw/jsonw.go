// Package jsonw appends JSON strings to byte slices without allocating, in
// the exact escaping each wire's reference implementation uses: a bridge's
// output must match the upstream byte for byte, and encoders differ in
// which characters they escape and how.
package jsonw

import "unicode/utf8"

// Mode says how a string is escaped. '"', '\\' and control characters are
// always escaped; the fields choose the rest.
type Mode struct {
	// HTMLSafe escapes <, > and & as \u003c \u003e \u0026, and U+2028 and
	// U+2029 (encoding/json's default).
	HTMLSafe bool
	// ReplaceInvalid writes each invalid UTF-8 byte as \ufffd; otherwise
	// bytes pass through as they are (rapidjson's Writer).
	ReplaceInvalid bool
	// UpperHex writes \u001F rather than \u001f.
	UpperHex bool
	// ShortControl writes \b and \f rather than \u0008 and \u000c.
	ShortControl bool
}

// The modes of the encoders our peers use.
var (
	// EncodingJSON is Go's encoding/json (Glide's WriteJSON).
	EncodingJSON = Mode{HTMLSafe: true, ReplaceInvalid: true, ShortControl: true}
	// RapidJSON is rapidjson's Writer (Triton).
	RapidJSON = Mode{UpperHex: true, ShortControl: true}
	// Plain escapes only what JSON requires, replacing invalid UTF-8.
	Plain = Mode{ReplaceInvalid: true}
)

// PlainByte marks the bytes a reader takes from a JSON string as they
// stand, with nothing to unescape and no UTF-8 to check: ASCII but for
// control characters, '"' and '\\'. Decoders scan strings by it.
var PlainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s to dst as a JSON string escaped per m.
func AppendString[S ~string | ~[]byte](dst []byte, s S, m Mode) []byte {
	hex := "0123456789abcdef"
	if m.UpperHex {
		hex = "0123456789ABCDEF"
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!m.HTMLSafe || (c != '<' && c != '>' && c != '&')) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b' && m.ShortControl:
				dst = append(dst, '\\', 'b')
			case c == '\f' && m.ShortControl:
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		if !m.ReplaceInvalid && !m.HTMLSafe {
			i++ // bytes pass through; nothing to decode
			continue
		}
		r, size := decodeAt(s, i)
		switch {
		case r == utf8.RuneError && size == 1 && m.ReplaceInvalid:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + size
		case (r == '\u2028' || r == '\u2029') && m.HTMLSafe:
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// decodeAt decodes the rune at s[i] for either string or []byte, without
// converting (and so copying) s.
func decodeAt[S ~string | ~[]byte](s S, i int) (rune, int) {
	var b [utf8.UTFMax]byte
	n := copy(b[:], s[i:])
	return utf8.DecodeRune(b[:n])
}
