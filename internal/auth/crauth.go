package auth

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/tenancy"
)

// CRAuthenticator authenticates callers from the custom resources: APIKeys
// (Authorization: Api-Key <key>) and JWTs it issued to Tenant users
// (Authorization: Bearer <token>). Every request is resolved against the
// objects as they are now, read from the manager's informer cache, so a
// revoked or deleted key, a removed user or a changed role takes effect as
// soon as the cache sees the change (well under a second on a healthy cluster).
type CRAuthenticator struct {
	// Reader is the manager's cached client; it must carry SetupIndexes.
	Reader client.Reader
	// Secrets reads users' password Secrets. They carry no label the cache
	// selects, so pass the manager's APIReader.
	Secrets client.Reader
	// Tokens issues and verifies JWTs; nil turns Bearer tokens and
	// POST /api/v1/tokens off.
	Tokens *TokenService
	// BcryptCost hashes plaintext passwords for comparison (default bcrypt's 10).
	BcryptCost int
	// Now is injectable for expiry tests.
	Now func() time.Time

	pw passwords
}

func (a *CRAuthenticator) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Authenticate implements Authenticator.
func (a *CRAuthenticator) Authenticate(r *http.Request) (Principal, error) {
	cred, err := ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return Principal{}, err
	}
	switch cred.Scheme {
	case "Api-Key":
		return a.apiKey(r.Context(), cred.Value)
	default: // Bearer
		if strings.HasPrefix(cred.Value, KeyScheme) {
			return Principal{}, &Error{"API keys go in the Api-Key scheme: send Authorization: Api-Key <key>"}
		}
		return a.bearer(r.Context(), cred.Value)
	}
}

// ExpiresAt is when a key stops working: the earlier of spec.expiresAt and the
// expiry the controller recorded in status. Shortening spec.expiresAt applies
// at once; lengthening it applies only once the controller has recorded it,
// which it does only while the key has not expired, so an expired key cannot
// be revived by moving spec.expiresAt later.
func ExpiresAt(k *posturev1.APIKey) *time.Time {
	var exp *time.Time
	for _, t := range []*metav1.Time{k.Spec.ExpiresAt, k.Status.ExpiresAt, k.Status.ExpiredAt} {
		if t != nil && (exp == nil || t.Time.Before(*exp)) {
			exp = &t.Time
		}
	}
	return exp
}

// Revoked reports whether a key is revoked: spec.revoked, so that revoking
// applies before the controller has seen it, or status.revokedAt, so that the
// revocation stands even if spec.revoked were ever set back to false.
func Revoked(k *posturev1.APIKey) bool {
	return k.Spec.Revoked || k.Status.RevokedAt != nil
}

func (a *CRAuthenticator) apiKey(ctx context.Context, key string) (Principal, error) {
	prefix, err := ParseKey(key)
	if err != nil {
		return Principal{}, err
	}
	var list posturev1.APIKeyList
	if err := a.Reader.List(ctx, &list, client.MatchingFields{IndexAPIKeyPrefix: prefix}); err != nil {
		return Principal{}, fmt.Errorf("look up API key %s: %w", prefix, err)
	}
	hash := HashKey(key)
	var found *posturev1.APIKey
	matches := 0
	for i := range list.Items {
		// Compare every candidate so the time taken does not depend on which matched.
		if list.Items[i].Status.Hash != "" && EqualHash(hash, list.Items[i].Status.Hash) {
			found = &list.Items[i]
			matches++
		}
	}
	if matches > 1 {
		// Adopted keys come from Secrets, so two APIKeys can hold one key;
		// which one decides (one may be revoked) must not be left to chance.
		return Principal{}, &Error{"API key " + prefix + " is held by more than one APIKey; it is refused until only one holds it"}
	}
	if found == nil {
		return Principal{}, &Error{"API key " + prefix + " is not valid: it was never issued or has been deleted"}
	}
	if !found.DeletionTimestamp.IsZero() {
		return Principal{}, &Error{"API key " + prefix + " has been deleted"}
	}
	if Revoked(found) {
		return Principal{}, &Error{"API key " + prefix + " has been revoked; revocation is permanent: create a new APIKey for a new key"}
	}
	if exp := ExpiresAt(found); exp != nil && !a.now().Before(*exp) {
		return Principal{}, &Error{"API key " + prefix + " expired at " + exp.UTC().Format(time.RFC3339) + "; expiry is permanent: create a new APIKey for a new key"}
	}
	tenant, err := tenancy.ForNamespace(ctx, a.Reader, found.Namespace)
	var te *tenancy.Error
	if errors.As(err, &te) {
		return Principal{}, &Error{te.Reason}
	}
	if err != nil {
		return Principal{}, err
	}
	if tenant == nil {
		return Principal{}, &Error{"API key " + prefix + " belongs to namespace " + found.Namespace + ", which no Tenant uses"}
	}
	p, ok := PrincipalFor(tenant, found.Spec.User, prefix)
	if !ok {
		return Principal{}, &Error{fmt.Sprintf("API key %s acts for %s, who is no longer a user of tenant %s", prefix, found.Spec.User, tenant.Name)}
	}
	return p, nil
}

