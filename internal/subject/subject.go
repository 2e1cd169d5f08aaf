// Package subject makes names safe as NATS subject tokens and JetStream KV
// key segments, for the subjects and keys the instances of a cluster share.
package subject

import "encoding/base64"

// Token makes s safe as one NATS subject token: ids made of [A-Za-z0-9_-]
// pass unchanged; anything else, the empty string included, is
// "~" + base64url(s), which no plain id can equal.
func Token(s string) string { return encode(s, '~') }

// Key makes s safe as one segment of a JetStream KV key, whose characters
// are limited to [-/_=.A-Za-z0-9] (nats.go's validKeyRe; "~" is refused with
// "nats: invalid key"): plain ids pass unchanged; anything else is
// "=" + base64url(s).
func Key(s string) string { return encode(s, '=') }

func encode(s string, mark byte) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return string(mark) + base64.RawURLEncoding.EncodeToString([]byte(s))
		}
	}
	if s == "" {
		return string(mark)
	}
	return s
}
