// Package auth decides who is calling: it turns an Authorization header into a
// Principal (tenant, user, permissions) or a reason for 401.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// Principal is an authenticated caller acting inside one tenant.
type Principal struct {
	Tenant    string
	Namespace string
	User      string
	// KeyPrefix is the public prefix of the API key used, if any.
	KeyPrefix   string
	Permissions map[posturev1.Permission]bool
	// Subscribed is tenancy.Subscribed of the tenant as authentication
	// found it; the doors gate on it with tenancy.Gate.
	Subscribed bool
}

// Can reports whether the principal holds perm.
func (p Principal) Can(perm posturev1.Permission) bool { return p.Permissions[perm] }

// Error is a failed authentication; Reason is safe to show the caller and
// never contains key material.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

// Authenticator resolves the caller of a request.
type Authenticator interface {
	Authenticate(r *http.Request) (Principal, error)
}

// Credential is what the Authorization header carried.
type Credential struct {
	Scheme string // "Api-Key" or "Bearer"
	Value  string
}

// ParseAuthorization splits the header, accepting the schemes the API knows.
func ParseAuthorization(h string) (Credential, error) {
	if h == "" {
		return Credential{}, &Error{"authentication credentials were not provided: send Authorization: Api-Key <key>"}
	}
	scheme, value, ok := strings.Cut(h, " ")
	value = strings.TrimSpace(value)
	if !ok || value == "" {
		return Credential{}, &Error{"malformed Authorization header: expected Api-Key <key> or Bearer <token>"}
	}
	switch {
	case strings.EqualFold(scheme, "Api-Key"):
		return Credential{Scheme: "Api-Key", Value: value}, nil
	case strings.EqualFold(scheme, "Bearer"):
		return Credential{Scheme: "Bearer", Value: value}, nil
	}
	return Credential{}, &Error{"unsupported Authorization scheme " + quoteScheme(scheme) + ": expected Api-Key <key> or Bearer <token>"}
}

func quoteScheme(s string) string {
	if len(s) > 20 {
		s = s[:20]
	}
	return `"` + s + `"`
}

// HashKey is how keys are stored: only this hash is ever kept.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// EqualHash compares two hex hashes in constant time.
func EqualHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// StaticKey authenticates one configured key as one principal. It serves
// single-tenant installs and tests that need no Kubernetes objects.
type StaticKey struct {
	KeyHash   string
	Principal Principal
}

func (s StaticKey) Authenticate(r *http.Request) (Principal, error) {
	cred, err := ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return Principal{}, err
	}
	if cred.Scheme != "Api-Key" || !EqualHash(HashKey(cred.Value), s.KeyHash) {
		return Principal{}, &Error{"invalid API key"}
	}
	return s.Principal, nil
}

// AllPermissions is every permission, for administrators.
func AllPermissions() map[posturev1.Permission]bool {
	m := map[posturev1.Permission]bool{}
	for _, p := range []posturev1.Permission{
		posturev1.PermissionManageIngestions, posturev1.PermissionManageProviders, posturev1.PermissionManageScans,
		posturev1.PermissionManageUsers, posturev1.PermissionManageAccount, posturev1.PermissionManageBilling,
		posturev1.PermissionUnlimitedVisibility, posturev1.PermissionMuteFindings,
	} {
		m[p] = true
	}
	return m
}