func (a *CRAuthenticator) bearer(ctx context.Context, token string) (Principal, error) {
	if a.Tokens == nil {
		return Principal{}, &Error{"Bearer tokens are not enabled on this server: send Authorization: Api-Key <key>"}
	}
	claims, err := a.Tokens.Verify(ctx, token, TokenAccess)
	if err != nil {
		return Principal{}, err
	}
	return a.userPrincipal(ctx, claims)
}

// userPrincipal resolves a token's user against the Tenant as it is now.
func (a *CRAuthenticator) userPrincipal(ctx context.Context, claims *Claims) (Principal, error) {
	var tenant posturev1.Tenant
	if err := a.Reader.Get(ctx, types.NamespacedName{Name: claims.Tenant}, &tenant); err != nil {
		if apierrors.IsNotFound(err) {
			return Principal{}, &Error{"the token's tenant " + claims.Tenant + " no longer exists"}
		}
		return Principal{}, fmt.Errorf("read Tenant %s: %w", claims.Tenant, err)
	}
	if owns, err := tenancy.Owns(ctx, a.Reader, &tenant); err != nil {
		return Principal{}, err
	} else if !owns {
		return Principal{}, &Error{"the token's tenant " + tenant.Name + " does not own namespace " + tenant.NamespaceName() + ": another Tenant labelled it first"}
	}
	p, ok := PrincipalFor(&tenant, claims.Subject, "")
	if !ok {
		return Principal{}, &Error{fmt.Sprintf("%s is no longer a user of tenant %s", claims.Subject, tenant.Name)}
	}
	return p, nil
}

// SignOut ends the session that token (an access or a refresh token)
// belongs to.
func (a *CRAuthenticator) SignOut(ctx context.Context, token string) error {
	if a.Tokens == nil {
		return &Error{"Bearer tokens are not enabled on this server"}
	}
	_, err := a.Tokens.End(ctx, token)
	return err
}

// errBadCredentials is the one answer to every failed sign-in, so that the
// response does not tell which of email, password or tenant was wrong.
var errBadCredentials = &Error{"invalid email or password"}

