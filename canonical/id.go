package canonical

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// NewID returns prefix followed by 128 random bits in base32 (26
// characters of [a-z2-7]): run and thread ids that no one can guess from
// another, unlike a counter or nuid's sequential suffix.
func NewID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
