package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// Token lifetimes: an access token, one refresh token, and a whole chain of
// refreshes counted from the password sign-in that started it.
const (
	DefaultAccessTTL     = 30 * time.Minute
	DefaultRefreshTTL    = 24 * time.Hour
	DefaultMaxSessionAge = 7 * 24 * time.Hour
)

// Token types, carried in the token_type claim so that a refresh token is
// never accepted as an access token and the other way round.
const (
	TokenAccess  = "access"
	TokenRefresh = "refresh"
)

const (
	tokenIssuer   = "posture"
	tokenAudience = "posture-api"
)

// signingMethod is the only algorithm tokens are signed and accepted with.
// Pinning it rejects "alg":"none" and algorithm confusion (a token signed with
// another algorithm, e.g. RS256 with a public key used as an HMAC secret).
var signingMethod = jwt.SigningMethodHS256

// Claims are the API's JWT claims.
type Claims struct {
	Tenant    string `json:"tenant"`
	TokenType string `json:"token_type"`
	// AuthTime is when the user last proved their password (OIDC's
	// auth_time). Refreshes copy it, so a chain of refreshes cannot outlive
	// MaxSessionAge however often it is refreshed.
	AuthTime *jwt.NumericDate `json:"auth_time,omitempty"`
	// PasswordBinding, in refresh tokens, is a keyed fingerprint of the
	// password Secret as it was at sign-in (see TokenService.Binding): a
	// refresh is refused once the Secret has changed.
	PasswordBinding string `json:"pwb,omitempty"`
	// SessionID names the password sign-in the token descends from; both
	// tokens of a pair and every refresh after it carry it, so a sign-out
	// ends them all (TokenService.End).
	SessionID string `json:"sid,omitempty"`
	jwt.RegisteredClaims
}

// Session is what a token pair is issued for.
type Session struct {
	Tenant string
	User   string
	// AuthTime is the password sign-in the pair descends from; zero means now
	// (a fresh sign-in).
	AuthTime time.Time
	// PasswordBinding goes into the refresh token; see TokenService.Binding.
	PasswordBinding string
	// ID is the session a refresh continues; empty starts a new one (a
	// password sign-in).
	ID string
}

// SessionLedger records ended sessions where every replica reads them
// (store.Sessions).
type SessionLedger interface {
	EndSession(ctx context.Context, id string, until time.Time) error
	SessionEnded(ctx context.Context, id string) (bool, error)
}

// TokenPair is what POST /api/v1/tokens returns.
type TokenPair struct {
	// ID is the access token's jti.
	ID               string
	Access           string
	Refresh          string
	AccessExpiresAt  time.Time
	RefreshExpiresAt time.Time
}

// KeySource provides the HMAC key tokens are signed with.
type KeySource interface {
	SigningKey(ctx context.Context) ([]byte, error)
}

// TokenService issues and verifies the API's JWTs.
//
// Refresh tokens are single use: the jti of every redeemed refresh token is
// remembered in memory until the token would have expired anyway. The memory
// is per process, so with several API replicas a refresh token could be
// redeemed once on each replica; installs that need strict single use across
// replicas run one API replica or pin token requests to one.
type TokenService struct {
	Keys       KeySource
	AccessTTL  time.Duration
	RefreshTTL time.Duration
	// MaxSessionAge bounds a refresh chain: no token is valid, and no refresh
	// is granted, past this long after the password sign-in that started
	// the chain (default DefaultMaxSessionAge).
	MaxSessionAge time.Duration
	// Now is injectable for lifetime tests.
	Now func() time.Time
	// Ended records sign-outs for every replica (the store). Without it
	// they are kept in this process alone, which suits one replica.
	Ended SessionLedger

	mu    sync.Mutex
	used  map[string]time.Time // redeemed refresh jti -> its expiry
	ended map[string]time.Time // without Ended: ended session -> until
}

func (s *TokenService) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *TokenService) accessTTL() time.Duration {
	if s.AccessTTL > 0 {
		return s.AccessTTL
	}
	return DefaultAccessTTL
}