// Login checks a tenant user's password and issues a token pair. tenant may be
// empty; it is needed only when the email belongs to users of several tenants
// with the same password.
func (a *CRAuthenticator) Login(ctx context.Context, tenant, email, password string) (TokenPair, error) {
	if a.Tokens == nil {
		return TokenPair{}, &Error{"token sign-in is not enabled on this server"}
	}
	var list posturev1.TenantList
	if err := a.Reader.List(ctx, &list, client.MatchingFields{IndexTenantUser: NormalizeEmail(email)}); err != nil {
		return TokenPair{}, fmt.Errorf("look up the tenants of a user: %w", err)
	}
	var matched []*posturev1.Tenant
	var matchedUser posturev1.User
	var matchedSecret *corev1.Secret
	var matchedKey string
	tried := false
	for i := range list.Items {
		t := &list.Items[i]
		if tenant != "" && t.Name != tenant {
			continue
		}
		u, ok := FindUser(t, email)
		if !ok || u.PasswordSecretRef == nil {
			continue
		}
		// A Tenant naming another tenant's namespace could otherwise point
		// its users at the owner's password Secrets and sign in to its data.
		if owns, err := tenancy.Owns(ctx, a.Reader, t); err != nil {
			return TokenPair{}, err
		} else if !owns {
			continue
		}
		sec, key, err := a.passwordSecret(ctx, t, u)
		if err != nil {
			return TokenPair{}, err
		}
		if sec == nil {
			continue
		}
		tried = true
		if a.pw.match(sec, key, password, a.BcryptCost) {
			matched = append(matched, t)
			matchedUser, matchedSecret, matchedKey = u, sec, key
		}
	}
	if !tried {
		a.pw.burn(password, a.BcryptCost)
	}
	switch len(matched) {
	case 0:
		return TokenPair{}, errBadCredentials
	case 1:
		binding, err := a.Tokens.Binding(ctx, matched[0].Name, matchedUser.Email, matchedSecret, matchedKey)
		if err != nil {
			return TokenPair{}, err
		}
		return a.Tokens.Issue(ctx, Session{Tenant: matched[0].Name, User: matchedUser.Email, PasswordBinding: binding})
	}
	names := make([]string, 0, len(matched))
	for _, t := range matched {
		names = append(names, t.Name)
	}
	return TokenPair{}, &Error{"this user belongs to several tenants (" + strings.Join(names, ", ") + "); send data.attributes.tenant to choose one"}
}

// passwordSecret reads the Secret holding u's password, straight from the API
// server; nil when it does not exist.
func (a *CRAuthenticator) passwordSecret(ctx context.Context, t *posturev1.Tenant, u posturev1.User) (*corev1.Secret, string, error) {
	key := u.PasswordSecretRef.Key
	if key == "" {
		key = "password"
	}
	var sec corev1.Secret
	err := a.Secrets.Get(ctx, types.NamespacedName{Namespace: t.NamespaceName(), Name: u.PasswordSecretRef.Name}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, key, nil
	}
	if err != nil {
		return nil, key, fmt.Errorf("read the password Secret %s/%s: %w", t.NamespaceName(), u.PasswordSecretRef.Name, err)
	}
	return &sec, key, nil
}

// Refresh redeems a refresh token (once) for a new token pair, provided its
// user still belongs to the tenant, the password Secret is the one the chain
// was started with, and the chain is younger than the TokenService's
// MaxSessionAge.
func (a *CRAuthenticator) Refresh(ctx context.Context, refresh string) (TokenPair, error) {
	if a.Tokens == nil {
		return TokenPair{}, &Error{"token sign-in is not enabled on this server"}
	}
	claims, err := a.Tokens.Redeem(ctx, refresh)
	if err != nil {
		return TokenPair{}, err
	}
	p, err := a.userPrincipal(ctx, claims)
	if err != nil {
		return TokenPair{}, err
	}
	// The Tenant comes from the cache, the Secret from the API server: a
	// password change counts from the moment it is written.
	var tenant posturev1.Tenant
	if err := a.Reader.Get(ctx, types.NamespacedName{Name: claims.Tenant}, &tenant); err != nil {
		return TokenPair{}, fmt.Errorf("read Tenant %s: %w", claims.Tenant, err)
	}
	passwordChanged := &Error{fmt.Sprintf("the password of %s has changed since this sign-in; sign in again with POST /api/v1/tokens", claims.Subject)}
	u, ok := FindUser(&tenant, claims.Subject)
	if !ok || u.PasswordSecretRef == nil {
		return TokenPair{}, passwordChanged
	}
	sec, key, err := a.passwordSecret(ctx, &tenant, u)
	if err != nil {
		return TokenPair{}, err
	}
	if sec == nil || len(sec.Data[key]) == 0 {
		return TokenPair{}, passwordChanged
	}
	binding, err := a.Tokens.Binding(ctx, tenant.Name, claims.Subject, sec, key)
	if err != nil {
		return TokenPair{}, err
	}
	if !hmac.Equal([]byte(binding), []byte(claims.PasswordBinding)) {
		return TokenPair{}, passwordChanged
	}
	return a.Tokens.Issue(ctx, Session{Tenant: p.Tenant, User: p.User, AuthTime: claims.AuthTime.Time, PasswordBinding: binding, ID: claims.SessionID})
}
