package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
)

// passwords compares a presented password with the one in a user's Secret.
//
// The Secret's value is either a bcrypt hash ($2a$, $2b$ or $2y$; what GitOps
// repositories should hold, e.g. from `htpasswd -bnBC 12 "" pw | tr -d ':\n'`)
// or the password itself. Either way the comparison is bcrypt's, which takes
// the same time whatever the input: a plaintext value is bcrypt-hashed once per
// Secret revision and kept in memory as the hash only. Passwords are never
// logged or put in errors.
type passwords struct {
	mu     sync.Mutex
	hashes map[string][]byte // secret uid/resourceVersion/key -> bcrypt hash of the plaintext
	dummy  []byte
}

func bcryptCost(cost int) int {
	if cost >= bcrypt.MinCost && cost <= bcrypt.MaxCost {
		return cost
	}
	return bcrypt.DefaultCost
}

// prehash makes any plaintext fit bcrypt's 72-byte input limit; used on both
// sides of a comparison against a plaintext Secret value.
func prehash(pw []byte) []byte {
	sum := sha256.Sum256(pw)
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}

func isBcrypt(v []byte) bool {
	s := string(v)
	return strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")
}

// match reports whether password is the one stored in sec under key.
func (p *passwords) match(sec *corev1.Secret, key, password string, cost int) bool {
	stored := sec.Data[key]
	if len(stored) == 0 {
		p.burn(password, cost)
		return false
	}
	if isBcrypt(stored) {
		return bcrypt.CompareHashAndPassword(stored, []byte(password)) == nil
	}
	// Trailing newlines come from `kubectl create secret --from-file`.
	stored = []byte(strings.TrimRight(string(stored), "\r\n"))
	id := string(sec.UID) + "/" + sec.ResourceVersion + "/" + key
	p.mu.Lock()
	hash, ok := p.hashes[id]
	p.mu.Unlock()
	if !ok {
		var err error
		if hash, err = bcrypt.GenerateFromPassword(prehash(stored), bcryptCost(cost)); err != nil {
			return false
		}
		p.mu.Lock()
		if p.hashes == nil || len(p.hashes) > 10000 {
			p.hashes = map[string][]byte{}
		}
		p.hashes[id] = hash
		p.mu.Unlock()
	}
	return bcrypt.CompareHashAndPassword(hash, prehash([]byte(password))) == nil
}

// burn spends the time of one comparison, so that an unknown email cannot be
// told from a wrong password by the response time.
func (p *passwords) burn(password string, cost int) {
	p.mu.Lock()
	if p.dummy == nil {
		p.dummy, _ = bcrypt.GenerateFromPassword([]byte("posture-dummy-password"), bcryptCost(cost))
	}
	dummy := p.dummy
	p.mu.Unlock()
	_ = bcrypt.CompareHashAndPassword(dummy, prehash([]byte(password)))
}
