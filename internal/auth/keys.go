package auth

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// API key format: pk_<8 chars>.<secret>. The part before the dot is public (it
// is what status.prefix, logs and events show, and what the key is looked up
// by); the secret is 32 random bytes, base64url without padding.
const (
	KeyScheme       = "pk_"
	keyPrefixChars  = 8
	keySecretBytes  = 32
	maxKeySecretLen = 512
)

// prefixAlphabet keeps generated prefixes lowercase alphanumerics, so a prefix
// is readable aloud and valid as a label value.
const prefixAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// GenerateKey returns a new API key and its public prefix.
func GenerateKey() (key, prefix string, err error) {
	p := make([]byte, keyPrefixChars)
	for i := range p {
		// Rejection sampling: 252 is the largest multiple of 36 below 256, so
		// every character is equally likely.
		for {
			var b [1]byte
			if _, err := rand.Read(b[:]); err != nil {
				return "", "", fmt.Errorf("read random bytes for an API key prefix: %w", err)
			}
			if b[0] < 252 {
				p[i] = prefixAlphabet[int(b[0])%len(prefixAlphabet)]
				break
			}
		}
	}
	secret := make([]byte, keySecretBytes)
	if _, err := rand.Read(secret); err != nil {
		return "", "", fmt.Errorf("read random bytes for an API key: %w", err)
	}
	prefix = KeyScheme + string(p)
	return prefix + "." + base64.RawURLEncoding.EncodeToString(secret), prefix, nil
}

// ParseKey checks the shape of a presented key and returns its public prefix.
// The reason it gives never repeats the key.
func ParseKey(key string) (prefix string, err error) {
	prefix, secret, ok := strings.Cut(key, ".")
	if !ok || !strings.HasPrefix(prefix, KeyScheme) {
		return "", &Error{"malformed API key: expected pk_<prefix>.<secret>"}
	}
	if len(prefix) != len(KeyScheme)+keyPrefixChars || !base64URLChars(prefix[len(KeyScheme):]) {
		return "", &Error{fmt.Sprintf("malformed API key: the prefix must be pk_ and %d characters", keyPrefixChars)}
	}
	if len(secret) < base64.RawURLEncoding.EncodedLen(keySecretBytes) || len(secret) > maxKeySecretLen || !base64URLChars(secret) {
		return "", &Error{"malformed API key: the part after the dot must be at least 43 base64url characters"}
	}
	return prefix, nil
}

func base64URLChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return s != ""
}