func (s *TokenService) refreshTTL() time.Duration {
	if s.RefreshTTL > 0 {
		return s.RefreshTTL
	}
	return DefaultRefreshTTL
}

func (s *TokenService) maxSessionAge() time.Duration {
	if s.MaxSessionAge > 0 {
		return s.MaxSessionAge
	}
	return DefaultMaxSessionAge
}

// Issue signs a new access and refresh token for a tenant user. Neither
// outlives the session: both expire at the latest MaxSessionAge after
// sess.AuthTime.
func (s *TokenService) Issue(ctx context.Context, sess Session) (TokenPair, error) {
	key, err := s.Keys.SigningKey(ctx)
	if err != nil {
		return TokenPair{}, err
	}
	now := s.now().Truncate(time.Second)
	authTime := sess.AuthTime.Truncate(time.Second)
	if sess.AuthTime.IsZero() {
		authTime = now
	}
	end := authTime.Add(s.maxSessionAge())
	if !now.Before(end) {
		return TokenPair{}, s.sessionOver(authTime)
	}
	sid := sess.ID
	if sid == "" {
		if sid, err = randomID(); err != nil {
			return TokenPair{}, err
		}
	}
	pair := TokenPair{AccessExpiresAt: earliest(now.Add(s.accessTTL()), end), RefreshExpiresAt: earliest(now.Add(s.refreshTTL()), end)}
	mint := func(typ string, exp time.Time) (string, string, error) {
		jti, err := randomID()
		if err != nil {
			return "", "", err
		}
		claims := Claims{Tenant: sess.Tenant, TokenType: typ, AuthTime: jwt.NewNumericDate(authTime), SessionID: sid, RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    tokenIssuer,
			Subject:   sess.User,
			Audience:  jwt.ClaimStrings{tokenAudience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
			ID:        jti,
		}}
		if typ == TokenRefresh {
			claims.PasswordBinding = sess.PasswordBinding
		}
		signed, err := jwt.NewWithClaims(signingMethod, claims).SignedString(key)
		if err != nil {
			return "", "", fmt.Errorf("sign %s token: %w", typ, err)
		}
		return signed, jti, nil
	}
	if pair.Access, pair.ID, err = mint(TokenAccess, pair.AccessExpiresAt); err != nil {
		return TokenPair{}, err
	}
	if pair.Refresh, _, err = mint(TokenRefresh, pair.RefreshExpiresAt); err != nil {
		return TokenPair{}, err
	}
	return pair, nil
}

// Verify checks a token's signature, algorithm, issuer, audience, lifetime and
// type, and that its session has not been ended. Its errors are *Error with a
// reason safe to show the caller.
func (s *TokenService) Verify(ctx context.Context, token, wantType string) (*Claims, error) {
	claims, err := s.parse(ctx, token)
	if err != nil {
		return nil, err
	}
	if claims.TokenType != wantType {
		return nil, &Error{fmt.Sprintf("a %s token was sent where a %s token is needed", orUnknown(claims.TokenType), wantType)}
	}
	if claims.SessionID != "" {
		ended, err := s.sessionEnded(ctx, claims.SessionID)
		if err != nil {
			return nil, err
		}
		if ended {
			return nil, errSignedOut
		}
	}
	return claims, nil
}

var errSignedOut = &Error{"this sign-in has ended (signed out); sign in again with POST /api/v1/tokens"}

