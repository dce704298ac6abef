package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/posture-dev/posture/internal/auth"
)

// TokenIssuer signs tenant users in and out: sign-in with a password,
// refresh, and sign-out. auth.CRAuthenticator is one; the manager hands it
// to the Server as Tokens beside handing it over as the authenticator.
type TokenIssuer interface {
	Login(ctx context.Context, tenant, email, password string) (auth.TokenPair, error)
	Refresh(ctx context.Context, refresh string) (auth.TokenPair, error)
	// SignOut ends the session token (an access or a refresh token)
	// belongs to.
	SignOut(ctx context.Context, token string) error
}

const maxTokenBody = 64 << 10

func (s *Server) tokenRoutes(mux *http.ServeMux) {
	mux.Handle("/api/v1/tokens", s.methods(map[string]handlerFunc{http.MethodPost: s.createToken}))
	mux.Handle("/api/v1/tokens/refresh", s.methods(map[string]handlerFunc{http.MethodPost: s.refreshToken}))
	mux.Handle("/api/v1/tokens/revoke", s.methods(map[string]handlerFunc{http.MethodPost: s.revokeToken}))
}

// noTokens answers the token endpoints of a server that issues no tokens.
func noTokens() *apiError {
	return newError(404, CodeNotFound, "token sign-in is not available: this server authenticates a static API key only")
}

type tokenRequest struct {
	Data *struct {
		Type       string `json:"type"`
		Attributes struct {
			Email    string `json:"email"`
			Password string `json:"password"`
			Tenant   string `json:"tenant"`
			Refresh  string `json:"refresh"`
			Token    string `json:"token"`
		} `json:"attributes"`
	} `json:"data"`
}

// readTokenRequest decodes a JSON:API body of the given resource type.
func readTokenRequest(w http.ResponseWriter, r *http.Request, wantType string) (*tokenRequest, *apiError) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != MediaType && mt != "application/json" {
		return nil, errorf(415, CodeUnsupportedMedia, "send the body as %s; Content-Type was %q", MediaType, r.Header.Get("Content-Type")).headerSource("Content-Type")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTokenBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, errorf(413, CodeFileTooLarge, "the request body is larger than %d bytes", maxTokenBody)
	}
	if err != nil {
		return nil, errorf(400, CodeInvalid, "reading the request body failed after %d bytes: %v", len(body), err)
	}
	var req tokenRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, newError(400, CodeInvalid, "the request body is empty; expected a JSON:API document with data").pointer("/data")
		}
		return nil, tokenBodyError(err, len(body))
	}
	// One document and nothing after it: trailing data would be ignored
	// otherwise, and an upload with data after its array is refused too.
	end := int(dec.InputOffset())
	if rest := bytes.TrimLeft(body[end:], " \t\r\n"); len(rest) > 0 {
		return nil, errorf(400, CodeInvalid, "the body is not valid JSON: unexpected data at byte %d after the document", len(body)-len(rest))
	}
	if req.Data == nil {
		return nil, newError(400, CodeInvalid, "the body must be a JSON:API document with a data member").pointer("/data")
	}
	if req.Data.Type != wantType {
		return nil, errorf(400, CodeInvalid, "data.type must be %q, got %q", wantType, req.Data.Type).pointer("/data/type")
	}
	return &req, nil
}

// tokenBodyError explains a body the decoder refused: where it broke (a
// byte offset) or which member has the wrong type (a pointer). The
// decoder's own messages name Go types and structs, which mean nothing to a
// client. Byte offsets count from 0, as an upload's do; size is the body's.
func tokenBodyError(err error, size int) *apiError {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return errorf(400, CodeInvalid, "%s must be %s, found a JSON %s", te.Field, jsonKindOf(te.Type.Kind()), te.Value).
			pointer("/" + strings.ReplaceAll(te.Field, ".", "/"))
	case errors.As(err, &te):
		return errorf(400, CodeInvalid, "the body must be a JSON object, found a JSON %s", te.Value)
	case errors.As(err, &se):
		return errorf(400, CodeInvalid, "the body is not valid JSON: %s at byte %d", strings.TrimPrefix(se.Error(), "json: "), se.Offset-1)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(400, CodeInvalid, "the body is not valid JSON: it ends at byte %d before the document is complete", size)
	}
	return errorf(400, CodeInvalid, "the body is not valid JSON: %v", err)
}

// jsonKindOf names the JSON kind a Go kind decodes from.
func jsonKindOf(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Bool:
		return "a boolean"
	}
	return "a number"
}

