package mcp

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// APIKeyPrefix starts every Posture API key; anything else a client sends as
// a bearer token is taken for a JWT from POST /api/v1/tokens.
const APIKeyPrefix = "pk_"

// errNoCredential is what platform tools report when the caller sent nothing.
var errNoCredential = errors.New("this tool reads the platform and needs an API key: " +
	"send the header Authorization: Bearer <API key or JWT> (HTTP), or set PROWLER_API_KEY for a local STDIO server. " +
	"Documentation tools (list_docs, search_docs, get_doc, get_ocsf_reference) work without one")

// AuthorizationForToken is the API's Authorization value for a token an MCP
// client presented: API keys travel as Api-Key, JWTs as Bearer.
func AuthorizationForToken(token string) string {
	if strings.HasPrefix(token, APIKeyPrefix) {
		return "Api-Key " + token
	}
	return "Bearer " + token
}

// ForwardAuthorization maps an MCP client's Authorization header to the
// value sent to the API. Clients are told to send Bearer; Api-Key is accepted
// as well because it is what the REST API itself documents.
func ForwardAuthorization(header string) (string, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !ok || token == "" {
		return "", errors.New("malformed Authorization header: expected Bearer <API key or JWT>")
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", errors.New("malformed Authorization header: the token contains white space")
	}
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return AuthorizationForToken(token), nil
	case strings.EqualFold(scheme, "Api-Key"):
		return "Api-Key " + token, nil
	}
	s := scheme
	if len(s) > 20 {
		s = s[:20]
	}
	return "", errors.New(`unsupported Authorization scheme "` + s + `": expected Bearer <API key or JWT>`)
}

// verifier checks a credential against the API once and remembers a success
// for a short while, so that a stateless MCP session (one HTTP request per
// message) does not cost an extra API round trip per message. Only successes
// are remembered: a revoked key is refused by the API itself on the next
// platform call, and by this gate within verifyTTL.
type verifier struct {
	api *apiClient
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	ok map[[32]byte]time.Time
}

const (
	verifyTTL        = 30 * time.Second
	verifyCacheLimit = 4096
)

func newVerifier(api *apiClient) *verifier {
	return &verifier{api: api, ttl: verifyTTL, now: time.Now, ok: map[[32]byte]time.Time{}}
}

// verify returns an *APIError with status 401 when the API refuses authz.
// Any other outcome (success, 402, 403, an unreachable API) lets the caller
// through: the credential is not known to be bad, and the platform tools
// report such failures precisely when they are used.
func (v *verifier) verify(ctx context.Context, authz string) error {
	key := sha256.Sum256([]byte(authz))
	now := v.now()
	v.mu.Lock()
	until, hit := v.ok[key]
	v.mu.Unlock()
	if hit && now.Before(until) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// GET /tenant authenticates without the subscription and permission
	// checks, so only a bad credential fails it. An API without it (older
	// than the endpoint) is asked for one ingestion instead: there 401 comes
	// before 402 and 403, so any other status also means the credential
	// itself was accepted.
	_, err := v.api.get(ctx, authz, "/tenant", nil)
	if isStatus(err, http.StatusNotFound) {
		_, err = v.api.get(ctx, authz, "/ingestions", url.Values{"page[size]": {"1"}, "fields[ingestions]": {"status"}})
	}
	if isStatus(err, http.StatusUnauthorized) {
		return err
	}
	var ae *APIError
	if err == nil || (errors.As(err, &ae) && ae.Status != 0 && ae.Status < 500) {
		v.mu.Lock()
		if len(v.ok) >= verifyCacheLimit {
			clear(v.ok)
		}
		v.ok[key] = now.Add(v.ttl)
		v.mu.Unlock()
	}
	return nil
}
