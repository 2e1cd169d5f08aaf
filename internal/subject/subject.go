// Package subject makes names safe as NATS subject tokens, for the
// subjects and KV keys the instances of a cluster share.
package subject

import "encoding/base64"

// Token makes s safe as one NATS subject token (and KV key segment): ids
// made of [A-Za-z0-9_-] pass unchanged; anything else, the empty string
// included, is "~" + base64url(s), which no plain id can equal.
func Token(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "~" + base64.RawURLEncoding.EncodeToString([]byte(s))
		}
	}
	if s == "" {
		return "~"
	}
	return s
}