// parse checks what a token says of itself: signature, algorithm, issuer,
// audience, lifetime, and that it names its subject, tenant and id.
func (s *TokenService) parse(ctx context.Context, token string) (*Claims, error) {
	key, err := s.Keys.SigningKey(ctx)
	if err != nil {
		return nil, err
	}
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{signingMethod.Alg()}),
		jwt.WithIssuer(tokenIssuer),
		jwt.WithAudience(tokenAudience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(s.now),
		jwt.WithStrictDecoding(),
	)
	var claims Claims
	_, err = parser.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		// WithValidMethods already refuses other algorithms; checking the
		// method object as well keeps that true if the option list changes.
		if t.Method != signingMethod {
			return nil, fmt.Errorf("unexpected signing algorithm %v", t.Header["alg"])
		}
		return key, nil
	})
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, &Error{"the token has expired; request a new one from POST /api/v1/tokens"}
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return nil, &Error{"the token's signature or algorithm is not accepted (tokens are HS256, signed by this server)"}
	case errors.Is(err, jwt.ErrTokenMalformed):
		return nil, &Error{"malformed token: expected a JWT"}
	case err != nil:
		return nil, &Error{"the token is not valid: " + err.Error()}
	}
	if claims.Subject == "" || claims.Tenant == "" || claims.ID == "" {
		return nil, &Error{"the token lacks its subject, tenant or id"}
	}
	return &claims, nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (s *TokenService) sessionOver(authTime time.Time) error {
	return &Error{fmt.Sprintf("this sign-in dates from %s and a sign-in lasts at most %v however often it is refreshed; sign in again with POST /api/v1/tokens",
		authTime.UTC().Format(time.RFC3339), s.maxSessionAge())}
}