// createToken is POST /api/v1/tokens: email and password for a token pair.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	ti := s.Tokens
	if ti == nil {
		return noTokens()
	}
	req, aerr := readTokenRequest(w, r, "tokens")
	if aerr != nil {
		return aerr
	}
	a := req.Data.Attributes
	if a.Email == "" {
		return newError(400, CodeInvalid, "data.attributes.email is required").pointer("/data/attributes/email")
	}
	if a.Password == "" {
		return newError(400, CodeInvalid, "data.attributes.password is required").pointer("/data/attributes/password")
	}
	g := s.signInGuard()
	client := g.clientAddress(r)
	fail := func(reason string, err error) error {
		signInFailures.WithLabelValues(reason).Inc()
		s.Log.Info("sign-in failed", "email", logValue(a.Email), "client", client, "reason", reason)
		return err
	}
	// Every attempt counts against the email's bucket of the API's general
	// limit (--rate-limit), whoever asks; failures also count against the
	// guard's stricter buckets of the address and the email. Those are
	// checked before and after waiting for a slot: sign-ins queued behind
	// others may find them emptied meanwhile.
	if wait, ok := s.RateLimit.Allow("login:" + auth.NormalizeEmail(a.Email)); !ok {
		return fail(signInThrottledAccount, s.RateLimit.tooMany(wait))
	}
	if aerr, reason := g.throttled(client, a.Email); aerr != nil {
		return fail(reason, aerr)
	}
	release, aerr := g.slot(r.Context())
	if aerr != nil {
		return fail(signInBusy, aerr)
	}
	defer release()
	if aerr, reason := g.throttled(client, a.Email); aerr != nil {
		return fail(reason, aerr)
	}
	pair, err := ti.Login(r.Context(), a.Tenant, a.Email, a.Password)
	if err != nil {
		var ae *auth.Error
		if !errors.As(err, &ae) {
			return fail(signInError, s.tokenError(err))
		}
		g.failed(client, a.Email)
		return fail(signInBadCredentials, s.tokenError(err))
	}
	s.Log.Info("signed in", "user", logValue(a.Email), "client", client)
	writeTokens(w, pair)
	return nil
}

// logValue bounds what a caller typed before it goes into the log: an email
// is at most 254 bytes, and the body allows 64 KiB.
func logValue(v string) string {
	const limit = 254
	if len(v) > limit {
		return v[:limit] + "…"
	}
	return v
}

// refreshToken is POST /api/v1/tokens/refresh: a refresh token (single use)
// for a new pair.
func (s *Server) refreshToken(w http.ResponseWriter, r *http.Request) error {
	ti := s.Tokens
	if ti == nil {
		return noTokens()
	}
	req, aerr := readTokenRequest(w, r, "tokens-refresh")
	if aerr != nil {
		return aerr
	}
	if req.Data.Attributes.Refresh == "" {
		return newError(400, CodeInvalid, "data.attributes.refresh is required").pointer("/data/attributes/refresh")
	}
	pair, err := ti.Refresh(r.Context(), req.Data.Attributes.Refresh)
	if err != nil {
		var ae *auth.Error
		if errors.As(err, &ae) {
			// The reason names the user when the token was genuine; the
			// token itself is a credential and stays out of the log.
			s.Log.Info("refresh refused", "client", s.signInGuard().clientAddress(r), "reason", ae.Reason)
		}
		return s.tokenError(err)
	}
	writeTokens(w, pair)
	return nil
}

// revokeToken is POST /api/v1/tokens/revoke: sign-out. The session the token
// (access or refresh) belongs to ends on every replica: none of its tokens
// authenticates or refreshes afterwards, wherever it was copied to.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	se := s.Tokens
	if se == nil {
		return noTokens()
	}
	req, aerr := readTokenRequest(w, r, "tokens-revoke")
	if aerr != nil {
		return aerr
	}
	if req.Data.Attributes.Token == "" {
		return newError(400, CodeInvalid, "data.attributes.token is required: the access or refresh token of the session to end").pointer("/data/attributes/token")
	}
	if err := se.SignOut(r.Context(), req.Data.Attributes.Token); err != nil {
		return s.tokenError(err)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) tokenError(err error) error {
	var ae *auth.Error
	if errors.As(err, &ae) {
		return newError(401, CodeNotAuthenticated, ae.Reason).pointer("/data/attributes")
	}
	return fmt.Errorf("sign in: %w", err)
}

func writeTokens(w http.ResponseWriter, p auth.TokenPair) {
	// Tokens are credentials: no cache may keep them.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, document{
		Data: resource{Type: "tokens", ID: p.ID, Attributes: map[string]any{
			"access":             p.Access,
			"refresh":            p.Refresh,
			"access_expires_at":  p.AccessExpiresAt.UTC().Format(time.RFC3339),
			"refresh_expires_at": p.RefreshExpiresAt.UTC().Format(time.RFC3339),
		}},
		Meta: meta{Version: APIVersion},
	})
}