// Redeem verifies a refresh token and marks it used; a second redemption of
// the same token fails, and so does any token of a session older than
// MaxSessionAge or lacking its sign-in time or password binding (tokens
// issued before chains were bounded).
func (s *TokenService) Redeem(ctx context.Context, refresh string) (*Claims, error) {
	s.forgetExpired()
	claims, err := s.Verify(ctx, refresh, TokenRefresh)
	if err != nil {
		return nil, err
	}
	if claims.AuthTime == nil || claims.PasswordBinding == "" || claims.SessionID == "" {
		return nil, &Error{"this refresh token does not say when its sign-in happened, which password it was made with or which session it belongs to; sign in again with POST /api/v1/tokens"}
	}
	if !s.now().Before(claims.AuthTime.Add(s.maxSessionAge())) {
		return nil, s.sessionOver(claims.AuthTime.Time)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used == nil {
		s.used = map[string]time.Time{}
	}
	if _, seen := s.used[claims.ID]; seen {
		return nil, &Error{"this refresh token has already been used; refresh tokens are single use, sign in again with POST /api/v1/tokens"}
	}
	s.used[claims.ID] = claims.ExpiresAt.Time
	return claims, nil
}

// End ends the session of token, an access or a refresh token of it: from
// then on every token of that sign-in is refused, on every replica that
// shares Ended, and no refresh continues it. A token that is not valid
// (expired, forged, of an ended session) ends nothing and is an *Error.
func (s *TokenService) End(ctx context.Context, token string) (*Claims, error) {
	claims, err := s.parse(ctx, token)
	if err != nil {
		return nil, err
	}
	if claims.SessionID == "" {
		return nil, &Error{"this token does not name its session, so it cannot end it; it expires at " + claims.ExpiresAt.UTC().Format(time.RFC3339)}
	}
	// No token of the session outlives its chain's bound.
	until := claims.ExpiresAt.Add(s.refreshTTL())
	if claims.AuthTime != nil {
		until = earliest(until, claims.AuthTime.Add(s.maxSessionAge()))
	}
	if s.Ended != nil {
		if err := s.Ended.EndSession(ctx, claims.SessionID, until); err != nil {
			return nil, fmt.Errorf("end session: %w", err)
		}
		return claims, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended == nil {
		s.ended = map[string]time.Time{}
	}
	s.ended[claims.SessionID] = until
	return claims, nil
}

func (s *TokenService) sessionEnded(ctx context.Context, id string) (bool, error) {
	if s.Ended != nil {
		ended, err := s.Ended.SessionEnded(ctx, id)
		if err != nil {
			return false, fmt.Errorf("look up session: %w", err)
		}
		return ended, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ended := s.ended[id]
	return ended, nil
}

// forgetExpired drops spent ids whose tokens have expired: Verify refuses
// those anyway, so the memory stays bounded by the tokens still alive.
func (s *TokenService) forgetExpired() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for jti, exp := range s.used {
		if !now.Before(exp) {
			delete(s.used, jti)
		}
	}
	for sid, until := range s.ended {
		if !now.Before(until) {
			delete(s.ended, sid)
		}
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "untyped"
	}
	return s
}

func randomID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes for a token id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// SigningKeySecretKey is the data key of the signing Secret.
const SigningKeySecretKey = "hs256-key"

const minSigningKeyBytes = 32

// SecretKeySource keeps the signing key in a Secret that it generates when
// absent, so every replica signs with the same key and the key survives
// restarts. Deleting the Secret (a new one is generated) or replacing its
// value rotates the key and invalidates every token issued before.
type SecretKeySource struct {
	// Client creates the Secret.
	Client client.Client
	// Reader reads it; pass the manager's APIReader so the Secret need not be
	// in the cache.
	Reader    client.Reader
	Namespace string
	Name      string
	// Reload is how long a loaded key is reused before it is read again
	// (default one minute): how long a rotation takes to reach every replica.
	Reload time.Duration

	mu     sync.Mutex
	key    []byte
	loaded time.Time
}

// SigningKey returns the key, generating the Secret on first use.
func (s *SecretKeySource) SigningKey(ctx context.Context) ([]byte, error) {
	reload := s.Reload
	if reload <= 0 {
		reload = time.Minute
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil && time.Since(s.loaded) < reload {
		return s.key, nil
	}
	key, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	s.key, s.loaded = key, time.Now()
	return key, nil
}

// Start makes sure the Secret exists when the manager starts (manager.Runnable),
// so an administrator finds it right after installation. A failure is logged,
// not fatal: API keys work without it and signing retries on first use.
func (s *SecretKeySource) Start(ctx context.Context) error {
	if _, err := s.SigningKey(ctx); err != nil {
		logf.FromContext(ctx).Error(err, "JWT signing key not ready; token sign-in fails until it is")
	}
	return nil
}

// NeedLeaderElection is false: every replica serving the API needs the key.
func (s *SecretKeySource) NeedLeaderElection() bool { return false }

func (s *SecretKeySource) ensure(ctx context.Context) ([]byte, error) {
	where := s.Namespace + "/" + s.Name
	var sec corev1.Secret
	err := s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, &sec)
	if apierrors.IsNotFound(err) {
		key := make([]byte, 64)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generate the JWT signing key: %w", err)
		}
		sec = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: map[string]string{
				posturev1.LabelManagedBy:      posturev1.ManagedByValue,
				"app.kubernetes.io/component": "jwt-signing-key",
			}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{SigningKeySecretKey: key},
		}
		err = s.Client.Create(ctx, &sec)
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create the JWT signing Secret %s: %w", where, err)
		}
		// Another replica created it first: use theirs.
		err = s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, &sec)
	}
	if err != nil {
		return nil, fmt.Errorf("read the JWT signing Secret %s: %w", where, err)
	}
	key := sec.Data[SigningKeySecretKey]
	if len(key) < minSigningKeyBytes {
		return nil, fmt.Errorf("the JWT signing Secret %s must hold at least %d bytes under data key %s (delete it and the operator generates a new one)", where, minSigningKeyBytes, SigningKeySecretKey)
	}
	return key, nil
}

// StaticKeySource is a fixed key, for tests.
type StaticKeySource []byte

func (k StaticKeySource) SigningKey(context.Context) ([]byte, error) { return k, nil }

// Binding fingerprints a user's password Secret for a refresh chain: an HMAC,
// under the signing key, of the tenant, the user, and the Secret's UID,
// resourceVersion and stored value. Any change to the Secret (a new password,
// a label), its replacement, or a rotation of the signing key gives another
// value, so the chains started before end at their next refresh. Being keyed, the fingerprint (readable in the JWT) gives no means
// to test guesses of the password offline.
func (s *TokenService) Binding(ctx context.Context, tenant, user string, sec *corev1.Secret, dataKey string) (string, error) {
	key, err := s.Keys.SigningKey(ctx)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	for _, part := range [][]byte{
		[]byte("posture password binding v1"), []byte(tenant), []byte(NormalizeEmail(user)),
		[]byte(sec.UID), []byte(sec.ResourceVersion), []byte(dataKey), sec.Data[dataKey],
	} {
		// Length-prefixed, so that no two different inputs share a message.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		mac.Write(n[:])
		mac.Write(part)
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:18]), nil
}
